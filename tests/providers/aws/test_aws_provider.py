"""Boringly correct under faults: no duplicates, no leaks, never a touch on what we don't own."""

from __future__ import annotations

import urllib.request

import pytest
from botocore.exceptions import ReadTimeoutError

from providers.aws.errors import classify
from providers.base import TAG_CLUSTER, TAG_LAUNCH_REQUEST, TAG_NODE_TYPE
from providers.errors import (
    AccessDeniedError,
    CapacityError,
    InvalidConfigError,
    QuotaError,
    ThrottledError,
)
from tests.providers.aws.conftest import inject

TAGS = {TAG_NODE_TYPE: "gpu"}


def config(ami: str, **extra) -> dict:
    return {"InstanceType": "p4d.24xlarge", "ImageId": ami, **extra}


def test_create_tags_ownership_and_lists_only_this_cluster(provider, make_provider, ami):
    result = provider.create_node(config(ami), TAGS, 3, "req-1")
    assert len(result.node_ids) == 3 and not result.partial
    for node in provider.nodes():
        assert node.tags[TAG_CLUSTER] == "alpha"
        assert node.tags[TAG_LAUNCH_REQUEST] == "req-1"
        assert node.tags[TAG_NODE_TYPE] == "gpu"
        assert node.instance_type == "p4d.24xlarge"
    other = make_provider("beta")
    other.create_node(config(ami), TAGS, 1, "req-2")
    assert len(provider.nodes()) == 3 and len(other.nodes()) == 1
    assert provider.nodes({TAG_NODE_TYPE: "cpu"}) == []


def test_foreign_instances_are_never_listed_tagged_or_terminated(provider, ami, ec2):
    untagged = ec2.run_instances(ImageId=ami, InstanceType="m5.large", MinCount=1, MaxCount=1)
    foreign = untagged["Instances"][0]["InstanceId"]
    assert provider.nodes() == [] and provider.node(foreign) is None
    assert provider.terminate_nodes([foreign]) == []
    provider.set_tags([foreign], {"x": "y"})
    described = ec2.describe_instances(InstanceIds=[foreign])["Reservations"][0]["Instances"][0]
    assert described["State"]["Name"] == "running"
    assert "Tags" not in described


def test_retry_with_the_same_launch_request_never_launches_twice(provider, ami):
    first = provider.create_node(config(ami), TAGS, 2, "req-1")
    again = provider.create_node(config(ami), TAGS, 2, "req-1")
    assert again.node_ids == first.node_ids
    assert len(provider.nodes()) == 2


def test_capacity_in_one_zone_fails_over_to_the_next(provider, ami):
    seen = inject(
        provider,
        lambda name, body: (
            "InsufficientInstanceCapacity"
            if name == "RunInstances" and "us-east-1a" in body
            else None
        ),
    )
    provider.provider_config["availability_zone"] = "us-east-1a,us-east-1b"
    result = provider.create_node(config(ami), TAGS, 1, "req-1")
    assert result.offering.zone == "us-east-1b"
    assert [n.zone for n in result.nodes] == ["us-east-1b"]
    assert isinstance(result.errors[0], CapacityError)
    assert result.errors[0].offering.zone == "us-east-1a"
    assert seen.count("RunInstances") == 2


def test_capacity_everywhere_surfaces_for_the_offering(provider, ami):
    inject(
        provider,
        lambda name, body: "InsufficientInstanceCapacity" if name == "RunInstances" else None,
    )
    provider.provider_config["availability_zone"] = "us-east-1a,us-east-1b"
    with pytest.raises(CapacityError) as caught:
        provider.create_node(config(ami), TAGS, 1, "req-1")
    assert caught.value.code == "InsufficientInstanceCapacity"
    assert caught.value.offering.instance_type == "p4d.24xlarge"


@pytest.mark.parametrize(
    ("code", "error_class"),
    [
        ("VcpuLimitExceeded", QuotaError),
        ("UnauthorizedOperation", AccessDeniedError),
        ("InvalidSubnetID.NotFound", InvalidConfigError),
    ],
)
def test_non_capacity_errors_fail_fast_without_other_zones(provider, ami, code, error_class):
    seen = inject(provider, lambda name, body: code if name == "RunInstances" else None)
    provider.provider_config["availability_zone"] = "us-east-1a,us-east-1b"
    with pytest.raises(error_class) as caught:
        provider.create_node(config(ami), TAGS, 1, "req-1")
    assert seen.count("RunInstances") == 1
    assert caught.value.code == code
    if error_class is AccessDeniedError:
        assert caught.value.action == "ec2:RunInstances"
    if error_class is QuotaError:
        assert "vCPU quota" in caught.value.quota


