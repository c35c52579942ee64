"""The planner's lower bounds: valid, and tight where packing or whole units decide."""

from __future__ import annotations

import math
import random

import pytest

from autoscaler.planner import (
    BundleDemand,
    Demand,
    Limits,
    NodeType,
    PlanRequest,
    bound,
    columns,
    plan,
)
from autoscaler.planner.bound import BoundModel
from autoscaler.planner.budget import Budget
from autoscaler.planner.columns import column_generation, lagrangian, seed
from autoscaler.planner.items import assign_candidates, build_items, fresh_host
from autoscaler.planner.knapsack import best_unit
from autoscaler.planner.master import Master
from autoscaler.planner.packing import Kind, fit
from tests.autoscaler.planner.test_mip_limits import SHAPES, TYPES, new_units_problem
from tests.autoscaler.planner.test_plan_quality import SMALL_CASES

GIB = 2**30
M4 = NodeType("m.large", {"CPU": 4, "memory": 16 * GIB}, 0.2)
X16 = NodeType("x.16xlarge", {"CPU": 64, "memory": 1024 * GIB}, 6.7)


def run(types, bundles):
    demand = Demand(tuple(BundleDemand(r, n) for r, n in bundles))
    return plan(PlanRequest(tuple(types), demand, (), Limits()))


def lower_bounds(items, demand, kinds, room, cost_cap=None, plan_units=None, **options):
    """The bound of a model built for this demand and cap (as rounding builds one)."""
    model = BoundModel(items, demand, kinds, room, cost_cap)
    return model.bounds(cost_cap, plan_units, **options)


def test_units_that_cannot_share_are_proved_by_the_lagrangian_bound():
    # A 3-CPU bundle leaves room no 2-CPU bundle fits: 300 units hold one each, 150 hold two
    # each. Counting CPUs alone says 375 units; the bound from packing units says 450.
    result = run([M4], [({"CPU": 3}, 300), ({"CPU": 2}, 300)])
    assert result.launch_counts() == {"m.large": 450}
    assert result.lower_bound_per_hour == result.cost_per_hour


def test_whole_units_lift_the_bound_of_a_large_plan():
    # 601 two-CPU bundles on four-CPU nodes: 300.5 nodes of capacity, 301 whole ones.
    result = run([M4], [({"CPU": 2}, 601)])
    assert result.launch_counts() == {"m.large": 301}
    assert result.lower_bound_per_hour == result.cost_per_hour


def test_a_bundle_filling_a_node_is_not_spread_over_other_nodes_spare_room_in_the_bound():
    # 17 A100 tasks need 3 p4d (7 GPUs spare), 3 L4 tasks a g6 (5 spare): 12 spare GPUs,
    # but the 8-GPU task fits on neither whole, so it needs a node of its own.
    a100 = NodeType("p4d", {"CPU": 96, "GPU": 8, "accelerator_type:A100": 1}, 22.0)
    l4 = NodeType("g6", {"CPU": 192, "GPU": 8, "accelerator_type:L4": 1}, 13.35)
    t4 = NodeType("g4dn.metal", {"CPU": 96, "GPU": 8, "accelerator_type:T4": 1}, 7.8)
    result = run(
        [a100, l4, t4],
        [
            ({"CPU": 1, "GPU": 1, "accelerator_type:A100": 0.001}, 17),
            ({"CPU": 1, "GPU": 1, "accelerator_type:L4": 0.001}, 3),
            ({"CPU": 8, "GPU": 8}, 1),
        ],
    )
    assert result.launch_counts() == {"p4d": 3, "g6": 1, "g4dn.metal": 1}
    assert result.lower_bound_per_hour == pytest.approx(result.cost_per_hour)


def test_cpu_work_rides_only_on_as_many_accelerator_nodes_as_accelerator_bundles_in_the_bound():
    # Under ``spare``, CPU-only work may use an accelerator node only where accelerator work
    # holds it: the one 1-GPU task holds one g4dn, which takes 4 of the 40 one-CPU tasks.
    # Counting more copies of that task than there are, the bound put all 40 on ten g4dn.
    gpu = NodeType("g4dn", {"CPU": 4, "GPU": 1, "accelerator_type:T4": 1}, 0.16)
    plain = NodeType("m.xlarge", {"CPU": 4}, 0.2)
    result = run([gpu, plain], [({"GPU": 1}, 1), ({"CPU": 1}, 40)])
    assert result.launch_counts() == {"g4dn": 1, "m.xlarge": 9}
    assert result.lower_bound_per_hour == pytest.approx(result.cost_per_hour)


