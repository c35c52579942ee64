"""The reconcile loop against the fake Compute Engine server: stopped capacity released at
once, creates left running never repeated, blocks honoured, Google's own words kept."""

from __future__ import annotations

import pytest

from autoscaler.cluster import Cluster
from autoscaler.config import parse_cluster_config
from autoscaler.lifecycle import ALLOCATED, STOPPED, TERMINATING, WAITING_FOR_REPORT
from autoscaler.reconciler import Reconciler
from autoscaler.state import PENDING_INTENT, StateStore
from autoscaler.status_view import build_status
from providers.gcp.provider import GcpNodeProvider
from providers.local.gcp.compute import ComputeCloud, Fault
from providers.local.gcp.rest import FakeServer
from tests.fakes.clock import Clock

CLUSTER = "gce"
PROJECT = "p"
ZONES = ["us-central1-a", "us-central1-b"]


@pytest.fixture
def cloud() -> ComputeCloud:
    return ComputeCloud(operation_polls=1)


@pytest.fixture
def url(cloud):
    with FakeServer(cloud.route) as server:
        yield server.url


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make(url, tmp_path, clock):
    def make_reconciler(**node_types) -> Reconciler:
        types = node_types or {
            "small": {"node_config": {"machineType": "n1-standard-8"}, "max_workers": 5},
            "big": {"node_config": {"machineType": "n1-standard-16"}, "max_workers": 5},
        }
        config = parse_cluster_config(
            {
                "cluster_name": CLUSTER,
                "max_workers": 10,
                "provider": {
                    "type": "gcp",
                    "project_id": PROJECT,
                    "region": "us-central1",
                    "availability_zone": ZONES,
                    "endpoint_url": url,
                    "operation_timeout_s": 10,
                    "operation_wait_s": 0.3,
                    "operation_poll_s": 0.02,
                    "retry_deadline_s": 2,
                },
                "available_node_types": types,
            },
            "test",
        )
        provider = GcpNodeProvider(config.provider_settings(), CLUSTER)
        return Reconciler(config, provider, StateStore(tmp_path / "state.db"), clock)

    return make_reconciler


def want(reconciler: Reconciler, clock: Clock, *bundles: dict) -> None:
    reconciler.store.set_demand({"bundles": list(bundles), "placement_groups": []}, clock())


def test_a_preempted_vm_is_deleted_in_the_round_it_is_seen_and_replaced(make, clock, cloud):
    reconciler = make()
    want(reconciler, clock, {"CPU": 6})
    reconciler.tick()
    (first,) = reconciler.provider.nodes()
    cloud.preempt(PROJECT, first.zone, first.id)

    result = reconciler.tick()

    assert first.id in result.terminated
    assert result.launched == {"small": 1}
    record = reconciler.store.node_records()[first.id]
    assert [state for state, _, _ in record.history][-2:] == [STOPPED, TERMINATING]
    said = [e.message for e in reconciler.store.events() if e.node_id == first.id]
    assert any("TERMINATED" in m and "releasing it now" in m for m in said)


def test_a_create_that_never_finishes_is_pending_capacity_and_never_sent_twice(make, clock, cloud):
    cloud.hold("bulkInsert")
    reconciler = make()
    want(reconciler, clock, {"CPU": 6})

    first = reconciler.tick()
    assert first.launched == {"small": 1}
    for _ in range(3):
        clock.advance(60)
        assert reconciler.tick().launched == {}
    assert cloud.calls["bulkInsert"] == 1
    (intent,) = reconciler.store.intents(PENDING_INTENT)
    assert intent.operations  # looked at again each round

    cloud.release("bulkInsert")
    reconciler.tick()
    assert reconciler.store.intents(PENDING_INTENT) == []
    assert cloud.calls["bulkInsert"] == 1


def test_a_create_that_fails_later_blocks_its_offering_in_googles_words(make, clock, cloud):
    cloud.hold("bulkInsert")
    cloud.inject(Fault("stockout", method="bulkInsert", zone=ZONES[0], times=1))
    reconciler = make(
        small={"node_config": {"machineType": "n1-standard-8"}, "availability_zone": ZONES[:1]},
        big={"node_config": {"machineType": "n1-standard-16"}, "availability_zone": ZONES[:1]},
    )
    want(reconciler, clock, {"CPU": 6})
    assert reconciler.tick().launched == {"small": 1}  # the create is still running
    cloud.release("bulkInsert")

    result = reconciler.tick()

    failed = [e for e in reconciler.store.events() if e.kind == "failed"]
    assert failed and "does not have enough resources" in failed[-1].message
    assert "SERVICE UNAVAILABLE" not in failed[-1].message
    assert failed[-1].data["code"] == "ZONE_RESOURCE_POOL_EXHAUSTED"
    assert result.launched == {"big": 1}  # the same round routes around the block


