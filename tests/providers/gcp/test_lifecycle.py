"""Creating, listing, tagging and deleting TPU slices through the real client library."""

from __future__ import annotations

import time

import pytest

from providers.base import (
    CLOUD_PENDING,
    CLOUD_RUNNING,
    TAG_CLUSTER,
    TAG_LAUNCH_REQUEST,
    TAG_NODE_KIND,
    TAG_NODE_STATUS,
    TAG_NODE_TYPE,
)
from providers.errors import ProviderError
from providers.local.gcp.tpu import TpuCloud
from tests.providers.gcp.conftest import CLUSTER, PROJECT, ZONE

WORKER_TAGS = {TAG_NODE_TYPE: "tpu_v4", TAG_NODE_KIND: "worker"}


def test_single_host_slice_is_created_running_with_ownership_labels(provider):
    result = provider.create_node({"acceleratorType": "v4-8"}, WORKER_TAGS, 1, "req-1")

    assert not result.partial and len(result.nodes) == 1
    node = result.nodes[0]
    assert node.state == CLOUD_RUNNING
    assert node.instance_type == "v4-8"
    assert node.zone == ZONE
    assert len(node.hosts) == 1 and node.internal_ip == node.hosts[0].internal_ip
    assert node.internal_ip is not None
    assert node.tags == {**WORKER_TAGS, TAG_CLUSTER: CLUSTER, TAG_LAUNCH_REQUEST: "req-1"}
    assert node.launched_at is not None and abs(node.launched_at - time.time()) < 60
    assert result.offering.instance_type == "v4-8" and result.offering.zone == ZONE
    assert provider.node(node.id) == node
    assert provider.is_running(node.id)


def test_multi_host_slice_is_one_node_with_every_host(provider):
    result = provider.create_node({"acceleratorType": "v4-16"}, WORKER_TAGS, 1, "req-1")

    (node,) = result.nodes
    assert [host.worker_id for host in node.hosts] == [0, 1]
    ips = [host.internal_ip for host in node.hosts]
    assert all(ips) and len(set(ips)) == 2
    assert node.internal_ip == ips[0]
    assert provider.nodes() == [node]


def test_count_creates_that_many_slices(provider, cloud):
    result = provider.create_node({"acceleratorType": "v4-16"}, WORKER_TAGS, 3, "req-1")

    assert len(set(result.node_ids)) == 3
    assert all(len(node.hosts) == 2 for node in result.nodes)
    assert sorted(provider.non_terminated_nodes()) == sorted(result.node_ids)
    assert cloud.calls["create"] == 3


def test_operations_that_finish_later_are_polled_to_completion(make_provider, cloud):
    cloud.operation_polls = 3
    provider = make_provider()

    result = provider.create_node({"acceleratorType": "v4-8"}, WORKER_TAGS, 1, "req-1")

    assert result.nodes[0].state == CLOUD_RUNNING
    assert cloud.calls["operation"] >= 3


def test_operation_timeout_returns_the_slice_pending_and_it_finishes_later(make_provider, cloud):
    cloud.hold("create")
    provider = make_provider(operation_timeout_s=0.3)

    result = provider.create_node({"acceleratorType": "v4-8"}, WORKER_TAGS, 1, "req-1")

    (node,) = result.nodes
    assert node.state == CLOUD_PENDING
    assert provider.non_terminated_nodes() == [node.id]
    cloud.release("create")
    assert provider.is_running(node.id)


def test_retrying_a_launch_request_never_creates_a_second_slice(provider, cloud):
    first = provider.create_node({"acceleratorType": "v4-16"}, WORKER_TAGS, 2, "req-1")
    again = provider.create_node({"acceleratorType": "v4-16"}, WORKER_TAGS, 2, "req-1")

    assert again.node_ids == first.node_ids
    assert len(cloud.node_names()) == 2
    assert cloud.calls["create"] == 4  # the retry asked, and the API said ALREADY_EXISTS


def test_retry_after_an_operation_timeout_finds_the_slice_still_creating(make_provider, cloud):
    cloud.hold("create")
    provider = make_provider(operation_timeout_s=0.2)

    first = provider.create_node({"acceleratorType": "v4-8"}, WORKER_TAGS, 1, "req-1")
    retry = provider.create_node({"acceleratorType": "v4-8"}, WORKER_TAGS, 1, "req-1")

    assert retry.node_ids == first.node_ids
    assert len(cloud.node_names()) == 1


def test_a_new_launch_request_creates_new_slices(provider, cloud):
    first = provider.create_node({"acceleratorType": "v4-8"}, WORKER_TAGS, 1, "req-1")
    second = provider.create_node({"acceleratorType": "v4-8"}, WORKER_TAGS, 1, "req-2")

    assert set(first.node_ids).isdisjoint(second.node_ids)
    assert len(cloud.node_names()) == 2


