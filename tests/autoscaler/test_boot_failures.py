"""Nodes that never come up: replaced with their console as evidence, until a node type has
failed the same way FAILURE_LIMIT times in a row; then it is held (not launched, not
replaced), said in events, `status` and `monitor --once`. Over HTTP against the fake GCP
server (Compute Engine VMs and Cloud TPU slices in one cluster)."""

from __future__ import annotations

import pytest

from autoscaler.boot_failures import (
    FAILURE_LIMIT,
    HOLD_S,
    NOT_READ,
    Console,
    console_tail,
    record_failure,
)
from autoscaler.cluster import Cluster
from autoscaler.config import parse_cluster_config
from autoscaler.lifecycle import ALLOCATED, WAITING_FOR_REPORT
from autoscaler.reconciler import Reconciler
from autoscaler.report import NodeReport, encode
from autoscaler.state import StateStore
from autoscaler.status_view import build_status
from providers import cloud_for
from providers.base import TAG_NODE_TYPE
from providers.gcp.provider import GcpNodeProvider
from providers.local.gcp.compute import ComputeCloud
from providers.local.gcp.server import GcpEmulator
from tests.fakes.clock import Clock
from tests.fakes.clusters import gcp_settings

CLUSTER = "boot"
GCP_VALUE_LIMIT = cloud_for("gcp").tag_value_limit
STUCK_S = 31 * 60  # past the accelerator timeout for waiting_for_report (30 min)
FAILING_BOOT = (
    "Starting Google Compute Engine Startup Scripts...\n"
    "\x1b[0;32mstartup-script:\x1b[0m pip install accel-autoscaler\n"
    "\n"
    "startup-script: ERROR: Could not find a version that satisfies the requirement\n"
    "startup-script: exit status 1\n\n"
)


# Pure parts ---------------------------------------------------------------------------------
def test_console_tail_keeps_the_last_non_empty_lines_clean_and_bounded():
    text = "a\n\n\x1b[1;31mb\x1b[0m\r\n  \nc\x07\n" + "d" * 1000 + "\n\n"
    lines = console_tail(text, lines=3)
    assert lines[:2] == ("b", "c")
    assert len(lines[2]) <= 240 and lines[2].endswith("...")
    assert console_tail(None) == () and console_tail("\n \n") == ()


def streak_after(*causes, config="c1", start=0.0):
    streak, holds = None, []
    for n, cause in enumerate(causes):
        streak, held = record_failure(
            streak, "gpu", cause, f"n{n}", 1800, Console(("x",)), config, start + n
        )
        holds.append(held)
    return streak, holds


def test_a_streak_counts_the_same_cause_and_holds_at_the_limit():
    streak, holds = streak_after(*[WAITING_FOR_REPORT] * FAILURE_LIMIT)
    assert streak.count == FAILURE_LIMIT and holds == [False] * (FAILURE_LIMIT - 1) + [True]
    assert streak.held(streak.last_at, "c1") and streak.held_until == streak.last_at + HOLD_S
    assert not streak.held(streak.last_at, "c2")  # a changed config is not held
    assert f"{FAILURE_LIMIT} nodes in a row never reported" in streak.reason()


def test_another_cause_or_config_starts_a_new_streak():
    streak, _ = streak_after(WAITING_FOR_REPORT, WAITING_FOR_REPORT, ALLOCATED)
    assert (streak.cause, streak.count, streak.held_until) == (ALLOCATED, 1, None)
    streak, _ = streak_after(WAITING_FOR_REPORT, WAITING_FOR_REPORT)
    streak, held = record_failure(streak, "gpu", WAITING_FOR_REPORT, "n", 1, Console(), "c2", 9)
    assert streak.count == 1 and not held


def test_a_failure_after_a_hold_expired_holds_again_at_once():
    streak, _ = streak_after(*[WAITING_FOR_REPORT] * FAILURE_LIMIT)
    later = streak.held_until + 1
    again, held = record_failure(
        streak, "gpu", WAITING_FOR_REPORT, "n9", 1800, NOT_READ, "c1", later
    )
    assert held and again.held_until == later + HOLD_S
    assert again.console.lines == ("x",)  # the last console read stays the evidence


# Over the fake GCP server -------------------------------------------------------------------
@pytest.fixture
def compute() -> ComputeCloud:
    return ComputeCloud()


@pytest.fixture
def provider_config(compute):
    with GcpEmulator(compute=compute) as server:
        yield gcp_settings(server.url)


@pytest.fixture
def clock() -> Clock:
    return Clock()


def cluster_config(provider_config, **changes):
    node_types = {
        "l4": {
            "node_config": {"machineType": "g2-standard-8"},
            "region": "us-central1",
            "availability_zone": ["us-central1-a"],
            "max_workers": 10,
        },
        "tpu_v4_8": {
            "node_config": {"acceleratorType": "v4-8"},
            "cost_per_hour": 12.88,
            "max_workers": 10,
        },
    }
    for name, change in changes.items():
        node_types[name] = {**node_types[name], **change}
    return parse_cluster_config(
        {
            "cluster_name": CLUSTER,
            "max_workers": 20,
            "provider": provider_config,
            "available_node_types": node_types,
        },
        "test",
    )


