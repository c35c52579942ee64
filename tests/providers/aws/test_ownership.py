"""Listing, tagging and terminating touch only what the cluster owns, and page to the end."""

from __future__ import annotations

from providers.aws import client as client_module
from providers.base import TAG_CLUSTER, TAG_NODE_STATUS, TAG_NODE_TYPE
from tests.providers.aws.conftest import TAGS, Wire, node_config


def outsider(ec2, ami, tags: dict[str, str] | None = None) -> str:
    """An instance launched by someone else in the same account."""
    tag_list = [{"Key": key, "Value": value} for key, value in (tags or {}).items()]
    specs = [{"ResourceType": "instance", "Tags": tag_list}]
    answer = ec2.run_instances(
        ImageId=ami,
        InstanceType="m5.large",
        MinCount=1,
        MaxCount=1,
        **({"TagSpecifications": specs} if tags else {}),
    )
    return answer["Instances"][0]["InstanceId"]


def described(ec2, instance_id: str) -> dict:
    return ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]


def test_outsiders_are_never_listed_tagged_or_terminated(provider, ami, ec2):
    ours = provider.create_node(node_config(ami), TAGS, 1, "req-1").node_ids[0]
    untagged = outsider(ec2, ami)
    other_cluster = outsider(ec2, ami, {TAG_CLUSTER: "beta", TAG_NODE_TYPE: "gpu"})
    assert [n.id for n in provider.nodes()] == [ours]
    assert provider.node(untagged) is None and provider.node(other_cluster) is None
    provider.set_tags([untagged, other_cluster, ours], {TAG_NODE_STATUS: "idle"})
    assert provider.terminate_nodes([untagged, other_cluster, ours]) == [ours]
    assert "Tags" not in described(ec2, untagged)
    assert {t["Key"]: t["Value"] for t in described(ec2, other_cluster)["Tags"]} == {
        TAG_CLUSTER: "beta",
        TAG_NODE_TYPE: "gpu",
    }
    for instance_id in (untagged, other_cluster):
        assert described(ec2, instance_id)["State"]["Name"] == "running"
    assert described(ec2, ours)["State"]["Name"] in ("shutting-down", "terminated")


def test_tag_filters_apply_on_top_of_the_cluster(provider, make_provider, ami):
    provider.create_node(node_config(ami), {TAG_NODE_TYPE: "gpu"}, 2, "req-1")
    provider.create_node(node_config(ami), {TAG_NODE_TYPE: "cpu"}, 1, "req-2")
    make_provider("beta").create_node(node_config(ami), {TAG_NODE_TYPE: "cpu"}, 1, "req-3")
    assert len(provider.nodes()) == 3
    assert len(provider.nodes({TAG_NODE_TYPE: "cpu"})) == 1
    assert provider.nodes({TAG_NODE_TYPE: "tpu"}) == []
    assert provider.nodes({TAG_CLUSTER: "beta"}) == []  # a caller cannot widen ownership


def test_listing_pages_to_the_end(provider, ami, monkeypatch):
    for request in range(12):  # moto pages by reservation: one per create
        provider.create_node(node_config(ami), TAGS, 1, f"req-{request}")
    monkeypatch.setattr(client_module, "PAGE_SIZE", 5)
    wire = Wire(provider)
    assert len(provider.nodes()) == 12
    assert wire.sent["DescribeInstances"] == 3


def test_tags_are_set_in_one_call_for_many_nodes(provider, ami):
    ids = provider.create_node(node_config(ami), TAGS, 25, "req-1").node_ids
    wire = Wire(provider)
    provider.set_tags(ids, {TAG_NODE_STATUS: "ready", "accel-report": "x"})
    assert wire.sent["CreateTags"] == 1
    assert wire.sent["DescribeInstances"] == 1  # the ownership check, in one call too
    assert all(n.tags[TAG_NODE_STATUS] == "ready" for n in provider.nodes())


def test_the_cluster_tag_cannot_be_changed(provider, ami):
    ids = provider.create_node(node_config(ami), TAGS, 1, "req-1").node_ids
    provider.set_tags(ids, {TAG_CLUSTER: "beta"})
    assert provider.nodes()[0].tags[TAG_CLUSTER] == "alpha"


def test_terminations_are_batched(provider, ami, monkeypatch):
    ids = provider.create_node(node_config(ami), TAGS, 25, "req-1").node_ids
    monkeypatch.setattr(client_module, "IDS_PER_CALL", 10)
    wire = Wire(provider)
    assert sorted(provider.terminate_nodes(ids)) == sorted(ids)
    assert wire.sent["TerminateInstances"] == 3
    assert provider.nodes() == [] and all(provider.is_terminated(i) for i in ids[:2])


def test_a_terminated_node_is_still_described_as_terminated(provider, ami):
    node_id = provider.create_node(node_config(ami), TAGS, 1, "req-1").node_ids[0]
    provider.terminate_node(node_id)
    assert provider.node(node_id).state in ("terminating", "terminated")
    assert not provider.is_running(node_id) and provider.is_terminated(node_id)
