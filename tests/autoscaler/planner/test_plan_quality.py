"""Accelerator conservation, bounds, node counts and determinism of the planner."""

from __future__ import annotations

import itertools
import random
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from autoscaler.config import parse_cluster_config
from autoscaler.planner import (
    BundleDemand,
    Demand,
    Limits,
    NodeType,
    PlacementGroupDemand,
    PlanRequest,
    plan,
)
from autoscaler.planner import planner as planning
from autoscaler.planner.budget import Budget
from autoscaler.planner.capacity import Part
from autoscaler.planner.items import DEVICE_RESOURCES, fresh_host, is_accelerator_type

GIB = 2**30
CPU8 = NodeType("m6i.2xlarge", {"CPU": 8, "memory": 32 * GIB}, 0.384)
CPU32 = NodeType("m6i.8xlarge", {"CPU": 32, "memory": 128 * GIB}, 1.536)
A100 = NodeType(
    "p4d.24xlarge",
    {"CPU": 96, "memory": 1152 * GIB, "GPU": 8, "accelerator_type:A100": 1},
    32.77,
)
T4 = NodeType(
    "g4dn.xlarge", {"CPU": 4, "memory": 16 * GIB, "GPU": 1, "accelerator_type:T4": 1}, 0.526
)
T4X4 = NodeType(
    "g4dn.12xlarge", {"CPU": 48, "memory": 192 * GIB, "GPU": 4, "accelerator_type:T4": 1}, 3.912
)
L4 = NodeType(
    "g6.xlarge", {"CPU": 4, "memory": 16 * GIB, "GPU": 1, "accelerator_type:L4": 1}, 0.8048
)
V4_8 = NodeType("v4-8", {"CPU": 240, "TPU": 4, "accelerator_type:TPU-V4": 1}, 12.88)
V4_16 = NodeType(
    "v4-16",
    {"CPU": 240, "TPU": 4, "accelerator_type:TPU-V4": 1},
    25.76,
    hosts=2,
    head_resources={"TPU-v4-16-head": 1},
)


def run(types, bundles=(), groups=(), **limits):
    return plan(
        PlanRequest(
            tuple(types),
            Demand(tuple(BundleDemand(r, n) for r, n in bundles), tuple(groups)),
            (),
            Limits(**limits),
        )
    )


def cpu_only_on_accelerators(result, types) -> int:
    accelerated = {t.name for t in types if is_accelerator_type(t)}
    return sum(
        n
        for launch in result.launches
        if launch.node_type in accelerated
        for resources, n in launch.serves
        if not any(k in DEVICE_RESOURCES or k.startswith("accelerator_type:") for k in resources)
    )


# Accelerator conservation -------------------------------------------------------------------
def test_spare_puts_cpu_work_in_room_left_on_nodes_launched_for_accelerator_work():
    # The quickstart case: sixteen 1-GPU A100 tasks and 198 one-CPU tasks.
    bundles = [({"GPU": 1, "accelerator_type:A100": 0.001}, 16), ({"CPU": 1}, 198)]
    spare = run([CPU8, A100], bundles)
    # The 192 vCPUs of the two A100 nodes hold 192 tasks; six more need one plain node.
    assert spare.launch_counts() == {"p4d.24xlarge": 2, "m6i.2xlarge": 1}
    assert spare.infeasible == ()
    strict = run([CPU8, A100], bundles, accelerator_conservation="strict")
    assert strict.launch_counts()["p4d.24xlarge"] == 2
    assert cpu_only_on_accelerators(strict, [CPU8, A100]) == 0
    assert strict.launch_counts()["m6i.2xlarge"] == 25  # 198 tasks on 8-vCPU nodes
    assert spare.cost_per_hour < strict.cost_per_hour
    for result in (spare, strict):
        assert result.lower_bound_per_hour <= result.cost_per_hour


@pytest.mark.parametrize("policy", ["spare", "strict"])
def test_no_accelerator_node_is_launched_for_cpu_only_work(policy):
    # Per vCPU the accelerator node is cheaper here; a plain type still fits every task.
    cheap_gpu = NodeType("gpu", {"CPU": 64, "memory": 256 * GIB, "GPU": 1}, 1.0)
    result = run(
        [CPU8, cheap_gpu],
        [({"CPU": 1}, 100), ({"CPU": 2, "memory": 4 * GIB}, 30)],
        accelerator_conservation=policy,
    )
    assert set(result.launch_counts()) == {"m6i.2xlarge"}
    assert result.lower_bound_per_hour <= result.cost_per_hour


def test_spare_fills_only_room_that_accelerator_work_leaves():
    # One GPU task needs one T4 node; the CPU work beyond its 2 spare vCPUs goes to plain nodes.
    result = run([CPU8, T4, T4X4], [({"GPU": 1, "CPU": 2}, 1), ({"CPU": 1}, 18)])
    counts = result.launch_counts()
    assert counts.get("g4dn.xlarge") == 1 and "g4dn.12xlarge" not in counts
    assert counts["m6i.2xlarge"] == 2
    assert cpu_only_on_accelerators(result, [CPU8, T4, T4X4]) == 2