@pytest.fixture
def make(provider_config, tmp_path, clock):
    def make_reconciler(**changes) -> Reconciler:
        config = cluster_config(provider_config, **changes)
        provider = GcpNodeProvider(config.provider_settings(), CLUSTER)
        return Reconciler(config, provider, StateStore(tmp_path / "state.db"), clock)

    return make_reconciler


def demand(reconciler: Reconciler, *bundles: dict) -> None:
    reconciler.store.set_demand({"bundles": list(bundles), "placement_groups": []}, 0)


def nodes_of(reconciler: Reconciler, node_type: str) -> list:
    return [n for n in reconciler.provider.nodes() if n.tags[TAG_NODE_TYPE] == node_type]


def report(reconciler: Reconciler, node_id: str) -> None:
    resources = {"CPU": 8, "GPU": 1, "accelerator_type:L4": 1}
    tags = encode(NodeReport(resources, {"GPU": 1}, resources, {}, None), GCP_VALUE_LIMIT)
    reconciler.provider.set_tags([node_id], tags)


def events(reconciler: Reconciler, kind: str) -> list:
    return [e for e in reconciler.store.events(500) if e.kind == kind]


def fail_once(reconciler: Reconciler, clock: Clock):
    """The booting node times out: the next round terminates it (and replaces it or not)."""
    clock.advance(STUCK_S)
    return reconciler.tick()


def test_a_never_reporting_type_is_replaced_until_the_limit_then_held(make, clock, compute):
    reconciler = make()
    demand(reconciler, {"GPU": 1})
    assert reconciler.tick().launched == {"l4": 1}
    (first,) = nodes_of(reconciler, "l4")
    compute.set_serial_output(first.id, FAILING_BOOT)

    for failure in range(1, FAILURE_LIMIT):
        result = fail_once(reconciler, clock)
        assert len(result.terminated) == 1 and result.launched == {"l4": 1}, failure
        assert result.held == []
    result = fail_once(reconciler, clock)

    assert len(result.terminated) == 1 and result.launched == {}
    assert [h.node_type for h in result.held] == ["l4"]
    first_end = next(e for e in events(reconciler, "terminated") if e.node_id == first.id)
    assert "stuck in waiting_for_report" in first_end.message
    assert "never reported); replacing; last console:" in first_end.message
    assert "startup-script: exit status 1" in first_end.message  # the console's last line
    assert first_end.data["console"][-2:] == [
        "startup-script: ERROR: Could not find a version that satisfies the requirement",
        "startup-script: exit status 1",
    ]
    assert first_end.data["cause"] == WAITING_FOR_REPORT
    last_end = events(reconciler, "terminated")[-1]
    assert "not replacing: l4 is held" in last_end.message
    (held,) = events(reconciler, "held")
    assert held.message.startswith(
        f"stopped replacing l4: {FAILURE_LIMIT} nodes in a row never reported; last console:"
    )
    assert "Found startup-script in metadata." in held.message  # the last node's boot log
    assert "/var/log/accel-autoscaler-agent.log" in held.message
    assert held.data["held_until"] == clock() + HOLD_S

    # No further launches while held, however long the demand waits.
    for _ in range(3):
        clock.advance(STUCK_S)
        later = reconciler.tick()
        assert later.launched == {} and later.terminated == []
    assert nodes_of(reconciler, "l4") == []
    (infeasible,) = later.plan.infeasible
    assert "l4 (held: 3 nodes in a row never reported" in infeasible.reason


def test_the_hold_survives_a_restart_and_expires(make, clock):
    reconciler = make()
    demand(reconciler, {"GPU": 1})
    reconciler.tick()
    for _ in range(FAILURE_LIMIT):
        fail_once(reconciler, clock)
    restarted = make()
    assert list(restarted.holds()) == ["l4"]
    assert restarted.tick().launched == {}
    clock.advance(HOLD_S)
    assert restarted.tick().launched == {"l4": 1}  # one more try after the hold
    result = fail_once(restarted, clock)  # ... failing again holds at once
    assert result.launched == {} and [h.node_type for h in result.held] == ["l4"]


def test_a_changed_node_config_is_tried_again(make, clock):
    reconciler = make()
    demand(reconciler, {"GPU": 1})
    reconciler.tick()
    for _ in range(FAILURE_LIMIT):
        fail_once(reconciler, clock)
    same = make()  # a restart with the same config: still held
    assert list(same.holds()) == ["l4"]
    fixed = make(l4={"node_config": {"machineType": "g2-standard-8", "labels": {"fix": "1"}}})
    assert fixed.holds() == {}
    assert make(l4={"bootstrap_before": ["pip install --upgrade pip"]}).holds() == {}
    assert fixed.tick().launched == {"l4": 1}


