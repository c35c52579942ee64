"""MIP work limits: counted where HiGHS calls back, never timed, so the same input stops at
the same point with the same plan; a stopped MIP still returns a plan that places the demand,
a MIP started from a plan never returns a dearer one, and a bound MIP stopped early still
gives a valid bound."""

from __future__ import annotations

import math
from dataclasses import replace

import highspy
import numpy as np
import pytest

from autoscaler.planner import BundleDemand, Demand, NodeType
from autoscaler.planner.budget import Budget
from autoscaler.planner.columns import MAX_ROUNDS, column_generation, seed
from autoscaler.planner.improve import improve
from autoscaler.planner.items import assign_candidates, build_items, fresh_host
from autoscaler.planner.master import LPDive, Master
from autoscaler.planner.packing import Kind, Pattern, covered_copies
from autoscaler.planner.solver import add_rows, limit_mip, new_solver
from tests.autoscaler.planner.test_budget import in_two_processes

GIB = 2**30
TYPES = (
    NodeType("c.xlarge", {"CPU": 4, "memory": 8 * GIB}, 0.17),
    NodeType("m.2xlarge", {"CPU": 8, "memory": 32 * GIB}, 0.38),
    NodeType("r.2xlarge", {"CPU": 8, "memory": 64 * GIB}, 0.50),
    NodeType("c.4xlarge", {"CPU": 16, "memory": 32 * GIB}, 0.68),
    NodeType("m.8xlarge", {"CPU": 32, "memory": 128 * GIB}, 1.54),
)
SHAPES = (
    ({"CPU": 1, "memory": 6 * GIB}, 37),
    ({"CPU": 3, "memory": 4 * GIB}, 29),
    ({"CPU": 2, "memory": 24 * GIB}, 13),
    ({"CPU": 5, "memory": 10 * GIB}, 17),
    ({"CPU": 7, "memory": 20 * GIB}, 11),
    ({"CPU": 12, "memory": 40 * GIB}, 5),
)


def new_units_problem(types, bundles):
    """Items for ``bundles`` (shape, count), a kind of new units per type, and the demand."""
    items = build_items(Demand(tuple(BundleDemand(r, n) for r, n in bundles)))
    assign_candidates(items, types)
    kinds = [
        Kind(i, t.name, t.price, None, (fresh_host(t, 0, -1),), True, items=items)
        for i, t in enumerate(types)
    ]
    return items, kinds, {item.index: item.count for item in items}


