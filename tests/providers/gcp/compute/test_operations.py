"""Compute Engine states with reasons, and operations: Google's own words on failure, and a
create left running reported (never waited for, never sent twice)."""

from __future__ import annotations

import pytest

from providers.base import CLOUD_STOPPED
from providers.errors import QuotaError
from providers.local.gcp.compute import Fault
from tests.providers.gcp.compute.conftest import L4, PROJECT, ZONES


def test_a_failed_operation_keeps_googles_words(provider, cloud):
    cloud.inject(Fault("quota", method="bulkInsert"))
    with pytest.raises(QuotaError) as caught:
        provider.create_node(L4, {}, 1, "req-1")
    assert "Quota 'CPUS' exceeded" in caught.value.raw_message
    assert "FORBIDDEN" not in str(caught.value)


def test_a_preempted_vm_is_stopped_with_the_reason(provider, cloud):
    (node,) = provider.create_node(L4, {}, 1, "req-1").nodes
    cloud.preempt(PROJECT, node.zone, node.id)
    (listed,) = provider.nodes()
    assert (listed.state, listed.cloud_status) == (CLOUD_STOPPED, "TERMINATED")
    assert "preemption" in listed.status_message


def test_a_create_left_running_is_pending_with_a_handle(make_provider, cloud):
    provider = make_provider(operation_wait_s=0.05)
    cloud.hold("bulkInsert")
    result = provider.create_node(L4, {}, 2, "req-1")
    assert cloud.calls["bulkInsert"] == 1  # never sent to the next zone as well
    assert len(result.nodes) + result.in_progress == 2
    (handle,) = result.operations
    assert provider.operation_status(handle).done is False
    cloud.release("bulkInsert")
    assert provider.operation_status(handle).done
    assert {n.zone for n in provider.nodes()} == {ZONES[0]}


def test_a_vm_a_failed_create_left_stopped_is_neither_counted_nor_its_name_reused(provider, cloud):
    from providers.base import TAG_CLUSTER, TAG_LAUNCH_REQUEST
    from providers.gcp.labels import resource_name
    from tests.providers.gcp.compute.conftest import CLUSTER

    burned = resource_name(CLUSTER, "req-1", 0)
    labels = {TAG_CLUSTER: CLUSTER, TAG_LAUNCH_REQUEST: "req-1"}
    cloud.put_instance(PROJECT, ZONES[0], burned, labels)
    cloud.preempt(PROJECT, ZONES[0], burned)  # TERMINATED, as a failed create leaves it

    result = provider.create_node(L4, {}, 1, "req-1")

    (node,) = result.nodes
    assert node.id != burned and node.state != CLOUD_STOPPED
    assert sorted(n.id for n in provider.nodes()) == sorted([burned, node.id])