def test_policy_comes_from_the_cluster_yaml():
    base = {
        "provider": {"type": "aws", "region": "us-east-1"},
        "available_node_types": {"cpu": {"node_config": {"InstanceType": "m6i.large"}}},
    }
    assert parse_cluster_config(base).limits().accelerator_conservation == "spare"
    strict = parse_cluster_config({**base, "accelerator_conservation": "strict"})
    assert strict.limits().accelerator_conservation == "strict"
    with pytest.raises(Exception, match="accelerator_conservation"):
        parse_cluster_config({**base, "accelerator_conservation": "sometimes"})


# Bounds ---------------------------------------------------------------------------------------
def brute_force_cost(types, bundles, max_units=4):
    """Cheapest multiset of units that holds every bundle, by exhaustive search (tiny cases);
    conservation: an accelerator unit must hold a bundle that is not CPU-only."""
    parts = [
        (Part.of(resources, DEVICE_RESOURCES), _cpu_only(resources))
        for resources, n in bundles
        for _ in range(n)
    ]
    best = None
    for total in range(1, max_units + 1):
        for combo in itertools.combinations_with_replacement(types, total):
            cost = sum(t.price for t in combo)
            if best is not None and cost >= best:
                continue
            hosts = [fresh_host(t, 0, u) for u, t in enumerate(combo)]
            accelerated = [is_accelerator_type(t) for t in combo]
            if _assign(parts, 0, hosts, accelerated, [0] * total, [0] * total):
                best = cost
    return best


def _cpu_only(resources):
    return not any(k in DEVICE_RESOURCES or k.startswith("accelerator_type:") for k in resources)


def _assign(parts, position, hosts, accelerated, loads, anchors):
    """Place parts[position:] on the hosts; every used accelerator unit needs an anchor."""
    if position == len(parts):
        return all(not accelerated[u] or not loads[u] or anchors[u] for u in range(len(hosts)))
    part, cpu_only = parts[position]
    for u, host in enumerate(hosts):
        if host.fit_count(part, 1) < 1:
            continue
        grants = host.grant(part)
        loads[u] += 1
        anchors[u] += not cpu_only
        if _assign(parts, position + 1, hosts, accelerated, loads, anchors):
            return True
        loads[u] -= 1
        anchors[u] -= not cpu_only
        host.remove(part, 1, grants)
    return False


GPU2 = NodeType("gpu2", {"CPU": 8, "memory": 32 * GIB, "GPU": 2}, 1.1)
SMALL = NodeType("small", {"CPU": 2, "memory": 8 * GIB}, 0.1)
INF24 = NodeType("inf24", {"CPU": 16, "memory": 64 * GIB, "neuron_cores": 24}, 1.0)
INF2 = NodeType("inf2", {"CPU": 4, "memory": 16 * GIB, "neuron_cores": 2}, 0.2)
SMALL_CASES = {
    "fractional GPUs": (
        [SMALL, CPU8, GPU2, T4],
        [
            {"CPU": 1},
            {"CPU": 2, "memory": 6 * GIB},
            {"CPU": 3},
            {"GPU": 0.6},
            {"GPU": 0.5, "CPU": 1},
            {"GPU": 1, "CPU": 2},
        ],
    ),
    # Items above a half or a third of a host's room (the bound's per-host weights).
    "large items": (
        [INF24, INF2, CPU8],
        [
            {"neuron_cores": 16, "CPU": 1},
            {"neuron_cores": 10, "CPU": 2},
            {"neuron_cores": 8},
            {"neuron_cores": 2, "CPU": 1},
            {"CPU": 5},
            {"CPU": 3, "memory": 20 * GIB},
        ],
    ),
}


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("case", sorted(SMALL_CASES))
def test_bound_never_exceeds_the_true_optimum_on_small_problems(case, seed):
    types, shapes = SMALL_CASES[case]
    rng = random.Random(seed)
    bundles = [(shape, rng.randint(1, 2)) for shape in rng.sample(shapes, 3)]
    result = run(types, bundles)
    optimum = brute_force_cost(types, bundles)
    assert result.infeasible == ()
    assert result.lower_bound_per_hour <= optimum + 1e-6
    assert result.cost_per_hour >= optimum - 1e-6
    assert result.node_lower_bound <= result.node_count


# TPU slices mixed with single hosts ---------------------------------------------------------
def test_slices_and_single_hosts_are_mixed():
    single = {"TPU": 4, "accelerator_type:TPU-V4": 0.001}
    result = run([V4_8, V4_16], [(single, 2), ({"TPU": 4, "TPU-v4-16-head": 1}, 1)])
    assert result.launch_counts() == {"v4-16": 1, "v4-8": 1}
    assert result.cost_per_hour == pytest.approx(38.64)
    assert result.lower_bound_per_hour == pytest.approx(38.64)