def _master():
    """A master over single-item units and the patterns column generation adds (an LP whose
    rounding needs a search)."""
    items, kinds, demand = new_units_problem(TYPES, SHAPES)
    master = Master(items, demand, kinds, {k.index: None for k in kinds}, None, 1000.0, 1e-4)
    singles = {}
    for item in items:
        (pattern,) = seed(master, kinds, item, demand, 1)
        singles[pattern] = -(-demand[item.index] // pattern.totals()[item.index])
    column_generation(master, kinds, demand, MAX_ROUNDS)
    master.solve_lp()
    return master, demand, singles


def _solve(budget=None, start=None, gap=0.0):
    master, demand, singles = _master()
    units = master.solve_integer([], gap, start, demand if start else None, budget=budget)
    plan = {p: n for p, n in zip(master.patterns, units, strict=True) if n}
    cost = sum(master.kinds[p.kind].cost * n for p, n in plan.items())
    status = master.h.modelStatusToString(master.h.getModelStatus())
    return plan, cost, status, demand, singles


def _places(plan, demand) -> bool:
    covered = covered_copies(plan)
    return all(covered.get(index, 0) >= n for index, n in demand.items())


def test_a_spent_mip_budget_stops_at_a_plan_the_same_way_every_time():
    full, full_cost, _, demand, _ = _solve()
    runs = [_solve(Budget(mip_limit=1)) for _ in range(2)]
    (plan, cost, status, _, _), (again, _, _, _, _) = runs
    assert status == "Interrupted by user"  # stopped at its first plan, not by a node limit
    assert plan == again  # counted work: the same stop, the same plan
    assert _places(plan, demand) and _places(full, demand)
    assert cost >= full_cost - 1e-9


def test_the_plan_a_mip_starts_from_is_a_cutoff_it_never_returns_a_dearer_plan():
    _, best_cost, _, demand, singles = _solve()
    single_cost = sum(TYPES[p.kind].price * n for p, n in singles.items())
    plan, cost, _, _, _ = _solve(start=singles)
    assert _places(plan, demand)
    assert best_cost - 1e-9 <= cost < single_cost  # a cheaper plan, found below the cutoff
    # Started from the best plan, with a gap of a cent: nothing is better by more than that,
    # and the start comes back as it was.
    best, _, _, _, _ = _solve()
    plan, cost, _, _, _ = _solve(start=best, gap=0.01)
    assert plan == best and cost == pytest.approx(best_cost)


def _knapsack_cover():
    """min 3x + 5y + 7z subject to 4x + 7y + 11z >= 101, integers: LP bound 64.27, 66 whole."""
    h = new_solver()
    h.setOptionValue("presolve", "off")
    h.addVars(3, np.zeros(3), np.full(3, 100.0))
    h.changeColsCost(3, np.arange(3, dtype=np.int32), np.array([3.0, 5.0, 7.0]))
    add_rows(h, [([0, 1, 2], [4.0, 7.0, 11.0], 101.0, highspy.kHighsInf)])
    h.changeColsIntegrality(3, np.arange(3, dtype=np.int32), np.array([1, 1, 1], np.uint8))
    return h


def test_a_bound_mip_stopped_once_its_bound_is_enough_keeps_a_valid_bound():
    whole = _knapsack_cover()
    whole.run()
    optimum = whole.getInfo().objective_function_value
    assert optimum == pytest.approx(66.0)
    for enough in (50.0, 64.0):
        stopped = _knapsack_cover()
        limit_mip(stopped, dual_enough=enough)
        stopped.run()
        assert stopped.getModelStatus() == highspy.HighsModelStatus.kInterrupt
        assert enough <= stopped.getInfo().mip_dual_bound <= optimum


def test_a_plan_whose_mips_spend_their_budget_is_the_same_in_another_process():
    # A 200-bundle GCP backlog whose MIPs rounding it again run into the plan's MIP work
    # budget: where they stop is counted, so two processes print the same plan.
    runs = in_two_processes(
        "from autoscaler.planner import budget;"
        "spent = [];"
        "spend = budget.Budget.spend_mip;"
        "budget.Budget.spend_mip = lambda self, n: (spend(self, n), spent.append(self.mip_used));"
        "c, d = mixed_problem(200, 'gcp', 5); config = parse_cluster_config(c, 'bench');"
        "r = plan(PlanRequest(config.node_types(), parse_demand(d), (), config.limits()));"
        "print(max(spent) >= budget.MIP_WORK_LIMIT, sorted(r.launch_counts().items()),"
        " r.cost_per_hour, r.lower_bound_per_hour, r.node_lower_bound)"
    )
    assert runs[0].startswith("True ")  # the budget was reached
    assert runs[0] == runs[1]


def test_past_its_budget_a_mip_stops_only_at_a_plan_within_its_settle_gap():
    """The first rounding's MIP: once the budget is spent it searches on until its plan is
    within the settle gap of its dual bound (any plan, by default)."""
    for settle_gap, stops_at in ((math.inf, 67.0), (2.0, 67.0), (0.5, 66.0), (0.0, 66.0)):
        h = _knapsack_cover()
        limit_mip(h, Budget(mip_limit=1), settle_gap=settle_gap)
        h.run()
        info = h.getInfo()
        assert h.getModelStatus() == highspy.HighsModelStatus.kInterrupt
        assert info.objective_function_value == pytest.approx(stops_at)
        assert info.objective_function_value - info.mip_dual_bound <= settle_gap


def test_overrun_past_its_budget_a_mip_stops_at_any_plan_whatever_its_settle_gap():
    """The first rounding's MIP searches on past the budget for a settled plan, but not
    without end: once the budget is spent by ``overrun`` more, any plan stops it."""
    for overrun, stops_at in ((1, 67.0), (10**9, 66.0)):
        h = _knapsack_cover()
        budget = Budget(mip_limit=1)
        limit_mip(h, budget, settle_gap=0.0, overrun=overrun)
        h.run()
        assert h.getModelStatus() == highspy.HighsModelStatus.kInterrupt
        assert h.getInfo().objective_function_value == pytest.approx(stops_at)


def test_an_lp_dive_makes_a_whole_plan_that_places_the_demand_and_leaves_the_lp_as_it_was():
    master, demand, _ = _master()
    before = master.lp_values()
    assert any(v != round(v) for v in before)  # a fractional LP: rounding has work to do
    units = LPDive(master).run()
    assert units is not None and all(isinstance(n, int) and n >= 0 for n in units)
    plan = {p: n for p, n in zip(master.patterns, units, strict=True) if n}
    assert _places(plan, demand)
    assert master.objective_of(units) >= master.lp_objective() - 1e-6
    assert LPDive(master).run() == units  # deterministic
    assert master.lp_values() == before  # the dive worked on a copy: the master's MIP is next
    assert master.objective_of(master.solve_integer([])) <= master.objective_of(units) + 1e-6


def test_a_mip_stops_once_its_bound_shows_a_plan_held_by_the_caller_close_enough():
    """The first rounding beside a dive: the MIP stops as soon as its dual bound is within the
    settle gap of the dive's plan, with whatever plan it has (None where it has none)."""
    _, optimum, *_ = _solve()
    master, demand, _ = _master()
    lp = master.lp_objective()
    units = master.solve_integer([], dual_enough=lp - 1.0)  # shown at the root already
    assert master.h.getModelStatus() == highspy.HighsModelStatus.kInterrupt
    assert master.h.getInfo().mip_dual_bound >= lp - 1.0
    if units is not None:  # a plan it had found by then places the demand, if dearer
        plan = {p: n for p, n in zip(master.patterns, units, strict=True) if n}
        assert _places(plan, demand)
        assert master.objective_of(units) >= optimum - 1e-6
    never, _, _ = _master()
    full = never.solve_integer([], dual_enough=math.inf)
    assert never.h.getModelStatus() != highspy.HighsModelStatus.kInterrupt
    cost = sum(never.kinds[p.kind].cost * n for p, n in zip(never.patterns, full, strict=True))
    assert cost == pytest.approx(optimum)


def test_improving_the_rest_alone_counts_the_units_beside_it_against_the_limits():
    """The first rounding improves the rest of a plan alone: the units the LP took whole stay
    beside it, and a node type's limit counts them (here: at most one small node)."""
    small = NodeType("small", {"CPU": 8, "memory": 32 * GIB}, 0.30)
    big = NodeType("big", {"CPU": 16, "memory": 64 * GIB}, 0.90)
    items, kinds, _ = new_units_problem((small, big), [({"CPU": 4, "memory": 8 * GIB}, 4)])
    kinds = [replace(kinds[0], limit=1), kinds[1]]
    (item,) = items
    taken = {Pattern(0, (((item.index, 2),),)): 1}  # the one small node, full
    rest = [(Pattern(1, (((item.index, 2),),)), 1)]  # two copies on a big node
    by_index, left = {item.index: item}, {item.index: 2}
    alone = improve(rest, kinds, by_index, left, None, 0.0)
    assert [kinds[p.kind].node_type for p, _ in alone] == ["small"]  # cheaper, if it were free
    beside = improve(rest, kinds, by_index, left, None, 0.0, beside=taken)
    assert beside == rest  # the small node's limit is spent beside it: the big node stays


def test_a_master_says_when_a_limit_on_new_units_binds_and_prices_copies_left_out():
    items, kinds, demand = new_units_problem(TYPES, SHAPES)
    masters = []
    for room in (None, 3):  # no limit; room for 3 new nodes (the plan needs dozens)
        master = Master(items, demand, kinds, {k.index: None for k in kinds}, room, 1000.0, 1e-4)
        for item in items:
            seed(master, kinds, item, demand, 1)
        column_generation(master, kinds, demand, MAX_ROUNDS)
        master.solve_lp()
        masters.append(master)
    free, tight = masters
    assert not free.new_units_bound() and tight.new_units_bound()
    nothing = [0] * len(free.patterns)  # every copy left out, at the penalty
    assert free.objective_of(nothing) == pytest.approx(1000.0 * sum(demand.values()))
    units = free.solve_integer([])
    assert free.objective_of(units) < free.objective_of(nothing)