def test_exact_pricing_respects_large_memory():
    # Memory in share units reaches the solver's limit on a coefficient (1e15) unless scaled.
    demand = Demand(
        (
            BundleDemand({"CPU": 1, "memory": 128 * GIB}, 10),
            BundleDemand({"CPU": 1, "memory": 64 * GIB}, 10),
        )
    )
    items = build_items(demand)
    host = fresh_host(X16, 0, -1)
    values = {item.index: 1.0 for item in items}
    caps = {item.index: item.count for item in items}
    unit = best_unit([host], items, values, caps, False, fit)
    copies = dict(unit.contents[0])
    big_copies, small_copies = copies[items[0].index], copies[items[1].index]
    assert big_copies * 128 + small_copies * 64 <= 1024
    assert big_copies + small_copies == 13  # all ten small ones, three big ones
    assert unit.value_bound <= 13 + 1e-6


def test_a_knapsack_past_its_work_budget_stops_early_and_its_bound_still_holds():
    # Forty fractional- and whole-GPU shapes on an 8-GPU host: a knapsack whose root cuts
    # and search take many callbacks. Stopped at its first callback past a spent budget, its
    # bound is weaker, never below the best unit.
    rng = random.Random(7)
    gpu8 = NodeType("gpu8", {"CPU": 96, "memory": 768 * GIB, "GPU": 8}, 30.0)
    shapes = [
        {"CPU": rng.randint(1, 12), "memory": rng.randint(1, 64) * GIB, "GPU": gpu}
        for gpu in rng.choices([0.25, 0.3, 0.5, 0.7, 1, 2], k=40)
    ]
    items = build_items(Demand(tuple(BundleDemand(shape, 6) for shape in shapes)))
    values = {item.index: rng.uniform(0.5, 3.0) for item in items}
    caps = {item.index: item.count for item in items}
    host = fresh_host(gpu8, 0, -1)
    spent, ample = Budget(mip_limit=0), Budget(mip_limit=10**9)
    stopped = best_unit([host], items, values, caps, False, fit, 1e-3, spent)
    full = best_unit([host], items, values, caps, False, fit, 1e-3, ample)
    assert spent.mip_used < ample.mip_used  # it stopped where the full search went on
    best = sum(values[i] * n for host_contents in full.contents for i, n in host_contents)
    assert stopped.value_bound >= full.value_bound - 1e-6
    assert full.value_bound >= best - 1e-6


def test_lagrangian_knapsacks_stop_once_too_low_and_go_on_as_in_one_go(monkeypatch):
    # A master one pricing round in: at its duals several kinds' fractional bounds say a unit
    # may be worth more than it costs, so their knapsacks decide the Lagrangian bound.
    items, kinds, demand = new_units_problem(TYPES, SHAPES)
    master = Master(items, demand, kinds, {k.index: None for k in kinds}, None, 1000.0, 1e-4)
    for item in items:
        seed(master, kinds, item, demand, 1)
    column_generation(master, kinds, demand, 1)
    master.solve_lp()
    solved = []
    knapsack = columns.best_unit
    monkeypatch.setattr(columns, "best_unit", lambda *a, **k: solved.append(1) or knapsack(*a, **k))

    in_one_go = Budget()
    full = lagrangian(master, kinds, demand, in_one_go).cost_bound(kinds, 100.0)
    every = len(solved)
    assert full is not None and every >= 3

    solved.clear()
    asked_high = Budget()
    stopped = lagrangian(master, kinds, demand, asked_high)
    assert stopped.cost_bound(kinds, 100.0, floor=1.05 * full) is None
    assert 0 < len(solved) < every  # it stopped once the bound was shown below the floor
    assert asked_high.used == in_one_go.used  # the same work counted as in one go
    assert stopped.cost_bound(kinds, 100.0) == full  # asked again, it goes on to the same bound
    assert len(solved) == every


def test_items_above_half_a_host_never_share_one_in_the_bound_lp():
    # Two 16-core shapes on 24-core hosts: 32 cores of every pair fit two hosts' worth of
    # cores in 1.34 hosts, but no host holds two of them. The bound's LP alone (no knapsack,
    # no whole-unit MIP) knows: one host per copy.
    inf24 = NodeType("inf24", {"CPU": 32, "memory": 64 * GIB, "neuron_cores": 24}, 1.0)
    demand = Demand(
        (
            BundleDemand({"neuron_cores": 16, "CPU": 1}, 40),
            BundleDemand({"neuron_cores": 16, "CPU": 2}, 40),
            BundleDemand({"neuron_cores": 4}, 40),
        )
    )
    items = build_items(demand)
    assign_candidates(items, [inf24])
    kind = Kind(0, inf24.name, 1.0, None, (fresh_host(inf24, 0, -1),), new=True, items=items)
    bounds = lower_bounds(items, {item.index: item.count for item in items}, [kind], None)
    assert bounds.cost == pytest.approx(80.0)  # the 4-core bundles fit beside them
    assert run([inf24], [(dict(b.resources), b.count) for b in demand.bundles]).cost_per_hour == 80