# Fewer nodes ----------------------------------------------------------------------------------
def test_equal_cost_prefers_fewer_bigger_nodes():
    # m6i.8xlarge is exactly four m6i.2xlarge: same cost, a quarter of the nodes.
    result = run([CPU8, CPU32], [({"CPU": 1}, 64)])
    assert result.launch_counts() == {"m6i.8xlarge": 2}
    assert result.node_count == 2
    assert result.node_lower_bound == 2


def test_nodes_are_not_bought_with_a_real_cost_increase():
    dearer_big = NodeType("m6i.8xlarge", CPU32.resources, 1.536 * 1.2)
    result = run([CPU8, dearer_big], [({"CPU": 1}, 64)])
    assert result.launch_counts() == {"m6i.2xlarge": 8}


def test_fewer_nodes_are_bought_within_the_stated_tolerance():
    # The big node is 0.4% dearer per vCPU: within the 0.5% the plan may spend on fewer
    # nodes, so 2 big nodes replace 8 small ones; the plan says what it paid for that.
    slightly_dearer_big = NodeType("m6i.8xlarge", CPU32.resources, 1.536 * 1.004)
    result = run([CPU8, slightly_dearer_big], [({"CPU": 1}, 64)])
    assert result.launch_counts() == {"m6i.8xlarge": 2}
    assert result.cost_per_hour <= 1.005 * 8 * CPU8.price
    assert any("at most 0.5% dearer than the cheapest found" in n for n in result.notes)


# Determinism and quality on generated problems ------------------------------------------------
def generated(scale: int, kind: str, seed: int = 0, types: int | None = None):
    from autoscaler.demand import parse_demand

    cluster_doc, demand_doc = _problem(scale, kind, seed, types)
    config = parse_cluster_config(cluster_doc)
    return PlanRequest(config.node_types(), parse_demand(demand_doc), (), config.limits())


def _problem(scale: int, kind: str, seed: int, types: int | None = None):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
    from planner_problems import mixed_problem

    return mixed_problem(scale, kind, seed, types)


def with_head(request: PlanRequest, scale: int, kind: str, seed: int) -> PlanRequest:
    """``request`` with the head's free room, as a monitor round and ``autoscale plan``
    plan it."""
    cluster_doc, _ = _problem(scale, kind, seed)
    return replace(request, existing=parse_cluster_config(cluster_doc).head_existing_nodes())


def assert_places_all_within_three_percent(result) -> None:
    """Every feasible bundle of a generated problem placed, within 3% of a valid bound."""
    limited = [i for i in result.infeasible if "limited" in i.reason or "gang" in i.reason]
    assert limited == []
    assert len(result.infeasible) == 3  # the generator's three infeasible bundles
    assert result.lower_bound_per_hour <= result.cost_per_hour
    assert result.cost_per_hour <= 1.03 * result.lower_bound_per_hour


def test_same_input_gives_the_same_plan():
    request = generated(500, "flexible")
    assert plan(request) == plan(request)


@pytest.mark.parametrize(
    ("scale", "kind"), [(2000, "flexible"), (2000, "forced"), (200, "flexible")]
)
def test_generated_problems_are_within_three_percent_of_the_bound(scale, kind):
    request = generated(scale, kind)
    result = plan(request)
    assert_places_all_within_three_percent(result)
    assert result.node_lower_bound <= result.node_count <= 1.5 * result.node_lower_bound


def test_a_large_plan_whose_first_mip_stops_at_a_dive_s_plan_is_the_same_in_another_process(
    monkeypatch,
):
    # 2,000 bundles (some 300 units in the LP): the first rounding's MIP, whose root cut loop
    # is long here, stops once its bound shows the LP dive's plan close, and the dive's plan
    # (its rest improved) is kept. Where it stops is a callback, counted: the same plan again.
    from autoscaler.planner.master import LPDive
    from tests.autoscaler.planner.test_budget import in_two_processes

    dives = []
    run = LPDive.run
    monkeypatch.setattr(LPDive, "run", lambda self: dives.append(run(self)) or dives[-1])
    result = plan(generated(2000, "diverse", 3))
    assert dives and dives[0] is not None
    assert not [i for i in result.infeasible if "limited" in i.reason or "gang" in i.reason]
    assert result.lower_bound_per_hour <= result.cost_per_hour
    assert result.cost_per_hour <= 1.03 * result.lower_bound_per_hour
    runs = in_two_processes(
        "c, d = mixed_problem(2000, 'diverse', 3); config = parse_cluster_config(c, 'bench');"
        "r = plan(PlanRequest(config.node_types(), parse_demand(d), (), config.limits()));"
        "print(sorted(r.launch_counts().items()), r.cost_per_hour, r.lower_bound_per_hour)"
    )
    assert runs[0] == runs[1]
    assert runs[0].strip().endswith(f"{result.cost_per_hour} {result.lower_bound_per_hour}")


