"""The reconcile loop against a real cloud API over HTTP (the fake Cloud TPU server)."""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from autoscaler.config import parse_cluster_config
from autoscaler.reconciler import Reconciler
from autoscaler.report import NodeReport, encode
from autoscaler.state import PENDING_INTENT, Intent, StateStore
from providers import cloud_for
from providers.base import TAG_LAUNCH_REQUEST, TAG_NODE_KIND, TAG_NODE_TYPE
from providers.gcp.provider import GcpNodeProvider
from providers.gcp.tpu import GcpTpuNodeProvider
from providers.local.gcp.tpu import Fault, TpuCloud, TpuEmulator
from tests.fakes.clock import Clock
from tests.fakes.clusters import gcp_settings

GCP_VALUE_LIMIT = cloud_for("gcp").tag_value_limit

CLUSTER = "rec"


@pytest.fixture
def cloud() -> TpuCloud:
    return TpuCloud()


@pytest.fixture
def provider_config(cloud):
    with TpuEmulator(cloud=cloud) as server:
        yield gcp_settings(server.url)


def config(provider_config, **overrides):
    node_types = {
        "tpu_v4_8": {
            "node_config": {"acceleratorType": "v4-8"},
            "cost_per_hour": 12.88,
            "max_workers": 10,
        },
        "tpu_v5e_8": {
            "node_config": {"acceleratorType": "v5litepod-8"},
            "availability_zone": ["us-central1-a"],
            "cost_per_hour": 20.0,
            "max_workers": 10,
        },
    }
    for name, changes in overrides.items():
        node_types[name] = {**node_types[name], **changes}
    return parse_cluster_config(
        {
            "cluster_name": CLUSTER,
            "max_workers": 20,
            "idle_timeout_minutes": 5,
            "provider": provider_config,
            "available_node_types": node_types,
        },
        "test",
    )


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make(provider_config, tmp_path, clock):
    def make_reconciler(**overrides) -> Reconciler:
        cfg = config(provider_config, **overrides)
        provider = GcpNodeProvider(cfg.provider_settings(), CLUSTER)
        return Reconciler(cfg, provider, StateStore(tmp_path / "state.db"), clock)

    return make_reconciler


def demand(reconciler: Reconciler, bundles: list[dict], clock: Clock) -> None:
    reconciler.store.set_demand({"bundles": bundles, "placement_groups": []}, clock())


def report(reconciler: Reconciler, node_id: str, idle_since: float | None, tpu: float = 4):
    reconciler.provider.set_tags(
        [node_id],
        encode(
            NodeReport(
                {"CPU": 240, "TPU": tpu, "accelerator_type:TPU-V4": 1},
                {"TPU": int(tpu)},
                {"CPU": 240, "TPU": tpu},
                {},
                idle_since,
            ),
            GCP_VALUE_LIMIT,
        ),
    )


def test_demand_launches_once_and_a_booting_node_counts_as_pending(make, clock):
    reconciler = make()
    demand(reconciler, [{"TPU": 4}], clock)
    first = reconciler.tick()
    assert first.launched == {"tpu_v4_8": 1}
    second = reconciler.tick()
    assert second.launched == {}
    (node,) = reconciler.provider.nodes()
    assert node.tags[TAG_NODE_TYPE] == "tpu_v4_8"
    kinds = [e.kind for e in reconciler.store.events()]
    assert kinds.count("launched") == 1


def test_a_backlog_that_max_workers_keeps_waiting_is_not_planned_again_each_round(make, clock):
    reconciler = make(tpu_v4_8={"max_workers": 1}, tpu_v5e_8={"max_workers": 0})
    demand(reconciler, [{"TPU": 4}] * 3, clock)
    assert reconciler.tick().launched == {"tpu_v4_8": 1}
    waiting = reconciler.tick()  # the node boots: its capacity is pending
    assert waiting.plans_made == 1
    for _ in range(3):
        clock.advance(10)
        again = reconciler.tick()  # nothing changed: the plan is handed back
        assert (again.plans_made, again.plans_reused) == (0, 1)
        assert again.plan == waiting.plan and again.launched == {}
    assert sum(i.count for i in again.plan.infeasible) == 2
    demand(reconciler, [{"TPU": 4}] * 4, clock)
    more = reconciler.tick()
    assert more.plans_made == 1 and sum(i.count for i in more.plan.infeasible) == 3


