"""The fewest-nodes step: it never returns a dearer plan than its tolerance allows, and it
runs no MIP where its LP already shows that no plan has a unit fewer."""

from __future__ import annotations

from autoscaler.planner import NodeType, rounding
from autoscaler.planner.budget import Budget
from autoscaler.planner.columns import seed
from autoscaler.planner.master import Master
from autoscaler.planner.packing import covered_copies
from tests.autoscaler.planner.test_mip_limits import new_units_problem

GIB = 2**30
SMALL = NodeType("m.large", {"CPU": 4, "memory": 16 * GIB}, 0.2)
BIG = NodeType("m.4xlarge", {"CPU": 16, "memory": 64 * GIB}, 0.8)


def _fewest(types, bundles, monkeypatch=None):
    """The fewest-nodes step from a plan of one-shape units of the cheapest kind; returns the
    starting plan, the chosen one, the kinds and the number of MIPs it ran."""
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
        taken, list(master.patterns), items, demand, kinds, limits, None, [], Budget()
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