def test_gangs_stay_whole_under_limits():
    gang = PlacementGroupDemand("STRICT_SPREAD", ({"GPU": 1, "CPU": 1},) * 3, count=3)
    roomy = run([T4X4], groups=[gang], bundles=[({"CPU": 1}, 2)], max_workers=4)
    assert roomy.launch_counts() == {"g4dn.12xlarge": 3}  # slot j of every gang on node j
    assert roomy.infeasible == ()
    tight = run([T4X4], groups=[gang], bundles=[({"CPU": 1}, 2)], max_workers=2)
    (gangs,) = tight.infeasible  # no gang fits on two nodes; the CPU work still does
    assert gangs.count == 3
    assert sum(n for launch in tight.launches for _, n in launch.serves) == 2


# Small plans: exact pricing, dive, local improvement (second round) ---------------------------
M6I_LARGE = NodeType("m6i.large", {"CPU": 2, "memory": 8 * GIB}, 0.096)
M6I_16 = NodeType("m6i.16xlarge", {"CPU": 64, "memory": 256 * GIB}, 3.072)


def test_cpu_only_work_fills_big_nodes_of_a_flat_priced_family():
    # Per vCPU the family is flat: mixed sizes of CPU tasks land on few big nodes, not on
    # many small ones, and the plan costs no more than the cheapest small-node plan.
    bundles = [({"CPU": 1}, 70), ({"CPU": 2, "memory": 8 * GIB}, 30), ({"CPU": 4}, 9)]
    result = run([M6I_LARGE, CPU8, CPU32, M6I_16], bundles)
    assert result.infeasible == ()
    vcpus = 70 + 60 + 36
    assert result.cost_per_hour <= (vcpus / 2) * M6I_LARGE.price * (1 + 0.005) + 1e-9
    # 166 vCPUs at the flat price: two full 64-vCPU nodes, the 38 left on the fewest smaller
    # ones (a third big node would cost 15% more).
    assert result.launch_counts()["m6i.16xlarge"] == 2
    assert result.node_count <= 6


def test_local_improvement_never_makes_a_plan_dearer_or_drops_work():
    from autoscaler.planner.improve import improve
    from autoscaler.planner.items import assign_candidates, build_items
    from autoscaler.planner.packing import Kind, Pattern

    types = [M6I_LARGE, CPU8]
    demand = Demand((BundleDemand({"CPU": 1}, 4),))
    items = build_items(demand)
    assign_candidates(items, types)
    kinds = [
        Kind(i, t.name, t.price, None, (fresh_host(t, 0, -1),), True, items=items)
        for i, t in enumerate(types)
    ]
    # Four half-empty 2-vCPU nodes: two hold it all.
    chosen = [(Pattern(0, (((0, 1),),)), 4)]
    better = improve(chosen, kinds, {0: items[0]}, {0: 4}, None, 0.001)
    assert sum(p.totals()[0] * n for p, n in better) == 4
    cost = sum(kinds[p.kind].cost * n for p, n in better)
    assert cost == pytest.approx(2 * M6I_LARGE.price)
    assert sum(n for _, n in better) == 2


def test_local_improvement_splits_a_unit_whose_work_partly_fits_spare_devices_elsewhere():
    """An 8-GPU node whose work, less what fits the spare devices of a node bought for other
    work, fits a 4-GPU and a 1-GPU node becomes those two (no single cheaper node holds the
    rest, and no node can be emptied)."""
    from autoscaler.planner.improve import improve
    from autoscaler.planner.items import assign_candidates, build_items
    from autoscaler.planner.packing import Kind, Pattern, replay

    a100 = {"accelerator_type:A100": 1}
    ultra = NodeType("ultra8", {"CPU": 96, "GPU": 8, **a100, "accelerator_type:A100-80G": 1}, 16)
    sizes = [NodeType(f"a100x{n}", {"CPU": 12 * n, "GPU": n, **a100}, n) for n in (1, 4, 8)]
    types = [ultra, *sizes]
    typed = {"CPU": 1, "accelerator_type:A100": 0.001}
    demand = Demand(
        (
            BundleDemand({"CPU": 4, "GPU": 4, "accelerator_type:A100-80G": 0.001}, 1),
            BundleDemand({**typed, "GPU": 0.1}, 3),
            BundleDemand({**typed, "GPU": 2}, 3),
            BundleDemand({**typed, "GPU": 0.5}, 2),
            BundleDemand({**typed, "GPU": 0.25}, 4),
        )
    )
    items = build_items(demand)
    assign_candidates(items, types)
    kinds = [
        Kind(
            i,
            t.name,
            t.price,
            None,
            (fresh_host(t, 0, -1),),
            new=True,
            needs_anchor=True,
            items=[item for item in items if t.name in item.candidates],
        )
        for i, t in enumerate(types)
    ]
    counts = {item.index: item.count for item in items}
    # The ultra node holds the 80G work and the 0.1 shares; an 8-GPU A100 node the rest.
    chosen = [
        (Pattern(0, (((0, 1), (1, 3)),)), 1),
        (Pattern(3, (((2, 3), (3, 2), (4, 4)),)), 1),
    ]
    by_index = {item.index: item for item in items}
    better = improve(chosen, kinds, by_index, counts, None, 0.001)
    launched = {kinds[p.kind].node_type: n for p, n in better}
    assert launched == {"ultra8": 1, "a100x4": 1, "a100x1": 1}
    placed: dict[int, int] = {}
    for pattern, n in better:
        assert replay(kinds[pattern.kind], pattern, by_index) is not None  # it packs
        for index, copies in pattern.totals().items():
            placed[index] = placed.get(index, 0) + copies * n
    assert placed == counts


