"""Ray's placement strategies: PACK and SPREAD are preferences, STRICT_PACK and STRICT_SPREAD
are hard; request_resources capacity and the demand that fits it never launch twice."""

import pytest

from autoscaler.planner import (
    BundleDemand,
    Demand,
    ExistingNode,
    NodeType,
    PlacementGroupDemand,
    PlanRequest,
    plan,
)
from autoscaler.planner.verify import verify

GIB = 2**30
A10G = {"accelerator_type:A10G": 1}
G5 = NodeType("g5.xlarge", {"CPU": 4, "memory": 16 * GIB, "GPU": 1, **A10G}, 1.006)
G5X12 = NodeType("g5.12xlarge", {"CPU": 48, "memory": 192 * GIB, "GPU": 4, **A10G}, 5.672)
G5X48 = NodeType("g5.48xlarge", {"CPU": 192, "memory": 768 * GIB, "GPU": 8, **A10G}, 16.288)
CPU8 = NodeType("m6i.2xlarge", {"CPU": 8, "memory": 32 * GIB}, 0.384)
TYPES = (CPU8, G5, G5X12, G5X48)
# ScalingConfig(num_workers=2, use_gpu=True, accelerator_type="A10G"): one bundle per worker.
WORKER = {"CPU": 1, "GPU": 1, "accelerator_type:A10G": 0.001}


def _plan(groups=(), bundles=(), existing=(), types=TYPES):
    return plan(PlanRequest(tuple(types), Demand(tuple(bundles), tuple(groups)), tuple(existing)))


def _full_nodes(result, types=TYPES):
    """The launched units as pending nodes with all their capacity free."""
    by_name = {t.name: t for t in types}
    return tuple(
        ExistingNode(name, dict(by_name[name].resources), pending=True, node_id=f"{name}-{unit}")
        for name, count in result.launch_counts().items()
        for unit in range(count)
    )


def test_ray_train_pack_group_splits_onto_two_small_nodes():
    result = _plan([PlacementGroupDemand("PACK", (WORKER, WORKER))])
    assert result.launch_counts() == {"g5.xlarge": 2}
    assert result.cost_per_hour == 2 * 1.006


def test_pack_group_packs_where_that_costs_nothing_more():
    cpu_group = PlacementGroupDemand("PACK", ({"CPU": 2}, {"CPU": 2}, {"CPU": 4}))
    assert _plan([cpu_group]).launch_counts() == {"m6i.2xlarge": 1}


def test_pack_group_no_node_holds_whole_is_planned_split():
    big = PlacementGroupDemand("PACK", ({"GPU": 4, **{"accelerator_type:A10G": 0.001}},) * 3)
    result = _plan([big])
    assert result.infeasible == ()
    assert result.launch_counts() == {"g5.12xlarge": 3}  # cheaper than 8 + 4 GPUs


def test_spread_group_shares_a_node_when_cheaper():
    spread = PlacementGroupDemand("SPREAD", ({"CPU": 1},) * 3)
    assert _plan([spread]).launch_counts() == {"m6i.2xlarge": 1}


@pytest.mark.parametrize("strategy", ["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"])
def test_a_group_with_a_bundle_no_node_holds_launches_nothing_for_its_other_bundles(strategy):
    # Ray reserves a placement group whole or not at all, whatever its strategy.
    group = PlacementGroupDemand(strategy, ({"CPU": 4}, {"CPU": 4}, {"GPU": 16}), count=2)
    request = PlanRequest(TYPES, Demand((BundleDemand({"CPU": 4}, 1),), (group,)), ())
    result = plan(request, witness=True)
    assert result.launch_counts() == {"m6i.2xlarge": 1}  # for the lone bundle only
    (left_out,) = result.infeasible
    assert (left_out.resources, left_out.count) == ({"CPU": 8, "GPU": 16}, 2)
    assert left_out.reason.startswith("no node type can host it")
    assert f"in a {strategy} placement group of 3 bundles" in left_out.reason
    assert verify(request, result.witness, result.launch_counts()) == []


