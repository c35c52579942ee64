"""Cloud TPU states and queued resource states as the provider contract's, with reasons;
creates left running are reported, not waited for."""

from __future__ import annotations

from providers.base import CLOUD_PENDING, CLOUD_STOPPED, SPOT, TAG_NODE_TYPE
from providers.local.gcp.tpu import Fault
from tests.providers.gcp.conftest import PROJECT, ZONE

QUEUED = {"acceleratorType": "v4-8", "queuedResource": {"validUntilDuration": "3600s"}}
TAGS = {TAG_NODE_TYPE: "tpu"}


def test_a_preempted_slice_says_so(provider, cloud):
    (node,) = provider.create_node({"acceleratorType": "v4-8", "market": SPOT}, TAGS, 1, "r").nodes
    cloud.preempt(PROJECT, ZONE, node.id)
    (listed,) = provider.nodes()
    assert (listed.state, listed.cloud_status) == (CLOUD_STOPPED, "PREEMPTED")
    assert "preempted" in listed.status_message


def test_a_waiting_queued_resource_is_waiting_for_capacity_until_its_deadline(provider, cloud):
    cloud.hold("provision")
    (node,) = provider.create_node(QUEUED, TAGS, 1, "req-1").nodes
    assert node.state == CLOUD_PENDING and node.waiting_for_capacity
    assert node.launched_at is not None
    assert node.waiting_until == node.launched_at + 3600


def test_a_failed_queued_resource_is_stopped_with_the_reason(provider, cloud):
    cloud.inject(Fault("queued_failed", method="provision"))
    provider.create_node(QUEUED, TAGS, 1, "req-1")
    (listed,) = provider.nodes()
    assert listed.state == CLOUD_STOPPED and not listed.waiting_for_capacity
    assert listed.cloud_status == "queued resource FAILED"
    assert "failed" in listed.status_message


def test_a_create_left_running_is_reported_with_a_handle_to_poll(make_provider, cloud):
    provider = make_provider(operation_wait_s=0.1)
    cloud.hold("create")
    result = provider.create_node({"acceleratorType": "v4-8"}, TAGS, 1, "req-1")
    assert result.operations and cloud.calls["create"] == 1
    assert len(result.nodes) + result.in_progress == 1
    (handle,) = result.operations
    assert provider.operation_status(handle).done is False
    cloud.release("create")
    status = provider.operation_status(handle)
    assert status.done and status.error is None


def test_a_create_that_fails_later_reports_the_clouds_error(make_provider, cloud):
    provider = make_provider(operation_wait_s=0.1)
    cloud.hold("create")
    cloud.inject(Fault("stockout", zone=ZONE, accelerator_type="v4-8"))
    (handle,) = provider.create_node({"acceleratorType": "v4-8"}, TAGS, 1, "req-1").operations
    cloud.release("create")
    status = provider.operation_status(handle)
    assert status.done and status.error is not None
    assert status.error.kind == "capacity" and status.error.offering.zone == ZONE


def test_a_terminated_slice_is_listed_stopped_so_it_is_deleted(provider, cloud):
    cloud.put_node(
        PROJECT, ZONE, "alpha-gone", "v4-8", {"accel-cluster-name": "alpha"}, state="TERMINATED"
    )
    (listed,) = provider.nodes()
    assert (listed.state, listed.cloud_status) == (CLOUD_STOPPED, "TERMINATED")
    assert provider.terminate_nodes([listed.id]) == [listed.id]