def test_exact_pricing_bounds_every_packing():
    from autoscaler.planner.items import build_items
    from autoscaler.planner.knapsack import best_unit
    from autoscaler.planner.packing import Kind, fit, pack

    rng = random.Random(3)
    gpu2 = NodeType("gpu2", {"CPU": 8, "memory": 32 * GIB, "GPU": 2}, 1.1)
    shapes = [{"CPU": 1}, {"GPU": 0.6, "CPU": 1}, {"GPU": 0.5, "CPU": 1}, {"GPU": 1, "CPU": 2}]
    items = build_items(Demand(tuple(BundleDemand(s, 4) for s in shapes)))
    kind = Kind(0, "gpu2", 1.1, None, (fresh_host(gpu2, 0, -1),), True, items=items)
    caps = {item.index: item.count for item in items}
    for _ in range(20):
        values = {item.index: rng.uniform(0, 1) for item in items}
        unit = best_unit(kind.hosts, items, values, caps, False, fit)
        for order in itertools.permutations(items):
            pattern = pack(kind, list(order), caps)
            worth = sum(values[i] * n for i, n in pattern.totals().items())
            assert worth <= unit.value_bound + 1e-6


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("kind", ["flexible", "forced", "gangs", "gcp"])
def test_small_generated_problems_are_within_three_percent_and_deterministic(kind, seed):
    request = generated(200, kind, seed)
    result = plan(request)
    assert result.lower_bound_per_hour <= result.cost_per_hour
    assert result.cost_per_hour <= 1.03 * result.lower_bound_per_hour
    assert [i for i in result.infeasible if "limited" in i.reason or "gang" in i.reason] == []
    assert plan(request) == result


@pytest.mark.parametrize(("kind", "seed"), [("flexible", 1), ("flexible", 2)])
def test_a_plan_that_would_miss_the_target_is_rounded_again_past_the_mip_budget(kind, seed):
    """With the head's free room these plans spent their MIP budget on their first rounding
    and came out 4-5% above their bounds; rounding again past the budget, as only a plan
    that may miss the target does, brings them within 3%."""
    request = with_head(generated(200, kind, seed), 200, kind, seed)
    result = plan(request)
    assert_places_all_within_three_percent(result)
    assert plan(request) == result


@pytest.mark.parametrize("seed", [20, 27, 31, 35])
def test_a_plan_greedy_pricing_leaves_far_from_its_bound_is_priced_exactly(seed):
    """Greedy pricing missed the cheapest mix on these (CPU-only bundles filling big
    accelerator units), and their plans were 3.4-5.1% above their bounds; exact pricing, as
    only a plan still missing the target after rounding again gets, brings them within 3%."""
    request = generated(200, "flexible", seed)
    result = plan(request)
    assert_places_all_within_three_percent(result)
    assert plan(request) == result


def test_a_plan_still_missing_the_target_after_exact_pricing_is_rounded_again():
    """This gang-heavy plan was 4.0% above its bound after exact pricing; rounding again the
    other ways over exact pricing's patterns, as only such a plan does, brings it within 3%."""
    request = generated(200, "gangs", 34)
    result = plan(request)
    assert [i for i in result.infeasible if "limited" in i.reason or "gang" in i.reason] == []
    assert result.lower_bound_per_hour <= result.cost_per_hour
    assert result.cost_per_hour <= 1.03 * result.lower_bound_per_hour
    assert plan(request) == result


def test_a_first_rounding_with_many_more_nodes_than_the_lp_is_rounded_again():
    """This plan's first rounding covered what the LP left with many small units: 57 nodes
    where the LP has about 32, though within 2% of its bound. Rounding again, as a plan with
    that many more units than the LP gets, finds one of 40 nodes that is cheaper too."""
    result = plan(generated(200, "flexible", 13))
    assert_places_all_within_three_percent(result)
    assert result.node_count <= 2 * result.node_lower_bound  # 40 nodes, 22 proven needed


def test_trimming_never_leaves_an_accelerator_unit_holding_only_cpu_work():
    """Trimming the copies beyond the demand once left a launched inf2 unit with only
    CPU-only bundles; the planner then dropped it and launched another node for them (4.7%
    above the bound). Now that unit becomes the cheapest kind that may hold its work."""
    assert_places_all_within_three_percent(plan(generated(200, "flexible", 41)))