def test_strict_pack_still_needs_one_node():
    group = PlacementGroupDemand("STRICT_PACK", (WORKER, WORKER))
    assert _plan([group]).launch_counts() == {"g5.12xlarge": 1}
    too_big = PlacementGroupDemand("STRICT_PACK", ({"GPU": 4},) * 3)
    result = _plan([too_big])
    assert result.launches == ()
    assert result.infeasible[0].resources == {"GPU": 12.0}


def test_strict_spread_still_needs_distinct_nodes():
    gang = PlacementGroupDemand("STRICT_SPREAD", ({"CPU": 1},) * 3)
    assert _plan([gang]).launch_counts() == {"m6i.2xlarge": 3}


def test_request_resources_and_the_demand_it_covers_launch_once():
    """Ray Train asks request_resources for its workers and creates the PACK group: planned
    as the reconciler does (constraints against node totals, then the demand on that
    capacity), the group lands on the capacity already asked for."""
    held = _plan(bundles=[BundleDemand(WORKER, 2)])
    assert held.launch_counts() == {"g5.xlarge": 2}
    pending = _plan([PlacementGroupDemand("PACK", (WORKER, WORKER))], existing=_full_nodes(held))
    assert pending.launches == ()
    assert pending.placed_on_existing == 2
    assert pending.cost_per_hour == 0


def test_identical_groups_merge_without_changing_the_plan():
    one = PlacementGroupDemand("STRICT_SPREAD", ({"CPU": 4},) * 2, count=2)
    two = [PlacementGroupDemand("STRICT_SPREAD", ({"CPU": 4},) * 2)] * 2
    assert _plan([one]).launch_counts() == _plan(two).launch_counts() == {"m6i.2xlarge": 2}
    # gangs of mixed bundles stay apart: a node holds a big bundle of one, a small of another
    mixed = PlacementGroupDemand("STRICT_SPREAD", ({"CPU": 6}, {"CPU": 2}))
    assert _plan([mixed, mixed]).launch_counts() == {"m6i.2xlarge": 2}


def test_copies_of_a_mixed_gang_share_nodes_position_by_position():
    # Four copies of a two-bundle gang, three bundles per node: a node may hold bundles of
    # both positions so long as they come from different copies (8 bundles on 3 nodes;
    # holding one position per node would take 4).
    node = NodeType("c7i.xlarge", {"CPU": 3, "memory": 12 * GIB}, 0.2)
    gang = PlacementGroupDemand("STRICT_SPREAD", ({"CPU": 1, "memory": GIB}, {"CPU": 1}), 4)
    request = PlanRequest((node,), Demand((), (gang,)))
    result = plan(request, witness=True)
    assert result.launch_counts() == {"c7i.xlarge": 3}
    assert verify(request, result.witness, result.launch_counts()) == []
    hosts = [host for record in result.witness["nodes"] for host in record["hosts"]]
    assert any(len({p["source"]["bundle"] for p in host}) == 2 for host in hosts)


def test_neuron_gangs_take_three_bundles_of_three_groups_per_inf2():
    # Four STRICT_SPREAD groups of four 8-NeuronCore bundles: 16 bundles, no node holding
    # two of one group. An inf2.48xlarge (24 cores) holds three, of three groups, and a
    # trn1.32xlarge (32 cores) the other four: $73.43/h, where a node holding only one
    # position of the record needs four trn1.32xlarge ($86/h).
    inf2 = NodeType(
        "inf2.48xlarge", {"CPU": 192, "memory": 768 * GIB, "neuron_cores": 24}, 12.98127
    )
    trn1 = NodeType("trn1.32xlarge", {"CPU": 128, "memory": 512 * GIB, "neuron_cores": 32}, 21.5)
    bundles = tuple({"CPU": cpu, "neuron_cores": 8} for cpu in (1, 2, 3, 4))
    request = PlanRequest(
        (inf2, trn1), Demand((), (PlacementGroupDemand("STRICT_SPREAD", bundles, 4),))
    )
    result = plan(request, witness=True)
    assert result.launch_counts() == {"inf2.48xlarge": 4, "trn1.32xlarge": 1}
    assert result.cost_per_hour == result.lower_bound_per_hour
    assert verify(request, result.witness, result.launch_counts()) == []