def test_a_node_that_reports_resets_the_count(make, clock):
    reconciler = make()
    demand(reconciler, {"GPU": 1})
    reconciler.tick()
    for _ in range(FAILURE_LIMIT - 1):
        fail_once(reconciler, clock)
    assert reconciler.streaks()["l4"].count == FAILURE_LIMIT - 1
    (node,) = nodes_of(reconciler, "l4")
    report(reconciler, node.id)
    reconciler.tick()
    assert "l4" not in reconciler.streaks()
    demand(reconciler, {"GPU": 1}, {"GPU": 1})  # the reporting node is busy: one more
    assert reconciler.tick().launched == {"l4": 1}
    for _ in range(FAILURE_LIMIT - 1):
        result = fail_once(reconciler, clock)
        assert result.launched == {"l4": 1} and result.held == []
    assert events(reconciler, "held") == []


def test_min_workers_of_a_held_type_are_not_launched(make, clock):
    reconciler = make(l4={"min_workers": 1})
    assert reconciler.tick().launched == {"l4": 1}
    for _ in range(FAILURE_LIMIT):
        result = fail_once(reconciler, clock)
    assert result.launched == {}
    assert any("l4: held:" in note for note in result.plan.notes)
    clock.advance(STUCK_S)
    assert reconciler.tick().launched == {}


def test_a_tpu_vm_has_no_console_and_the_event_says_so(make, clock, compute):
    reconciler = make()
    demand(reconciler, {"TPU": 4})
    assert reconciler.tick().launched == {"tpu_v4_8": 1}
    fail_once(reconciler, clock)
    (ended,) = events(reconciler, "terminated")
    assert "no console output (the cloud keeps none for this node)" in ended.message
    assert "serialPort" not in compute.calls


def test_a_console_the_cloud_refuses_is_named_and_the_node_still_replaced(make, clock, compute):
    from providers.local.gcp.compute import Fault

    reconciler = make()
    demand(reconciler, {"GPU": 1})
    reconciler.tick()
    compute.inject(Fault("permission", method="serialPort"))
    result = fail_once(reconciler, clock)
    assert len(result.terminated) == 1 and result.launched == {"l4": 1}
    (ended,) = events(reconciler, "terminated")
    assert "console not readable" in ended.message
    assert "compute.instances.getSerialPortOutput" in ended.message


def test_status_gives_a_waiting_node_a_reason_and_lists_held_types_read_only(
    make, clock, compute, tmp_path
):
    reconciler = make()
    demand(reconciler, {"GPU": 1}, {"TPU": 4})
    reconciler.tick()
    (gpu,) = nodes_of(reconciler, "l4")
    compute.set_serial_output(gpu.id, FAILING_BOOT)
    clock.advance(10 * 60)
    reconciler.store.close()
    files = sorted(tmp_path.glob("state.db*"))
    before = {path.name: path.read_bytes() for path in files}
    store = StateStore.open_read_only(tmp_path / "state.db")
    cluster = Cluster(reconciler.config, reconciler.provider, store, clock)
    status = build_status(cluster)
    store.close()
    assert {path.name: path.read_bytes() for path in files} == before
    waiting = {n["node_type"]: n for n in status["nodes"]}
    assert waiting["l4"]["reason"].startswith("no report after 10 min; replaced at 30 min;")
    assert waiting["l4"]["reason"].endswith("startup-script: exit status 1")
    assert waiting["l4"]["console"][-1] == "startup-script: exit status 1"
    assert "no console output" in waiting["tpu_v4_8"]["reason"]
    assert status["held_node_types"] == []

    reconciler = make()
    for _ in range(FAILURE_LIMIT):
        fail_once(reconciler, clock)
    reconciler.store.close()
    store = StateStore.open_read_only(tmp_path / "state.db")
    status = build_status(Cluster(reconciler.config, reconciler.provider, store, clock))
    store.close()
    held = {h["node_type"]: h for h in status["held_node_types"]}
    assert set(held) == {"l4", "tpu_v4_8"}
    assert held["l4"]["failures"] == FAILURE_LIMIT
    assert held["l4"]["expires_in_seconds"] == HOLD_S
    assert held["l4"]["reason"] == "held: 3 nodes in a row never reported"
    assert held["l4"]["console"]


def test_a_node_fresh_enough_has_no_reason(make, clock):
    reconciler = make()
    demand(reconciler, {"GPU": 1})
    reconciler.tick()
    clock.advance(60)
    status = build_status(Cluster(reconciler.config, reconciler.provider, reconciler.store, clock))
    (node,) = status["nodes"]
    assert node["reason"] is None and node["console"] is None


def test_a_node_of_a_held_type_that_comes_up_ends_the_hold(make, clock):
    reconciler = make()
    demand(reconciler, {"GPU": 1})
    reconciler.tick()
    for _ in range(FAILURE_LIMIT):
        fail_once(reconciler, clock)
    assert list(reconciler.holds()) == ["l4"]
    late = reconciler.launch("l4", 1)[0][0]  # e.g. one launched before the hold
    report(reconciler, late.id)
    reconciler.tick()
    assert reconciler.holds() == {} and reconciler.streaks() == {}
    (released,) = events(reconciler, "released")
    assert released.message == (
        f"replacing l4 again: {late.id} came up (it was held after 3 nodes in a row never reported)"
    )