@pytest.mark.parametrize("seed", range(6))
def test_tiny_gang_heavy_problems_are_proven_within_three_percent(seed):
    """A few bundles over 20-60 types: the bound's whole units must close what its LP leaves
    fractional (a plan of three nodes was once 5.9% above a bound it met exactly)."""
    result = plan(generated(20, "gangs", seed))
    assert result.lower_bound_per_hour <= result.cost_per_hour
    assert result.cost_per_hour <= 1.03 * result.lower_bound_per_hour
    assert [i for i in result.infeasible if "limited" in i.reason or "gang" in i.reason] == []


# Per-type limits that leave demand out --------------------------------------------------------
A_LARGE = NodeType("a.large", {"CPU": 8, "memory": 32 * GIB}, 0.40)
B_XLARGE = NodeType("b.xlarge", {"CPU": 16, "memory": 64 * GIB}, 0.90)
C_4XLARGE = NodeType("c.4xlarge", {"CPU": 48, "memory": 96 * GIB}, 2.30)


def test_where_limits_leave_demand_out_only_the_units_its_placed_copies_need_are_launched():
    # Four a.large and six b.xlarge hold 34 of the 40 bundles at most. Planned for all 40, the
    # plan took every unit both limits allow; three a.large do for the 34 it places: 6.60/h,
    # and nothing cheaper holds them (six b.xlarge and two a.large, or five and four, have
    # 112 CPUs of the 116 they need).
    types = [replace(A_LARGE, max_workers=4), replace(B_XLARGE, max_workers=6)]
    result = run(types, [({"CPU": 5, "memory": 2 * GIB}, 20), ({"CPU": 2, "memory": 9 * GIB}, 20)])
    assert sum(infeasible.count for infeasible in result.infeasible) == 6
    assert result.launch_counts() == {"a.large": 3, "b.xlarge": 6}
    assert result.cost_per_hour == pytest.approx(6.6)


@pytest.mark.parametrize("seed", [9, 13, 23, 28])
def test_a_plan_limits_leave_short_is_proven_within_three_percent(seed):
    # Bundles a unit holds only a few of, on types whose limits leave 100-190 of them out:
    # these plans were 6-28% above their bounds (the bound's LP over resources, and units
    # chosen for the copies left out too).
    rng = random.Random(seed)
    types = [
        replace(A_LARGE, max_workers=rng.randint(20, 60)),
        replace(B_XLARGE, max_workers=rng.randint(10, 40)),
        replace(C_4XLARGE, max_workers=rng.randint(2, 10)),
    ]
    shapes = [
        ({"CPU": rng.choice([3, 5, 6, 7, 9, 11]), "memory": rng.choice([2, 5, 12, 20, 30]) * GIB})
        for _ in range(4)
    ]
    result = run(types, [(shape, rng.randint(20, 120)) for shape in shapes])
    assert sum(infeasible.count for infeasible in result.infeasible) >= 100
    assert result.lower_bound_per_hour <= result.cost_per_hour <= 1.03 * result.lower_bound_per_hour


def test_where_max_workers_leaves_demand_out_the_plan_made_again_never_loses_the_first():
    """A gang-heavy backlog bigger than the cluster (max_workers 15; without it the plan
    launches 26 nodes). Planning again for what the first plan placed, under the limit, used
    to place less (its rounding loses copies) and was dropped, keeping units chosen for
    copies the limit left out: 5.2% above the bound. With the first plan among those the
    replan chooses from, what it improves is kept: within 3%."""
    request = generated(200, "gangs", 2)
    assert plan(request).node_count > 15
    limited = replace(request, limits=replace(request.limits, max_workers=15))
    result = plan(limited)
    assert any("limited by max_workers" in i.reason for i in result.infeasible)
    assert result.node_count == 15
    assert result.lower_bound_per_hour <= result.cost_per_hour
    assert result.cost_per_hour <= 1.03 * result.lower_bound_per_hour


def test_where_max_workers_leaves_demand_out_the_replan_searches_every_pattern_it_has_seen():
    """A GCP backlog of 200 bundles (a seed outside the benchmark's) at 40% of the nodes its
    plan launches without a limit. Planning again for what the limited plan placed, the
    last MIP searched only the patterns near the LP's support, with the MIP work of a plan
    that had spent its budget several times over: it stopped at the plan it started from,
    13.8% above its bound. With every pattern seen and work of its own: within 3%."""
    request = generated(200, "gcp", 18)
    max_workers = int(0.4 * plan(request).node_count)
    limited = replace(request, limits=replace(request.limits, max_workers=max_workers))
    result = plan(limited)
    assert any("limited by max_workers" in i.reason for i in result.infeasible)
    assert result.lower_bound_per_hour <= result.cost_per_hour
    assert result.cost_per_hour <= 1.03 * result.lower_bound_per_hour


