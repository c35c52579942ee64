"""Launching Compute Engine VMs through the real client over HTTP: bulk inserts, labels,
GPU scheduling, spot, zone failover and idempotent retries."""

from __future__ import annotations

import pytest

from providers.base import (
    CLOUD_RUNNING,
    CLOUD_STOPPED,
    SPOT,
    TAG_CLUSTER,
    TAG_LAUNCH_REQUEST,
    TAG_NODE_TYPE,
)
from providers.errors import CapacityError
from providers.gcp.labels import resource_name
from providers.local.gcp.compute import Fault
from tests.providers.gcp.compute.conftest import CLUSTER, L4, PROJECT, T4, ZONES

TAGS = {TAG_NODE_TYPE: "l4"}


def test_many_vms_of_one_type_are_one_bulk_insert_with_deterministic_names(provider, cloud):
    result = provider.create_node(L4, TAGS, 3, "req-1")

    assert cloud.calls["bulkInsert"] == 1
    assert sorted(result.node_ids) == [resource_name(CLUSTER, "req-1", i) for i in range(3)]
    assert all(node.state == CLOUD_RUNNING and node.zone == ZONES[0] for node in result.nodes)
    assert all(node.internal_ip for node in result.nodes)
    assert result.nodes[0].tags == {**TAGS, TAG_CLUSTER: CLUSTER, TAG_LAUNCH_REQUEST: "req-1"}
    assert result.offering.zone == ZONES[0] and result.offering.instance_type == "g2-standard-8"
    assert provider.nodes() == list(result.nodes)


def test_gpu_vms_terminate_on_host_maintenance_and_attach_their_gpus(provider):
    (node,) = provider.create_node(T4, TAGS, 1, "req-1").nodes

    stored = provider.api.get(node.zone, node.id)
    assert stored.scheduling.on_host_maintenance == "TERMINATE"
    assert stored.guest_accelerators[0].accelerator_type.endswith("nvidia-tesla-t4")
    assert stored.machine_type.endswith("/n1-standard-8")


def test_boot_script_reaches_the_vm_metadata(provider):
    config = provider.cloud.with_boot_script(L4, "#!/bin/bash\necho hi\n")
    (node,) = provider.create_node(config, TAGS, 1, "req-1").nodes

    items = {i.key: i.value for i in provider.api.get(node.zone, node.id).metadata.items}
    assert items["startup-script"] == "#!/bin/bash\necho hi\n"


def test_market_spot_asks_for_spot_vms(provider):
    (node,) = provider.create_node({**L4, "market": SPOT}, TAGS, 1, "req-1").nodes

    assert provider.api.get(node.zone, node.id).scheduling.provisioning_model == "SPOT"
    assert node.market == SPOT


def test_a_retried_launch_request_never_creates_twice(provider, cloud):
    first = provider.create_node(L4, TAGS, 2, "req-1")
    again = provider.create_node(L4, TAGS, 2, "req-1")

    assert cloud.calls["bulkInsert"] == 1
    assert sorted(again.node_ids) == sorted(first.node_ids)
    assert len(cloud.instance_names()) == 2


def test_a_lost_answer_is_looked_up_by_label_before_any_resend(provider, cloud):
    cloud.inject(Fault("lost_answer", method="bulkInsert", times=1))

    result = provider.create_node(L4, TAGS, 2, "req-1")

    assert cloud.calls["bulkInsert"] == 1  # found by label: no resend
    assert len(result.nodes) == 2 and len(cloud.instance_names()) == 2


def test_a_stockout_in_one_zone_moves_on_to_the_next(provider, cloud):
    cloud.inject(Fault("stockout", zone=ZONES[0]))

    result = provider.create_node(L4, TAGS, 2, "req-1")

    assert {node.zone for node in result.nodes} == {ZONES[1]}
    assert result.offering.zone == ZONES[1]
    (error,) = result.errors
    assert isinstance(error, CapacityError) and error.offering.zone == ZONES[0]
    assert error.code == "ZONE_RESOURCE_POOL_EXHAUSTED"


def test_a_zone_short_of_capacity_gives_what_it_has_and_the_next_zone_the_rest(provider, cloud):
    cloud.capacity[ZONES[0]] = 2

    result = provider.create_node(L4, TAGS, 3, "req-1")

    zones = sorted(node.zone for node in result.nodes)
    assert zones == [ZONES[0], ZONES[0], ZONES[1]]
    assert len(set(result.node_ids)) == 3


def test_a_stockout_in_every_zone_is_capacity_for_the_type_everywhere(provider, cloud):
    cloud.inject(Fault("stockout_details"))

    with pytest.raises(CapacityError) as caught:
        provider.create_node(L4, TAGS, 1, "req-1")

    error = caught.value
    assert error.offering.zone is None and error.offering.instance_type == "g2-standard-8"
    assert error.code == "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"
    assert ZONES[0] in str(error) and ZONES[1] in str(error)
    assert cloud.instance_names() == []


def test_all_or_nothing_keeps_nothing_from_a_partial_fill(provider, cloud):
    cloud.capacity[ZONES[0]] = 1
    cloud.capacity[ZONES[1]] = 0

    with pytest.raises(CapacityError):
        provider.create_node(L4, TAGS, 2, "req-1", all_or_nothing=True)
    assert cloud.instance_names() == []


def test_a_preempted_spot_vm_stays_listed_stopped_until_deleted(provider, cloud):
    (node,) = provider.create_node({**L4, "market": SPOT}, TAGS, 1, "req-1").nodes
    cloud.preempt(PROJECT, node.zone, node.id)

    (listed,) = provider.nodes()
    assert listed.state == CLOUD_STOPPED

    assert provider.terminate_nodes([node.id]) == [node.id]
    assert provider.nodes() == []


def test_labels_are_set_with_the_fingerprint_and_keep_the_others(provider):
    (node,) = provider.create_node(L4, TAGS, 1, "req-1").nodes

    provider.set_tags([node.id], {"accel-node-status": "up"})
    provider.set_tags([f"{node.zone}/{node.id}"], {"accel-node-status": "idle"})

    labels = provider.node(node.id).tags
    assert labels["accel-node-status"] == "idle" and labels[TAG_NODE_TYPE] == "l4"