def _small_fractional_gpu_problem():
    """A small problem whose bound LP is far below its whole-unit bound (its plan needs a
    GPU node for the GPU work and room for the CPU work)."""
    types, _ = SMALL_CASES["fractional GPUs"]
    shapes = [({"GPU": 0.5, "CPU": 1}, 1), ({"CPU": 3}, 2), ({"GPU": 1, "CPU": 2}, 1)]
    items, kinds, demand = new_units_problem(types, shapes)
    return items, demand, kinds


def test_the_whole_unit_cost_bound_is_not_computed_twice_and_is_kept(monkeypatch):
    items, demand, kinds = _small_fractional_gpu_problem()
    lp = lower_bounds(items, demand, kinds, None, count_units=False).cost
    cap = 1.1 * lp
    first = lower_bounds(items, demand, kinds, None, cap, 3, count_units=False).cost
    assert lp < cap <= (1 + bound.TARGET) * first  # its whole-unit MIP lifted it
    mips = []
    limit = bound.limit_mip
    monkeypatch.setattr(bound, "limit_mip", lambda *a, **k: mips.append(1) or limit(*a, **k))
    again = lower_bounds(items, demand, kinds, None, cap, 3, count_units=False, whole_floor=first)
    assert mips == []  # the earlier bound shows a plan costing ``cap`` within the target
    assert again.cost == first  # and the plan keeps it
    lower_bounds(items, demand, kinds, None, cap, 3, count_units=False)
    assert mips == [1]  # without it, the MIP runs


def _counting_mips(monkeypatch, **limits) -> list[int]:
    """Counts the bound MIPs run from here on (``limits``: passed to every one's limit)."""
    mips: list[int] = []
    limit = bound.limit_mip
    monkeypatch.setattr(
        bound, "limit_mip", lambda h, *a, **k: mips.append(1) or limit(h, *a, **{**k, **limits})
    )
    return mips


def test_a_whole_unit_bound_solved_to_its_optimum_holds_under_any_cap_buying_its_plan(
    monkeypatch,
):
    items, demand, kinds = _small_fractional_gpu_problem()
    lp = lower_bounds(items, demand, kinds, None, count_units=False).cost
    model = BoundModel(items, demand, kinds, None)
    first = model.bounds(2 * lp, 3, count_units=False).cost  # its MIP ends at its optimum
    assert first > 1.2 * lp
    mips = _counting_mips(monkeypatch)
    # A tighter cap that still buys that optimum's plan: the same bound, no MIP.
    assert model.bounds(1.5 * lp, 3, count_units=False).cost == first
    assert lower_bounds(items, demand, kinds, None, 1.5 * lp, 3, count_units=False).cost == first
    assert mips == [1]  # (the second model ran its own)
    # A looser one only lets dearer plans in: the same optimum.
    assert model.bounds(3 * lp, 3, count_units=False).cost == first
    assert mips == [1]


def test_a_whole_unit_bound_stopped_early_is_not_sought_again_under_a_looser_cap(monkeypatch):
    items, demand, kinds = _small_fractional_gpu_problem()
    lp = lower_bounds(items, demand, kinds, None, count_units=False).cost
    model = BoundModel(items, demand, kinds, None)
    mips = _counting_mips(monkeypatch, stall=0, stall_above=-math.inf)  # stop at once
    stopped = model.bounds(2 * lp, 3, count_units=False).cost
    exact = BoundModel(items, demand, kinds, None)
    monkeypatch.undo()
    assert stopped < exact.bounds(2 * lp, 3, count_units=False).cost  # it did stop early
    mips = _counting_mips(monkeypatch)
    assert model.bounds(3 * lp, 3, count_units=False).cost == stopped
    assert mips == []  # a looser cap: the bound it has
    assert model.bounds(1.8 * lp, 3, count_units=False).cost >= stopped
    assert mips == [1]  # a tighter one may prove more


def test_a_model_built_before_the_plan_bounds_it_as_one_built_after():
    # The planner builds the bound's model before it plans (its cost LP solved in the
    # background, without a cap) and asks for the plan's cap at the end.
    items, demand, kinds = _small_fractional_gpu_problem()
    lp = lower_bounds(items, demand, kinds, None, count_units=False).cost
    for cap in (1.1 * lp, 2 * lp):
        after = lower_bounds(items, demand, kinds, None, cap, 3)
        before = BoundModel(items, demand, kinds, None, background=True).bounds(cap, 3)
        assert before.cost == pytest.approx(after.cost)
        assert before.units == after.units
        assert after.cost > lp  # the cap lets the whole-unit MIP lift it


def test_a_bound_models_units_are_counted_once():
    items, demand, kinds = _small_fractional_gpu_problem()
    model = BoundModel(items, demand, kinds, None)
    model.bounds(count_units=False)
    model.bounds()  # counting changes the model ...
    with pytest.raises(RuntimeError):
        model.bounds()  # ... so it comes last
