"""The restricted master problem: patterns as HiGHS columns, their duals and integer plans.

``min sum(cost[p] x[p])`` subject to every item's copies being covered (a STRICT_SPREAD gang
is left unplaced only whole, at a penalty), per-kind and global unit limits, and optionally a
cap on the cost (fewest units within a budget). The LP prices patterns for column generation
(:mod:`~autoscaler.planner.columns`); the MIP over the same columns, with a deterministic node
limit, makes plans integer.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from autoscaler.planner.budget import Budget
from autoscaler.planner.items import Item
from autoscaler.planner.packing import Kind, Pattern, covered_copies
from autoscaler.planner.solver import (
    GUARD_TIME_S,
    SolverError,
    limit_mip,
    make_integer,
    new_solver,
)

MIP_REL_GAP = 1e-3
MIP_MAX_NODES = 400
SUB_MIP_HEURISTICS = ("mip_heuristic_run_rins", "mip_heuristic_run_rens")
"""Off for the plan MIPs: they start near the LP's (or a given) plan, and these sub-MIPs took
most of the root's time (a few nodes more on some plans of the benchmark sweep, none dearer
by more than the node tolerance)."""


DIVE_STEPS = 1_000
"""At most this many LPs per dive (:class:`LPDive`); a dive that needs more gives up."""


class LPDive:
    """An integer plan by diving on a master's LP: the column with the largest fraction is
    rounded up and the LP solved again, until every column is whole. It
    works on a copy of the master's LP (its own solver is left as it was, for a MIP after).
    Rounding up only adds cover, so the dive fails only where limits bind. One small LP per
    step, against a MIP whose root cut loop may take a hundred rounds."""

    def __init__(self, master: Master) -> None:
        self.solver = new_solver()
        self.solver.passModel(master.h.getLp())
        self.solver.setBasis(master.h.getBasis())
        self.cols = list(master.cols)
        self.most = master.most_units()
        self.optimal = master.highspy.HighsModelStatus.kOptimal

    def run(self) -> list[int] | None:
        """Units per pattern (in the master's order); None where the dive fails."""
        h, cols = self.solver, self.cols
        n = len(cols)
        h.changeColsBounds(n, np.array(cols, np.int32), np.zeros(n), np.array(self.most))
        for _ in range(DIVE_STEPS):
            h.run()
            if h.getModelStatus() != self.optimal:
                return None
            values = h.getSolution().col_value
            above = [values[col] - math.floor(values[col] + 1e-9) for col in cols]
            if max(above) <= 1e-6:
                return [round(values[col]) for col in cols]
            furthest = max(range(n), key=lambda c: (above[c], -c))
            raised = float(math.ceil(values[cols[furthest]]))
            h.changeColBounds(cols[furthest], raised, self.most[furthest])
        return None


class Master:
    """The restricted master program in HiGHS: item cover rows, kind and global limit rows."""

    def __init__(
        self,
        items: Sequence[Item],
        demand: Mapping[int, int],
        kinds: Sequence[Kind],
        limits: Mapping[int, int | None],
        global_room: int | None,
        penalty: float,
        surcharge: float,
    ) -> None:
        import highspy

        self.highspy = highspy
        self.args = (items, demand, kinds, limits, global_room, penalty)
        self.kinds = kinds
        self.limits = limits
        self.penalty = penalty
        self.surcharge = surcharge
        self.h = new_solver()
        h = self.h
        inf = highspy.kHighsInf
        self.row_of = {item.index: row for row, item in enumerate(items)}
        for item in items:
            h.addRow(float(demand[item.index]), inf, 0, np.array([], np.int32), np.array([]))
        self.limit_row: dict[int, int] = {}
        for kind in kinds:
            if limits[kind.index] is not None:
                self.limit_row[kind.index] = h.getNumRow()
                h.addRow(-inf, float(limits[kind.index]), 0, np.array([], np.int32), np.array([]))
        self.global_row = None
        if global_room is not None:
            self.global_row = h.getNumRow()
            h.addRow(-inf, float(global_room), 0, np.array([], np.int32), np.array([]))
        self.cost_row = None
        self.slack_cols: list[int] = []
        members_of: dict[tuple, list[Item]] = {}
        for item in items:  # copies left unplaced (whole gangs), at a penalty per bundle
            key = ("item", item.index) if item.spread_group is None else ("gang", item.spread_group)
            members_of.setdefault(key, []).append(item)
        self.slack_members: list[list[Item]] = []
        for members in members_of.values():
            rows = [self.row_of[item.index] for item in members]
            bundles = [float(item.slots) for item in members]  # per copy left out
            self.slack_members.append(members)
            self.slack_cols.append(h.getNumCol())
            h.addCol(
                penalty * sum(bundles),
                0.0,
                inf,
                len(rows),
                np.array(rows, np.int32),
                np.array(bundles),
            )
        self.patterns: list[Pattern] = []
        self.cols: list[int] = []
        self.known: set[Pattern] = set()
        self.item_duals: dict[int, float] = {}
        """Item duals of the last LP solved."""

    def size(self) -> int:
        """Rows plus columns: the work unit of one solve (:mod:`~autoscaler.planner.budget`)."""
        return self.h.getNumRow() + self.h.getNumCol()

    def unit_cost(self, kind: Kind) -> float:
        return kind.cost + (self.surcharge if kind.new else 0.0)

    def add(self, pattern: Pattern) -> bool:
        return self.add_all([pattern]) == 1

    def add_all(self, patterns: Iterable[Pattern]) -> int:
        """Add the patterns not known yet, as columns, in one call; returns how many."""
        costs: list[float] = []
        starts: list[int] = []
        rows: list[int] = []
        vals: list[float] = []
        first_col = self.h.getNumCol()
        for pattern in patterns:
            if pattern in self.known:
                continue
            self.known.add(pattern)
            kind = self.kinds[pattern.kind]
            start = len(rows)
            for index, copies in sorted(pattern.totals().items()):
                if index in self.row_of:
                    rows.append(self.row_of[index])
                    vals.append(float(copies))
            if len(rows) == start:
                continue
            if kind.index in self.limit_row:
                rows.append(self.limit_row[kind.index])
                vals.append(1.0)
            if self.global_row is not None and kind.new:
                rows.append(self.global_row)
                vals.append(1.0)
            if self.cost_row is not None and kind.cost:
                rows.append(self.cost_row)
                vals.append(kind.cost)
            self.cols.append(first_col + len(costs))
            self.patterns.append(pattern)
            starts.append(start)
            costs.append(self.unit_cost(kind))
        if costs:
            self.h.addCols(
                len(costs),
                np.array(costs),
                np.zeros(len(costs)),
                np.full(len(costs), self.highspy.kHighsInf),
                len(rows),
                np.array(starts, np.int32),
                np.array(rows, np.int32),
                np.array(vals),
            )
        return len(costs)

    def solve_lp(self) -> tuple[dict[int, float], dict[int, float], float]:
        """Item duals, each kind's limit dual plus the global one (<= 0), and the LP value."""
        self.h.run()
        status = self.h.getModelStatus()
        if status != self.highspy.HighsModelStatus.kOptimal:
            raise SolverError(f"restricted master LP ended {self.h.modelStatusToString(status)}")
        duals = list(self.h.getSolution().row_dual)
        item_duals = {index: max(0.0, duals[row]) for index, row in self.row_of.items()}
        self.item_duals = item_duals
        global_dual = duals[self.global_row] if self.global_row is not None else 0.0
        cost_dual = duals[self.cost_row] if self.cost_row is not None else 0.0
        kind_duals = {
            kind.index: (duals[self.limit_row[kind.index]] if kind.index in self.limit_row else 0.0)
            + (global_dual if kind.new else 0.0)
            + cost_dual * kind.cost
            for kind in self.kinds
        }
        return item_duals, kind_duals, self.h.getInfo().objective_function_value

    def leaves_out(self) -> bool:
        """Whether the current LP solution leaves copies unplaced (limits bind)."""
        values = self.h.getSolution().col_value
        return any(values[col] > 1e-6 for col in self.slack_cols)

    def new_units_bound(self) -> bool:
        """Whether a limit on new units (the cluster's room, a launchable type's own) binds
        in the current LP solution (its row has a dual)."""
        duals = self.h.getSolution().row_dual
        rows = [row for index, row in self.limit_row.items() if self.kinds[index].new]
        if self.global_row is not None:
            rows.append(self.global_row)
        return any(abs(duals[row]) > 1e-9 for row in rows)

    def lp_values(self) -> list[float]:
        values = self.h.getSolution().col_value
        return [values[col] for col in self.cols]

    def lp_objective(self) -> float:
        """The current LP's value (surcharges and unplaced copies' penalties included): no
        plan over all patterns costs less."""
        return self.h.getInfo().objective_function_value

    def lp_cost_and_units(self) -> tuple[float, float]:
        """Cost (without surcharges) and new units of the current LP solution."""
        values = self.h.getSolution().col_value
        cost = units = 0.0
        for pattern, col in zip(self.patterns, self.cols, strict=True):
            kind = self.kinds[pattern.kind]
            cost += kind.cost * values[col]
            units += values[col] if kind.new else 0.0
        return cost, units

    def objective_of(self, units: Sequence[int], demand: Mapping[int, int] | None = None) -> float:
        """The objective of ``units`` per pattern: costs, surcharges and the penalties of the
        copies of ``demand`` (by default, the program's) they leave out."""
        demand = self.args[1] if demand is None else demand
        costs = self.h.getLp().col_cost_
        objective = sum(costs[col] * n for col, n in zip(self.cols, units, strict=True))
        covered = covered_copies({p: n for p, n in zip(self.patterns, units, strict=True) if n > 0})
        for col, members in zip(self.slack_cols, self.slack_members, strict=True):
            short = [  # copies (of the gang) left out
                -(-(demand.get(item.index, 0) - covered.get(item.index, 0)) // item.slots)
                for item in members
            ]
            objective += costs[col] * max([0, *short])
        return objective

    def set_surcharge(self, surcharge: float) -> None:
        """Change the per-unit surcharge of new units (every column's cost)."""
        self.surcharge = surcharge
        if self.cols:
            costs = [self.unit_cost(self.kinds[p.kind]) for p in self.patterns]
            self.h.changeColsCost(
                len(self.cols), np.array(self.cols, np.int32), np.array(costs, np.float64)
            )

    def cap_cost(self, budget: float) -> None:
        """Only plans whose units cost at most ``budget`` (patterns added later included)."""
        costs = [self.kinds[p.kind].cost for p in self.patterns]
        self.cost_row = self.h.getNumRow()
        self.h.addRow(
            -self.highspy.kHighsInf,
            budget,
            len(self.cols),
            np.array(self.cols, np.int32),
            np.array(costs, np.float64),
        )

    def on_support(self, extra: Sequence[Pattern] = ()) -> Master:
        """The same program over the current LP solution's patterns and ``extra`` only: a MIP
        over a few dozen columns has a cheap root, whatever the pool grew to."""
        support = Master(*self.args, self.surcharge)
        values = self.lp_values()
        support.add_all(p for p, value in zip(self.patterns, values, strict=True) if value > 1e-9)
        support.add_all(extra)
        support.solve_lp()
        return support

    def near_support(self, reduced_cost: float, extra: Sequence[Pattern] = ()) -> Master:
        """The same program over the patterns whose LP reduced cost is at most
        ``reduced_cost`` (the LP's support included) and ``extra``, without its cost cap."""
        near = Master(*self.args, self.surcharge)
        duals = self.h.getSolution().col_dual
        near.add_all(
            p for p, col in zip(self.patterns, self.cols, strict=True) if duals[col] <= reduced_cost
        )
        near.add_all(extra)
        return near

    def bound_rows(
        self,
        demand: Mapping[int, int],
        limits: Mapping[int, int | None],
        global_room: int | None,
    ) -> None:
        """Cover only ``demand`` and allow only these unit counts (for a dive)."""
        inf = self.highspy.kHighsInf
        for index, row in self.row_of.items():
            self.h.changeRowBounds(row, float(demand.get(index, 0)), inf)
        for index, row in self.limit_row.items():
            self.h.changeRowBounds(row, -inf, float(limits[index]))
        if self.global_row is not None:
            self.h.changeRowBounds(self.global_row, -inf, float(global_room))

    def solve_integer(
        self,
        notes: list[str],
        absolute_gap: float = 0.0,
        start: Mapping[Pattern, int] | None = None,
        demand: Mapping[int, int] | None = None,
        max_nodes: int = MIP_MAX_NODES,
        max_improving: int | None = None,
        budget: Budget | None = None,
        settle_gap: float = math.inf,
        overrun: int | None = None,
        dual_enough: float | None = None,
    ) -> list[int] | None:
        """Units per pattern: the integer plan of least cost plus surcharges over the
        generated patterns (falls back to the LP solution rounded down). ``start``: a plan
        the search starts from (units per pattern, covering ``demand`` but for whole gangs);
        only plans better than it by more than ``absolute_gap`` are searched for (it is
        returned where there is none); ``max_improving``: the search stops once it has found
        this many better plans; ``budget``: the search's work is counted there and, for an
        ``optional`` plan (one the caller may discard), stops with the best plan found once
        the budget's MIP work is spent (:func:`~autoscaler.planner.solver.limit_mip`);
        ``dual_enough``: the search also stops once its dual bound reaches this (showing a
        plan the caller holds close enough), and returns None where it has no plan then."""
        h = self.h
        lp_values = list(h.getSolution().col_value)
        n = len(self.cols)
        if n == 0:
            return []
        cols = np.array(self.cols, np.int32)
        h.changeColsBounds(n, cols, np.zeros(n), np.array(self.most_units(start)))
        make_integer(h, self.cols)
        h.setOptionValue("mip_rel_gap", MIP_REL_GAP)
        h.setOptionValue("mip_abs_gap", max(absolute_gap, 1e-6))
        h.setOptionValue("mip_allow_restart", False)
        h.setOptionValue("mip_max_nodes", max_nodes)
        for option in SUB_MIP_HEURISTICS:
            h.setOptionValue(option, False)
        if max_improving is not None:
            h.setOptionValue("mip_max_improving_sols", max_improving)
        start_units, start_cost = None, math.inf
        if start is not None and demand is not None:
            start_units, start_cost = self._start(start, demand)
            h.setOptionValue("objective_bound", start_cost - absolute_gap)
        limit_mip(
            h,
            budget,
            settle_gap=settle_gap,
            overrun=overrun,
            dual_enough=dual_enough,
            has_plan=start_units is not None,
        )
        values = self._run_mip(notes, "integer plan")
        if start_units is not None and (
            values is None or h.getInfo().objective_function_value > start_cost - absolute_gap
        ):
            return start_units  # none better than the start by more than the gap (where the
            # cutoff leaves no plan, HiGHS may still report a dearer one it met)
        if values is None and dual_enough is not None:
            return None
        if values is None:
            notes.append("no integer plan over the patterns: LP solution rounded down")
            return [math.floor(lp_values[c] + 1e-9) for c in self.cols]
        return [round(values[c]) for c in self.cols]

    def most_units(self, start: Mapping[Pattern, int] | None = None) -> list[float]:
        """Units of each pattern in a plan that matters: a unit beyond what covers the demand
        of each of its items alone serves nothing, and under a cost cap no more than it buys
        (``start``'s units always allowed). Tight bounds make the MIP's root cheap."""
        demand = self.args[1]
        budget = None
        if self.cost_row is not None:
            budget = self.h.getLp().row_upper_[self.cost_row]
        found = []
        for pattern in self.patterns:
            totals = pattern.totals()
            most = max(-(-demand[i] // n) for i, n in totals.items() if i in self.row_of)
            cost = self.kinds[pattern.kind].cost
            if budget is not None and cost > 0:
                most = min(most, math.floor(budget / cost + 1e-9))
            found.append(float(max(most, (start or {}).get(pattern, 0))))
        return found

    def _start(
        self, start: Mapping[Pattern, int], demand: Mapping[int, int]
    ) -> tuple[list[int], float]:
        """``start``'s units per pattern and its objective (slack for unplaced copies
        included). It is given to HiGHS as a cutoff, not as a start solution: HiGHS 1.16 maps
        a start into its presolved space with a wrong objective (far above its true cost),
        so plans dearer than the start, even ones leaving copies unplaced, passed as
        improvements."""
        units = [start.get(pattern, 0) for pattern in self.patterns]
        return units, self.objective_of(units, demand)

    def _run_mip(self, notes: list[str], what: str) -> list[float] | None:
        h = self.h
        h.run()
        status = h.getModelStatus()
        ok = self.highspy.HighsModelStatus
        if status == ok.kTimeLimit:
            notes.append(f"{what}: solver time guard ({GUARD_TIME_S:g} s) reached")
        elif status not in (ok.kOptimal, ok.kSolutionLimit, ok.kIterationLimit, ok.kInterrupt) and (
            "node" not in h.modelStatusToString(status).lower()
        ):
            notes.append(f"{what}: solver ended {h.modelStatusToString(status)}")
        info = h.getInfo()
        if info.primal_solution_status != 2:  # no feasible solution
            return None
        return list(h.getSolution().col_value)