def test_planning_again_for_what_max_workers_placed_stops_once_the_first_plan_is_close(
    monkeypatch,
):
    """A mixed backlog of 200 bundles (a seed outside the benchmark's) at 60% of the nodes
    its plan launches without a limit. Planned again for what the limited plan placed, the
    roundings left out copies that plan places, and the search went on past them (exact
    pricing, rounding again, a last MIP): 64,872 units of work and 68,298 of MIP work. The
    first plan is now a candidate from the start, and within 2% of the LP it ends the
    search: the same plan for 24,613 and 4,198."""
    request = generated(200, "diverse", 10)
    max_workers = int(0.6 * plan(request).node_count)
    limited = replace(request, limits=replace(request.limits, max_workers=max_workers))
    spent: list[Budget] = []

    class Recorded(Budget):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            spent.append(self)

    monkeypatch.setattr(planning, "Budget", Recorded)
    result = plan(limited)
    assert any("limited by max_workers" in i.reason for i in result.infeasible)
    assert result.cost_per_hour <= 1.03 * result.lower_bound_per_hour
    budget = spent[0]  # the plan's own (others are made for bounds, with budgets of their own)
    assert budget.used + budget.mip_used < 40_000


@pytest.mark.parametrize("types", [50, 60])
def test_pricing_s_long_tail_leaves_work_for_rounding(types):
    """A gang-heavy backlog of 2,000 bundles over 50 or 60 node types, under 150 shapes:
    greedy pricing went on for 44 rounds that each moved the LP by under 0.1%, spent the
    whole work budget, and what the LP left was packed greedily: 3.9% and 4.5% above the
    bounds. Once pricing has spent a quarter of the plan's budget, it stops on a stall."""
    result = plan(generated(2000, "gangs", 1, types))
    assert not result.budget_reached
    assert result.cost_per_hour <= 1.03 * result.lower_bound_per_hour


@pytest.mark.parametrize(("kind", "seed", "types"), [("flexible", 21, 25), ("flexible", 26, 25)])
def test_a_large_plan_past_the_target_is_priced_exactly_too(kind, seed, types):
    """2,000-bundle backlogs (seeds outside the benchmark's) whose greedy pricing left the LP
    too dear (2.2% on the first): their plans were 3.4% and 3.1% above their bounds. Exact
    pricing, once only for plans of up to 100 new units, now repairs any that misses the
    target."""
    result = plan(generated(2000, kind, seed, types))
    assert result.cost_per_hour <= 1.03 * result.lower_bound_per_hour


def test_repairing_a_large_plan_leaves_its_work_budget_for_rounding():
    """A gang-heavy 2,000-bundle backlog over 20 node types whose plan of 410 units repair
    cannot bring within the target: a dive there fixed one unit per step, spent the whole
    work budget, and what it left was packed greedily. Large plans are repaired without a
    dive, their knapsacks' work limited."""
    assert not plan(generated(2000, "gangs", 35, 20)).budget_reached


def test_a_plan_every_way_of_rounding_leaves_far_from_its_bound_gets_a_mip_with_no_unit_fixed():
    """A GCP backlog of 200 bundles (a seed outside the benchmark's) where every way of
    rounding keeps whole units that are the wrong ones: 4.2-5.6% above its bound after all
    of them. A MIP over every pattern seen, with no unit fixed, finds a plan within 3%."""
    result = plan(generated(200, "gcp", 52))
    assert not [i for i in result.infeasible if "limited" in i.reason]
    assert result.lower_bound_per_hour <= result.cost_per_hour
    assert result.cost_per_hour <= 1.03 * result.lower_bound_per_hour


def test_a_plan_whose_lp_greedy_pricing_leaves_dear_is_priced_exactly_until_its_bound_holds():
    """A flexible-shaped backlog of 200 bundles (a seed outside the benchmark's) whose LP,
    after three rounds of exact pricing, was still dear and its Lagrangian bound weak: 3.4%
    above its bound. Priced on until pricing finds no more (at most ten rounds): within 3%."""
    result = plan(generated(200, "flexible", 51))
    assert result.lower_bound_per_hour <= result.cost_per_hour
    assert result.cost_per_hour <= 1.03 * result.lower_bound_per_hour


@pytest.mark.parametrize("limits", ["per type", "max_workers"])
def test_whole_gpu_work_is_not_bounded_into_gpus_that_cpu_bound_fractions_hold(limits):
    """Ten quarter-GPU tasks that each need all four vCPUs of an L4 node hold all ten L4
    nodes' GPUs (one each): the twenty 1-GPU tasks need three A100 nodes. The bound once let
    them share those GPUs' free three quarters (18% and, with the whole-GPU work beyond the
    cluster's max_workers, 45% below the plan); it now proves the plan optimal."""
    l4, a100 = replace(L4, max_workers=10), replace(A100, max_workers=4)
    bundles = [({"GPU": 1}, 20), ({"GPU": 0.25, "CPU": 4, "accelerator_type:L4": 0.001}, 10)]
    if limits == "per type":
        result = run([l4, a100], bundles)
    else:
        result = run([L4, A100], [*bundles, ({"GPU": 8}, 5)], max_workers=13)
    assert result.launch_counts() == {"g6.xlarge": 10, "p4d.24xlarge": 3}
    assert result.lower_bound_per_hour == pytest.approx(result.cost_per_hour)


