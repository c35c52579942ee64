"""The fewest-nodes step: it never returns a dearer plan than its tolerance allows, it runs
no MIP where its LP already shows that no plan has a unit fewer, and on plans too big for its
MIP, local moves still gather several units into one of a bigger kind."""

from __future__ import annotations

from dataclasses import replace

from autoscaler.planner import NodeType, rounding
from autoscaler.planner.budget import Budget
from autoscaler.planner.columns import seed
from autoscaler.planner.improve import improve
from autoscaler.planner.master import Master
from autoscaler.planner.packing import covered_copies
from tests.autoscaler.planner.test_mip_limits import new_units_problem

GIB = 2**30
SMALL = NodeType("m.large", {"CPU": 4, "memory": 16 * GIB}, 0.2)
BIG = NodeType("m.4xlarge", {"CPU": 16, "memory": 64 * GIB}, 0.8)


def _fewest(types, bundles, monkeypatch=None, floor=None):
    """The fewest-nodes step from a plan of one-shape units of the cheapest kind (``floor``:
    a proven bound on its cost); returns the starting plan, the chosen one, the kinds and
    the number of MIPs it ran."""
    items, kinds, demand = new_units_problem(types, bundles)
    master = Master(items, demand, kinds, {k.index: None for k in kinds}, None, 1000.0, 0.0)
    taken = {}
    for item in items:
        (pattern,) = seed(master, kinds[:1], item, demand, 1)
        taken[pattern] = -(-demand[item.index] // pattern.totals()[item.index])
    mips = []
    if monkeypatch is not None:
        solve = Master.solve_integer
        monkeypatch.setattr(
            Master, "solve_integer", lambda *a, **k: mips.append(1) or solve(*a, **k)
        )
    limits = {k.index: None for k in kinds}
    chosen = rounding._fewest_units(
        taken, list(master.patterns), items, demand, kinds, limits, None, [], Budget(), floor
    )
    return taken, chosen, kinds, demand, len(mips)


def _cost(plan, kinds):
    return sum(kinds[p.kind].cost * n for p, n in plan.items())


def test_a_plan_the_lp_shows_fewest_runs_no_mip(monkeypatch):
    # 4-CPU bundles on 4-CPU nodes: one per node, 12 nodes, and no plan has fewer.
    taken, chosen, kinds, _, mips = _fewest([SMALL], [({"CPU": 4}, 12)], monkeypatch)
    assert rounding._new_units(chosen, kinds) == 12
    assert mips == 0
    assert covered_copies(chosen) == covered_copies(taken)


def test_fewer_units_at_the_same_cost_are_still_found():
    # One-CPU bundles on small nodes cost the same as on big ones, four times fewer of them.
    taken, chosen, kinds, demand, _ = _fewest([SMALL, BIG], [({"CPU": 1}, 64)])
    assert rounding._new_units(taken, kinds) == 16
    assert rounding._new_units(chosen, kinds) == 4
    assert _cost(chosen, kinds) <= _cost(taken, kinds) * (1 + rounding.NODE_TOLERANCE) + 1e-9
    covered = covered_copies(chosen)
    assert all(covered.get(index, 0) >= n for index, n in demand.items())


def test_fewer_units_never_take_a_plan_past_the_target_above_a_proven_bound():
    # Big nodes 0.4% dearer per CPU: four of them for 64 one-CPU bundles instead of 16 small
    # ones, within the tolerance; but not where the small ones already cost the 3% target
    # above a bound proved on the plan's cost.
    big = replace(BIG, price=BIG.price * 1.004)
    taken, chosen, kinds, _, _ = _fewest([SMALL, big], [({"CPU": 1}, 64)])
    assert rounding._new_units(chosen, kinds) == 4
    cost = _cost(taken, kinds)
    taken, chosen, kinds, _, _ = _fewest([SMALL, big], [({"CPU": 1}, 64)], floor=cost / 1.03)
    assert rounding._new_units(chosen, kinds) == 16
    assert _cost(chosen, kinds) <= cost + 1e-9


def test_plans_too_big_for_the_mip_still_gather_units_into_bigger_ones(monkeypatch):
    # 24 small units of one-CPU bundles: past the MIP's size, the local moves alone pack
    # each four of them into one big node of the same price per CPU.
    taken, chosen, kinds, _, mips = _fewest([SMALL, BIG], [({"CPU": 1}, 96)], monkeypatch)
    assert rounding._new_units(taken, kinds) == 24 > rounding.FEWEST_MIP_UNITS
    assert mips == 0
    assert rounding._new_units(chosen, kinds) == 6
    assert _cost(chosen, kinds) <= _cost(taken, kinds) * (1 + rounding.NODE_TOLERANCE) + 1e-9
    assert covered_copies(chosen) == covered_copies(taken)


def test_gathering_never_launches_an_accelerator_node_for_cpu_work():
    # A GPU node is as cheap per CPU, but a launched accelerator unit must hold accelerator
    # work (CPU-only bundles only ride along): the small CPU units stay.
    gpu = NodeType("g.4xlarge", {"CPU": 16, "memory": 64 * GIB, "GPU": 1}, 0.8)
    items, kinds, demand = new_units_problem([SMALL, gpu], [({"CPU": 1}, 96)])
    kinds[1] = replace(kinds[1], needs_anchor=True)
    (item,) = items
    small = Master(items, demand, kinds, {0: None, 1: None}, None, 1000.0, 0.0)
    (pattern,) = seed(small, kinds[:1], item, demand, 1)
    plan = [(pattern, 24)]
    assert improve(plan, kinds, {item.index: item}, demand, None, 10.0, 0.2 * 24 * 1.005) == plan
    kinds[1] = replace(kinds[1], needs_anchor=False)  # the same move, where it is allowed
    moved = improve(plan, kinds, {item.index: item}, demand, None, 10.0, 0.2 * 24 * 1.005)
    assert sum(n for _, n in moved) == 6
