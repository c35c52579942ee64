"""Ray's cluster resource state, built with Ray's own generated classes, as our demand and
capacity."""

from __future__ import annotations

import pytest

from autoscaler.planner.model import PACK, SPREAD, STRICT_PACK, STRICT_SPREAD
from autoscaler.ray_cluster.state import from_resource_state, instance_key, parse_instance_key

pb = pytest.importorskip("ray.core.generated.autoscaler_pb2")

A100_TASK = {"CPU": 1.0, "GPU": 1.0, "accelerator_type:A100": 0.001}


def _gang(state, strategy: str, bundles: list[dict], constraint: str | None) -> None:
    gang = state.pending_gang_resource_requests.add(details=f"7e13:{strategy}|PENDING")
    for bundle in bundles:
        request = gang.requests.add()
        request.resources_bundle.update(bundle)
        if constraint:
            getattr(request.placement_constraints.add(), constraint).label_name = "_PG_7e13"


def _node(state, status: str, **fields) -> None:
    node = state.node_states.add(status=pb.NodeStatus.Value(status), **fields)
    node.total_resources.update({"CPU": 96.0, "GPU": 8.0})
    node.available_resources.update({"CPU": 95.0, "GPU": 7.0})


def test_pending_tasks_are_bundles_with_counts():
    state = pb.ClusterResourceState(cluster_resource_state_version=7)
    for resources, count in ((A100_TASK, 3), ({"CPU": 1.0, "neuron_cores": 2.0}, 1)):
        by_count = state.pending_resource_requests.add(count=count)
        by_count.request.resources_bundle.update(resources)
    ray = from_resource_state(state)
    assert {(tuple(sorted(b.resources.items())), b.count) for b in ray.demand.bundles} == {
        (tuple(sorted(A100_TASK.items())), 3),
        ((("CPU", 1.0), ("neuron_cores", 2.0)), 1),
    }
    assert ray.version == 7


@pytest.mark.parametrize(
    ("strategy", "constraint", "expected"),
    [
        ("STRICT_SPREAD", "anti_affinity", STRICT_SPREAD),
        ("STRICT_PACK", "affinity", STRICT_PACK),
        ("SPREAD", None, SPREAD),
        ("PACK", None, PACK),
    ],
)
def test_gangs_keep_their_strategy(strategy, constraint, expected):
    state = pb.ClusterResourceState()
    _gang(state, strategy, [{"GPU": 1.0}, {"GPU": 1.0}], constraint)
    (group,) = from_resource_state(state).demand.placement_groups
    assert (group.strategy, group.bundles, group.count) == (
        expected,
        ({"GPU": 1.0}, {"GPU": 1.0}),
        1,
    )


def test_identical_gangs_merge_and_request_resources_is_a_separate_constraint():
    state = pb.ClusterResourceState()
    for _ in range(2):
        _gang(state, "STRICT_SPREAD", [{"CPU": 1.0}] * 3, "anti_affinity")
    constraint = state.cluster_resource_constraints.add().resource_requests.add(count=4)
    constraint.request.resources_bundle.update({"GPU": 8.0})
    ray = from_resource_state(state)
    (group,) = ray.demand.placement_groups
    assert group.count == 2 and len(group.bundles) == 3
    assert [(b.resources, b.count) for b in ray.constraints.bundles] == [({"GPU": 8.0}, 4)]
    assert not ray.demand.bundles


def test_live_nodes_with_instance_type_status_and_idle_time():
    state = pb.ClusterResourceState()
    _node(
        state,
        "IDLE",
        node_id=bytes.fromhex("ab" * 28),
        instance_id="i-0abc/1",
        ray_node_type_name="a100",
        idle_duration_ms=12_500,
    )
    _node(state, "RUNNING", node_id=bytes(28))
    state.node_states[1].total_resources["node:__internal_head__"] = 1.0
    _node(state, "DEAD", node_id=bytes([1]) * 28)
    worker, head = from_resource_state(state).nodes
    assert (worker.node_id, worker.instance_id, worker.node_type) == ("ab" * 28, "i-0abc/1", "a100")
    assert worker.idle and worker.idle_s == 12.5 and not worker.head
    assert worker.total["GPU"] == 8.0 and worker.available["GPU"] == 7.0
    assert head.head and not head.idle and head.status == "RUNNING"
    assert parse_instance_key(worker.instance_id) == ("i-0abc", 1)


@pytest.mark.parametrize(("node_id", "host"), [("i-0abc", 0), ("tpu-v4-16-x", 1)])
def test_instance_keys_round_trip(node_id, host):
    assert parse_instance_key(instance_key(node_id, host)) == (node_id, host)