def test_where_limits_leave_demand_out_a_rounding_that_drops_placed_copies_is_not_taken_as_close():
    """Type limits leave 32 copies out. Planned again for the copies it placed, rounding's
    cheapest plan left two of them out; its cost, as close to the bound as it was, stopped
    the search, and the plan made before (4 nodes more, 3.4% above the bound) stayed. A
    plan leaving out copies that the one before places is now never close: exact pricing
    finds the one that places them all at the bound."""
    a = NodeType("a.large", {"CPU": 8, "memory": 32 * GIB}, 0.40, max_workers=55)
    b = NodeType("b.xlarge", {"CPU": 16, "memory": 64 * GIB}, 0.90, max_workers=12)
    c = NodeType("c.4xlarge", {"CPU": 48, "memory": 96 * GIB}, 2.30, max_workers=7)
    shapes = [({"CPU": 9, "memory": 30 * GIB}, 22), ({"CPU": 6, "memory": 2 * GIB}, 24)]
    shapes += [({"CPU": 9, "memory": 12 * GIB}, 33), ({"CPU": 7, "memory": 20 * GIB}, 76)]
    result = run([a, b, c], shapes)
    assert sum(i.count for i in result.infeasible) == 32
    assert result.cost_per_hour == pytest.approx(47.30)
    assert result.lower_bound_per_hour == pytest.approx(result.cost_per_hour)


def test_a_small_plan_missing_the_target_gets_a_mip_over_every_pattern_seen():
    """A small Neuron backlog (found by a random-request check): every way of rounding, and
    the last MIP over the patterns near the LP's support, left it 3.7% above its bound
    ($12.54). The optimum over every pattern is $12.37 (checked by enumerating all of
    them); its pool holds that plan, so a small pool is searched whole."""

    def neuron_type(name, cpus, memory_gib, cores, family, price, most):
        resources = {"CPU": cpus, "memory": memory_gib * GIB, "neuron_cores": cores}
        resources |= {"accelerator_type:aws-neuron-core": 1, f"accelerator_type:{family}": 1}
        return NodeType(name, resources, price, max_workers=most)

    types = [
        neuron_type("trn1_small", 8, 32, 2, "Trainium", 1.34375, 8),
        neuron_type("trn1", 128, 512, 32, "Trainium", 21.5, 8),
        neuron_type("trn2", 192, 2048, 64, "Trainium2", 85.964, 2),
        neuron_type("inf2_small", 4, 16, 2, "Inferentia2", 0.7582, 16),
        neuron_type("inf2", 192, 768, 24, "Inferentia2", 12.98127, 4),
    ]
    bundles = [
        ({"neuron_cores": 0.5, "CPU": 2}, 3),
        ({"CPU": 1, "memory": 16 * GIB}, 3),
        ({"CPU": 4, "memory": 4 * GIB}, 1),
        ({"neuron_cores": 1}, 6),
        ({"neuron_cores": 1, "accelerator_type:Inferentia2": 0.001}, 2),
        ({"neuron_cores": 2}, 5),
        ({"neuron_cores": 0.3, "accelerator_type:Trainium": 0.001}, 10),
        ({"CPU": 1}, 1),
        ({"neuron_cores": 0.3, "CPU": 2, "accelerator_type:aws-neuron-core": 0.001}, 13),
    ]
    result = run(types, bundles, max_workers=29)
    assert result.infeasible == ()
    assert result.cost_per_hour == pytest.approx(12.37145)
    assert result.cost_per_hour <= 1.03 * result.lower_bound_per_hour


def test_a_gpu_that_a_fraction_holds_keeps_a_whole_node_request_off_its_node():
    """A STRICT_SPREAD group puts a tenth of an L40S on each of two 8-GPU L40S nodes, so
    neither can take a bundle needing all eight GPUs of one host: both 8-GPU bundles go to
    T4 nodes. The bound once counted the L40S nodes' fourteen whole GPUs together and let
    one of them in (11% below the plan); no node holds both, and it now proves the plan."""
    l40s = NodeType("g6e.48xlarge", {"CPU": 192, "GPU": 8, "accelerator_type:L40S": 1}, 30.13)
    t4 = NodeType("g4dn.metal", {"CPU": 96, "GPU": 8, "accelerator_type:T4": 1}, 7.824)
    tenth = {"GPU": 0.1, "accelerator_type:L40S": 0.001}
    result = run(
        [l40s, t4], [({"GPU": 8}, 2)], [PlacementGroupDemand("STRICT_SPREAD", (tenth, tenth), 1)]
    )
    assert result.launch_counts() == {"g6e.48xlarge": 2, "g4dn.metal": 2}
    assert result.lower_bound_per_hour == pytest.approx(result.cost_per_hour)