def test_throttling_storm_is_retried_then_classified(make_provider, ami):
    provider = make_provider(max_attempts=3)
    seen = inject(provider, lambda name, body: "RequestLimitExceeded")
    with pytest.raises(ThrottledError):
        provider.nodes()
    assert 1 < seen.count("DescribeInstances") <= 4  # the SDK's own bounded retries


def test_partial_fill_is_reported(provider, ami):
    calls = []

    def rule(name, body):
        if name == "RunInstances":
            calls.append(name)
            # All three at once: no capacity; any one: one starts; the rest: no capacity.
            return "InsufficientInstanceCapacity" if len(calls) != 2 else None
        return None

    inject(provider, rule)
    result = provider.create_node(config(ami), TAGS, 3, "req-1")
    assert result.partial and len(result.node_ids) == 1
    assert isinstance(result.errors[0], CapacityError)


def test_gang_launch_is_all_or_nothing(provider, ami):
    result = provider.create_node(config(ami), TAGS, 4, "req-1", all_or_nothing=True)
    assert len(result.node_ids) == 4


def test_tag_updates_are_batched(provider, ami):
    ids = provider.create_node(config(ami), TAGS, 5, "req-1").node_ids
    seen = inject(provider, lambda name, body: None)
    provider.set_tags(ids, {"accel-node-status": "ready"})
    assert seen.count("CreateTags") == 1
    assert all(n.tags["accel-node-status"] == "ready" for n in provider.nodes())


def test_terminate_acts_only_on_owned_ids(provider, ami):
    ids = provider.create_node(config(ami), TAGS, 2, "req-1").node_ids
    assert provider.terminate_nodes([*ids, "i-0123456789abcdef0"]) == sorted(ids)
    assert provider.nodes() == []
    assert provider.is_terminated(ids[0])


def test_stopped_nodes_are_reused_when_cached(make_provider, ami):
    provider = make_provider(cache_stopped_nodes=True)
    first = provider.create_node(config(ami), TAGS, 2, "req-1").node_ids
    provider.terminate_nodes(first)
    assert {n.state for n in provider.nodes()} == {"stopped", "stopping"} or {
        n.state for n in provider.nodes()
    } == {"stopped"}
    again = provider.create_node(config(ami), TAGS, 2, "req-2")
    assert sorted(again.node_ids) == sorted(first)
    assert len(provider.nodes()) == 2


def test_instance_type_resources_fill_from_catalog_then_the_api(provider):
    assert provider.instance_type_resources("p4de.24xlarge")["accelerator_type:A100-80G"] == 1
    assert provider.instance_type_resources("a1.large")["CPU"] == 2  # not catalogued


def test_unknown_codes_keep_the_raw_code():
    class Fake:
        response = {"Error": {"Code": "Weird", "Message": "odd"}}

    error = classify(Fake(), "RunInstances")
    assert error.code == "Weird" and error.raw_message == "odd"


def test_timeout_after_the_instance_was_created_does_not_duplicate(provider, ami):
    sent = []

    def lose_the_answer(request, **_kwargs):
        body = request.body.decode() if isinstance(request.body, bytes) else request.body or ""
        if "Action=RunInstances" in body and not sent:
            sent.append(True)  # the cloud gets the call and launches, the answer is lost
            data = request.body.encode() if isinstance(request.body, str) else request.body
            forward = urllib.request.Request(
                request.url, data=data, method="POST", headers=dict(request.headers)
            )
            urllib.request.urlopen(forward).read()
            raise ReadTimeoutError(endpoint_url=request.url)
        return None

    provider.ec2.meta.events.register_first("before-send.ec2", lose_the_answer)
    result = provider.create_node(config(ami), TAGS, 1, "req-1")
    assert sent and len(result.node_ids) == 1
    assert len(provider.nodes()) == 1  # the SDK's retry duplicated it; the surplus is gone