def test_a_regional_quota_blocks_the_type_in_every_zone_and_the_round_uses_another(
    make, clock, cloud
):
    cloud.inject(Fault("quota", method="bulkInsert", times=1))
    reconciler = make()
    want(reconciler, clock, {"CPU": 6})

    result = reconciler.tick()

    assert result.launched == {"big": 1}
    (block,) = reconciler.offerings.active()
    assert (block.instance_type, block.zone, block.kind) == ("n1-standard-8", None, "quota")
    want(reconciler, clock, *[{"CPU": 6}] * 3)  # the big node holds two
    assert reconciler.tick().launched == {"big": 1}  # never small, in any zone
    assert cloud.calls["bulkInsert"] == 3


def test_a_permission_error_blocks_every_create_and_the_demand_says_why(make, clock, cloud):
    cloud.inject(Fault("permission", method="bulkInsert"))
    reconciler = make()
    want(reconciler, clock, {"CPU": 6})

    result = reconciler.tick()

    assert result.launched == {}
    assert cloud.calls["bulkInsert"] == 1
    (infeasible,) = result.plan.infeasible
    assert "permission blocked" in infeasible.reason
    assert "compute.instances.create" in infeasible.reason
    reconciler.tick()
    assert cloud.calls["bulkInsert"] == 1
    status = build_status(Cluster(reconciler.config, reconciler.provider, reconciler.store, clock))
    (block,) = status["unavailable_offerings"]
    assert block["offering"] == "every create" and block["kind"] == "permission"
    assert "compute.instances.create" in block["message"]
    assert "permission blocked" in status["infeasible"][0]["reason"]


def test_a_zonal_stockout_sends_later_creates_to_the_other_zone_only(make, clock, cloud):
    reconciler = make(small={"node_config": {"machineType": "n1-standard-8"}, "max_workers": 5})
    cloud.inject(Fault("stockout", method="bulkInsert", zone=ZONES[0]))
    want(reconciler, clock, {"CPU": 6})
    reconciler.tick()
    inserts = cloud.calls["bulkInsert"]
    want(reconciler, clock, {"CPU": 6}, {"CPU": 6})

    assert reconciler.tick().launched == {"small": 1}

    assert cloud.calls["bulkInsert"] == inserts + 1  # straight to the zone that has room
    assert {n.zone for n in reconciler.provider.nodes()} == {ZONES[1]}


def test_a_new_node_is_recorded_with_its_offering_and_launch(make, clock):
    reconciler = make()
    want(reconciler, clock, {"CPU": 6})
    reconciler.tick()
    (node,) = reconciler.provider.nodes()
    record = reconciler.store.node_records()[node.id]
    assert record.state in (ALLOCATED, WAITING_FOR_REPORT) and record.kind == "worker"
    assert record.offering.startswith("n1-standard-8/us-central1-")
    assert record.request and "launched" in record.reason


def test_a_node_being_deleted_stays_terminating_and_is_asked_again_after_its_timeout(
    make, clock, cloud
):
    reconciler = make()
    want(reconciler, clock, {"CPU": 6})
    reconciler.tick()
    (first,) = reconciler.provider.nodes()
    cloud.hold("delete")  # the cloud takes its time deleting
    cloud.preempt(PROJECT, first.zone, first.id)
    assert first.id in reconciler.tick().terminated

    clock.advance(60)
    again = reconciler.tick()
    assert again.terminated == [] and again.launched == {}  # no second delete, no relaunch
    assert reconciler.store.node_records()[first.id].state == TERMINATING

    clock.advance(600)
    assert first.id in reconciler.tick().terminated  # (its replacement, never up, too)
    said = [e.message for e in reconciler.store.events() if e.node_id == first.id]
    assert any("after its delete; asking again" in m for m in said)
    cloud.release("delete")
    reconciler.tick()
    assert first.id not in reconciler.store.node_records()