def test_crash_after_create_before_record_never_duplicates(make, clock):
    reconciler = make()
    demand(reconciler, [{"TPU": 4}], clock)
    request_id = "deadbeef00"
    reconciler.store.record_intent(Intent(request_id, "tpu_v4_8", 1, clock(), PENDING_INTENT))
    reconciler.provider.create_node(
        {"acceleratorType": "v4-8"},
        {TAG_NODE_TYPE: "tpu_v4_8", TAG_NODE_KIND: "worker", TAG_LAUNCH_REQUEST: request_id},
        1,
        request_id,
    )  # the process "died" here, before recording the outcome
    restarted = make()
    result = restarted.tick()
    assert result.launched == {}
    assert len(restarted.provider.nodes()) == 1
    assert [e.kind for e in restarted.store.events()].count("resolved") == 1


def test_capacity_failure_routes_to_the_next_cheapest_type(make, clock, cloud):
    cloud.inject(Fault("stockout", accelerator_type="v4-8"))
    reconciler = make()
    demand(reconciler, [{"TPU": 4}], clock)
    result = reconciler.tick()
    assert result.launched == {"tpu_v5e_8": 1}
    assert any("capacity" in failure for failure in result.failures)
    (blocked,) = reconciler.offerings.active()
    assert blocked.instance_type == "v4-8"
    assert reconciler.tick().launched == {}


def test_quota_blocks_the_offering_and_names_the_quota(make, clock, cloud):
    cloud.inject(Fault("quota"))
    reconciler = make()
    demand(reconciler, [{"TPU": 4}], clock)
    result = reconciler.tick()
    assert result.launched == {}
    failed = [e for e in reconciler.store.events() if e.kind == "failed"]
    assert failed and all(e.data["kind"] == "quota" for e in failed)
    assert {r.kind for r in reconciler.offerings.active()} == {"quota"}


def test_idle_nodes_are_retired_after_the_timeout_but_not_below_min_workers(make, clock):
    reconciler = make(tpu_v4_8={"min_workers": 1})
    demand(reconciler, [{"TPU": 4}, {"TPU": 4}], clock)
    reconciler.tick()
    nodes = reconciler.provider.nodes()
    assert len(nodes) == 2
    for node in nodes:
        report(reconciler, node.id, idle_since=clock())
    demand(reconciler, [], clock)
    clock.advance(4 * 60)
    assert reconciler.tick().terminated == []
    clock.advance(2 * 60)
    result = reconciler.tick()
    assert len(result.terminated) == 1  # min_workers keeps the other
    assert len(reconciler.provider.nodes()) == 1


def test_idle_node_is_kept_when_pending_demand_would_relaunch_it(make, clock):
    reconciler = make()
    demand(reconciler, [{"TPU": 4}], clock)
    reconciler.tick()
    (node,) = reconciler.provider.nodes()
    report(reconciler, node.id, idle_since=clock())
    clock.advance(10 * 60)
    kept = reconciler.tick()
    assert kept.terminated == []
    # Without the idle node, the request is the first round's; the round's own plan is
    # disruption's with every node: one plan made, two handed back.
    assert (kept.plans_made, kept.plans_reused) == (1, 2)


def test_a_node_that_never_reports_is_replaced(make, clock):
    reconciler = make()
    demand(reconciler, [{"TPU": 4}], clock)
    reconciler.tick()
    (first,) = reconciler.provider.nodes()
    clock.advance(31 * 60)
    result = reconciler.tick()
    assert result.terminated == [first.id]
    assert result.launched == {"tpu_v4_8": 1}
    assert any("stuck in waiting_for_report" in e.message for e in reconciler.store.events())


def test_under_reporting_node_is_planned_with_the_truth(make, clock):
    reconciler = make()
    demand(reconciler, [{"TPU": 4}], clock)
    reconciler.tick()
    (node,) = reconciler.provider.nodes()
    report(reconciler, node.id, idle_since=None, tpu=2)
    result = reconciler.tick()
    assert result.launched == {"tpu_v4_8": 1}  # the 4-chip bundle no longer fits it
    assert any(e.kind == "under-reported" for e in reconciler.store.events())


def test_another_clusters_node_is_never_touched(make, clock, provider_config):
    other = GcpTpuNodeProvider(provider_config, "other")
    other.create_node({"acceleratorType": "v4-8"}, {TAG_NODE_TYPE: "x"}, 1, "other0")
    reconciler = make()
    demand(reconciler, [], clock)
    clock.advance(3600)
    reconciler.tick()
    assert len(other.nodes()) == 1
    assert reconciler.provider.nodes() == []