def test_terminate_deletes_a_multi_host_slice_as_one_unit(provider, cloud):
    (node,) = provider.create_node({"acceleratorType": "v4-32"}, WORKER_TAGS, 1, "req-1").nodes
    assert len(node.hosts) == 4

    assert provider.terminate_nodes([node.id]) == [node.id]

    assert cloud.calls["delete"] == 1
    assert cloud.node_names() == []
    assert provider.non_terminated_nodes() == []
    assert provider.is_terminated(node.id)


def test_a_slow_delete_leaves_the_slice_terminating_and_unlisted(make_provider, cloud):
    cloud.hold("delete")
    provider = make_provider(operation_timeout_s=0.2)
    (node,) = provider.create_node({"acceleratorType": "v4-8"}, WORKER_TAGS, 1, "req-1").nodes

    assert provider.terminate_nodes([node.id, node.id]) == [node.id]

    assert provider.node(node.id).state == "terminating"
    assert provider.non_terminated_nodes() == []
    assert provider.terminate_nodes([node.id]) == [node.id]  # already deleting: no new call
    assert cloud.calls["delete"] == 1
    cloud.release("delete")
    assert provider.node(node.id) is None


def test_set_tags_updates_labels_but_never_the_owner(provider):
    (node,) = provider.create_node({"acceleratorType": "v4-8"}, WORKER_TAGS, 1, "req-1").nodes

    provider.set_tags([node.id], {TAG_NODE_STATUS: "up-to-date", TAG_CLUSTER: "beta"})

    tags = provider.node_tags(node.id)
    assert tags[TAG_NODE_STATUS] == "up-to-date"
    assert tags[TAG_CLUSTER] == CLUSTER
    assert tags[TAG_NODE_TYPE] == "tpu_v4"


def _rival_undoes_writes(provider, cloud, times: int) -> None:
    """Another host of the slice writes labels it read before each of ``provider``'s writes
    (the TPU API has no fingerprint), undoing the first ``times`` of them."""
    write = provider.api.update_labels
    undone = []

    def write_then_lose(zone, node_id, labels):
        before = provider.node_tags(f"{zone}/{node_id}")
        operation = write(zone, node_id, labels)
        if len(undone) < times:
            undone.append(node_id)
            cloud.patch(PROJECT, zone, node_id, "labels", {"labels": before})
        return operation

    provider.api.update_labels = write_then_lose


def test_a_label_write_another_host_undid_is_written_again(provider, cloud):
    (node,) = provider.create_node({"acceleratorType": "v4-16"}, WORKER_TAGS, 1, "req-1").nodes
    _rival_undoes_writes(provider, cloud, times=2)

    provider.set_tags([node.id], {TAG_NODE_STATUS: "up-to-date"})

    assert provider.node_tags(node.id)[TAG_NODE_STATUS] == "up-to-date"


def test_a_label_write_other_hosts_keep_undoing_raises_so_the_agent_retries_it(provider, cloud):
    (node,) = provider.create_node({"acceleratorType": "v4-16"}, WORKER_TAGS, 1, "req-1").nodes
    _rival_undoes_writes(provider, cloud, times=1000)

    with pytest.raises(ProviderError, match="overwritten by concurrent writes"):
        provider.set_tags([node.id], {TAG_NODE_STATUS: "up-to-date"})

    assert TAG_NODE_STATUS not in provider.node_tags(node.id)


def test_tag_filters_select_nodes(provider):
    head = provider.create_node(
        {"acceleratorType": "v4-8"}, {TAG_NODE_KIND: "head", TAG_NODE_TYPE: "head"}, 1, "req-h"
    )
    worker = provider.create_node({"acceleratorType": "v4-8"}, WORKER_TAGS, 1, "req-w")

    assert provider.non_terminated_nodes({TAG_NODE_KIND: "head"}) == list(head.node_ids)
    assert provider.non_terminated_nodes({TAG_NODE_KIND: "worker"}) == list(worker.node_ids)
    assert provider.non_terminated_nodes({TAG_NODE_KIND: "other"}) == []


def test_listing_reads_every_page(provider, cloud: TpuCloud):
    for index in range(230):
        cloud.put_node(PROJECT, ZONE, f"n{index:03d}", "v4-8", {TAG_CLUSTER: CLUSTER})

    assert len(provider.nodes()) == 230
    assert cloud.calls["list"] == 3  # pages of 100, 100 and 30


def test_a_preempted_slice_stays_listed_stopped_until_it_is_deleted(provider, cloud):
    cloud.put_node(PROJECT, ZONE, "gone", "v4-8", {TAG_CLUSTER: CLUSTER}, state="PREEMPTED")
    cloud.put_node(PROJECT, ZONE, "up", "v4-8", {TAG_CLUSTER: CLUSTER}, state="READY")

    assert provider.non_terminated_nodes() == ["gone", "up"]
    assert provider.node("gone").state == "stopped"
    assert not provider.is_running("gone")

    assert provider.terminate_nodes(["gone"]) == ["gone"]
    assert provider.non_terminated_nodes() == ["up"]