def test_a_preempted_slice_is_deleted_in_the_round_it_is_seen_and_replaced(make, clock, cloud):
    reconciler = make(tpu_v4_8={"market": "spot"})
    demand(reconciler, [{"TPU": 4}], clock)
    reconciler.tick()
    (first,) = reconciler.provider.nodes()
    cloud.preempt("p", first.zone, first.id)

    result = reconciler.tick()

    assert result.terminated == [first.id]
    assert result.launched == {"tpu_v4_8": 1}
    assert first.id not in {n.id for n in reconciler.provider.nodes()}
    said = [e.message for e in reconciler.store.events() if e.node_id == first.id]
    assert any("PREEMPTED" in m and "preempted" in m for m in said)


QUEUED = {"acceleratorType": "v4-8", "queuedResource": {"validUntilDuration": "3600s"}}


def test_a_failed_queued_resource_is_deleted_at_once_and_replaced(make, clock, cloud):
    cloud.inject(Fault("queued_failed", method="provision", times=1))
    reconciler = make(tpu_v4_8={"node_config": QUEUED})
    demand(reconciler, [{"TPU": 4}], clock)
    reconciler.tick()
    (failed,) = reconciler.provider.nodes()

    result = reconciler.tick()

    assert result.terminated == [failed.id]
    assert result.launched == {"tpu_v4_8": 1}
    assert failed.id not in {n.id for n in reconciler.provider.nodes()}
    assert any("queued resource FAILED" in e.message for e in reconciler.store.events())


def test_a_queued_resource_waits_for_capacity_without_a_timeout_of_ours(make, clock, cloud):
    cloud.hold("provision")
    reconciler = make(tpu_v4_8={"node_config": QUEUED})
    demand(reconciler, [{"TPU": 4}], clock)
    reconciler.tick()
    clock.advance(50 * 60)  # past every booting timeout

    result = reconciler.tick()

    assert result.terminated == [] and result.launched == {}
    (view,) = result.nodes
    assert view.state == "queued" and "waiting for capacity" in view.record.reason
    assert view.node.waiting_until is not None


def test_a_queued_wait_may_be_bounded_per_node_type(make, clock, cloud):
    cloud.hold("provision")
    reconciler = make(tpu_v4_8={"node_config": QUEUED, "lifecycle_timeouts_s": {"queued": 600}})
    demand(reconciler, [{"TPU": 4}], clock)
    reconciler.tick()
    clock.advance(601)

    result = reconciler.tick()

    assert len(result.terminated) == 1
    assert any("waited 601s for capacity" in e.message for e in reconciler.store.events())


def test_a_create_left_running_counts_as_pending_and_is_not_sent_again(make, clock, cloud):
    cloud.hold("create")
    reconciler = make()
    demand(reconciler, [{"TPU": 4}], clock)
    assert reconciler.tick().launched == {"tpu_v4_8": 1}
    clock.advance(120)
    assert reconciler.tick().launched == {}
    assert cloud.calls.get("create") == 1
    cloud.release("create")
    reconciler.tick()
    assert reconciler.store.intents(PENDING_INTENT) == []


def test_two_monitors_on_one_state_launch_once_for_the_same_demand(make, clock):
    """The head's monitor service and a `monitor --once` share the cluster's state: their
    rounds take turns, so the second plans with the first's launch and adds nothing. Each
    round waits (up to a second) for the other to reach its plan, which, were the rounds
    not taking turns, makes both plan before either launches."""
    first, second = make(), make()
    demand(first, [{"TPU": 4}], clock)
    both_planning = threading.Barrier(2)

    def meeting_the_other(reconciler):
        plan = reconciler.current_plan

        def current_plan(*args, **kwargs):
            with contextlib.suppress(threading.BrokenBarrierError):
                both_planning.wait(timeout=1.0)
            return plan(*args, **kwargs)

        reconciler.current_plan = current_plan
        return reconciler

    with ThreadPoolExecutor(max_workers=2) as pool:
        rounds = list(pool.map(lambda r: meeting_the_other(r).tick(), (first, second)))
    assert sorted(sum(r.launched.values()) for r in rounds) == [0, 1]
    assert len(first.provider.nodes()) == 1
