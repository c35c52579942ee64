"""Configurations (patterns): what one unit of a kind holds, chosen by column generation.

A *kind* is something units can be taken from: a launchable node type (price per unit, a
per-type room) or a group of identical free capacity (running, pending or ``min_workers``
hosts: cost 0, as many units as hosts). A *pattern* is one unit's contents, host by host,
found by actually packing the unit with :class:`~autoscaler.planner.capacity.Bin` (per-device
shares, STRICT_SPREAD slots, STRICT_PACK groups), so every pattern the master picks is
realisable as it stands.

Gilmore-Gomory: the restricted master LP ``min sum(cost[p] x[p])`` subject to every item's
copies being covered (a STRICT_SPREAD gang is left unplaced only whole), per-kind and global
limits, prices its duals; a per-kind knapsack (greedy packings in several orders, then a
wider search once those find nothing; exact device accounting) offers patterns with a
negative reduced cost, until none is found or a fixed round count is reached. Fewer nodes:
a second phase prices each new unit at :data:`NODE_PRICING` of the average unit cost, so
patterns of bigger units are generated too. Integer plan: the units the LP takes whole are
kept (each new unit priced at :data:`NODE_TOLERANCE`, so bigger units win ties); the remainder
(a few units per basic pattern) gets its own column generation, seeded with small
single-item units, and a MIP (deterministic node limit) over all patterns. Small plans
(:data:`EXACT_UNITS`): every kind is also priced exactly (:mod:`~autoscaler.planner.knapsack`),
which gives Lagrangian cost bounds (:class:`DualBound`), and a dive makes a second integer
plan; the better one after :mod:`~autoscaler.planner.improve` is kept. Last, among the plans
over every pattern seen that place as much and cost at most :data:`NODE_TOLERANCE` more, a MIP
takes one with the fewest new units (:data:`FEWEST_UNITS_MAX`). Nothing depends on
wall-clock time; a time limit is only a last-resort guard, reported when hit.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from autoscaler.planner.capacity import Bin
from autoscaler.planner.items import Item
from autoscaler.planner.knapsack import best_unit

MAX_ROUNDS = 60
"""Column-generation rounds at most (deterministic)."""
WIDE_FIRST = 8
"""The wider pricing search starts a packing with each of this many best-ranked items."""
RESIDUAL_SEEDS = 3
"""Single-item units offered per item for the remainder (small units round better)."""
MIP_REL_GAP = 1e-3
MIP_MAX_NODES = 400
GUARD_TIME_S = 20.0
"""Last-resort guard per solver call; never reached on sane inputs, reported when it is."""
NODE_TOLERANCE = 0.005
"""Fewer nodes at (nearly) equal cost: a plan may cost at most this fraction more than the
cheapest one found to launch fewer units. While rounding, each new unit is also priced at
this fraction of the average unit cost of the cheapest fractional plan (ties go to bigger
units)."""
NODE_PRICING = 0.03
"""While generating patterns for fewer nodes, each new unit is priced at this fraction of the
average unit cost: bigger-unit patterns enter the pool the fewest-nodes step chooses from
(what a plan may cost more is still :data:`NODE_TOLERANCE`)."""
FEWEST_UNITS_MAX = 60
"""The fewest-nodes step (a MIP over every pattern seen) runs for plans of at most this many
new units; bigger plans are within a few percent of their node bound already and the MIP
would cost more time than the target allows."""
FEWEST_MIP_NODES = 100
"""Branch-and-bound nodes for the fewest-nodes MIP (deterministic; it starts from a plan)."""
TIE_BREAK = 1e-3
"""Per-unit surcharge, as a fraction of the cheapest price, so equal-cost patterns favour
bigger units (it changes any plan's cost by at most this fraction)."""


EXACT_UNITS = 20
"""Exact pricing (:mod:`~autoscaler.planner.knapsack`) when the cheapest fractional plan has
at most this many new units: there rounding and missed patterns weigh most, and the
Lagrangian bounds it yields are what make small plans' bounds tight."""
EXACT_ROUNDS = 6
"""Rounds of exact pricing per phase at most (deterministic)."""
DIVE_STEPS = 80
"""Where pricing is exact, the integer plan comes from a dive: fix the units the LP takes
(at least one), plan the rest again with patterns made for what is left, at most this many
times; then a MIP over every pattern seen, started from the dive's plan."""
"""Rounds of exact pricing per phase at most (deterministic)."""


@dataclass(eq=False)
class Kind:
    index: int
    node_type: str
    cost: float
    limit: int | None
    """Units available (None: no limit of its own)."""
    hosts: tuple[Bin, ...]
    """One unit's hosts as they are before anything of this plan lands on them."""
    new: bool
    """Launched by this plan (counts against the cluster's worker room)."""
    existing: bool = False
    """Running or pending capacity (not ``min_workers`` units launched in this plan)."""
    needs_anchor: bool = False
    """A new accelerator unit: it must hold work other than riders."""
    items: list[Item] = field(default_factory=list)
    """Items one unit may hold."""
    origin: object | None = None
    """For room left on units already chosen: the planner's group of those units."""
    members: tuple[int, ...] = ()
    """Existing capacity: the indices (in the request) of the identical hosts it groups."""


@dataclass(frozen=True)
class Pattern:
    kind: int
    hosts: tuple[tuple[tuple[int, int], ...], ...]
    """Per host, (item index, copies) in the order they were packed."""

    def totals(self) -> dict[int, int]:
        counts: dict[int, int] = {}
        for host in self.hosts:
            for index, copies in host:
                counts[index] = counts.get(index, 0) + copies
        return counts


@dataclass(frozen=True)
class DualBound:
    """One Lagrangian relaxation of "place every copy of the demand": item values (their sum
    over the demand is ``value``) and, per kind, a bound on what one unit of it can hold at
    those values (``unit_values``, exact knapsacks)."""

    value: float
    unit_values: tuple[tuple[int, float], ...]

    def cost_bound(self, kinds: Sequence[Kind], budget: float) -> float | None:
        """No plan placing the demand costs less: sum of values minus, per kind whose unit
        can hold more than it costs, the excess times the most units a plan costing at most
        ``budget`` can take of it (None: unbounded)."""
        total = self.value
        for index, value in self.unit_values:
            kind = kinds[index]
            excess = value - kind.cost
            if excess > 1e-12:
                units = _unit_cap(kind, budget)
                if units is None:
                    return None
                total -= units * excess
        return total


def _unit_cap(kind: Kind, budget: float) -> float | None:
    """Units of ``kind`` any plan costing at most ``budget`` takes at most (None: unbounded)."""
    caps = [float(kind.limit)] if kind.limit is not None else []
    if kind.cost > 0:
        caps.append(max(budget, 0.0) / kind.cost)
    return min(caps) if caps else None


@dataclass
class Result:
    kinds: list[Kind]
    """The kinds the patterns refer to (by position)."""
    chosen: list[tuple[Pattern, int]]
    """Patterns and how many units of each."""
    unplaced: dict[int, int]
    notes: list[str]
    dual_bounds: list[DualBound] = field(default_factory=list)
    """Lagrangian relaxations of placing the whole demand (exact pricing only)."""


# Packing one unit -------------------------------------------------------------------------
def fit(host: Bin, item: Item, limit: int) -> int:
    """Copies of ``item`` that fit on ``host`` (at most ``limit``)."""
    if limit <= 0:
        return 0
    if item.spread_group is not None:
        taken = host.spread_slots.get(item.spread_group)
        if taken is not None and taken != item.slot:
            return 0
    if len(item.parts) == 1:
        return host.fit_count(item.parts[0], limit)
    trial = host.copy(host.unit)
    copies = 0
    while copies < limit and trial.fits_all(item.parts):
        for part in item.parts:
            trial.place(part, 1)
        copies += 1
    return copies


def put(host: Bin, item: Item, copies: int) -> None:
    """Place ``copies`` of ``item`` (as :func:`fit` counted them)."""
    if len(item.parts) == 1:
        host.place(item.parts[0], copies)
    else:
        for _ in range(copies):
            for part in item.parts:
                host.place(part, 1)
    if item.spread_group is not None:
        host.spread_slots[item.spread_group] = item.slot


def replay(kind: Kind, pattern: Pattern, items: Mapping[int, Item]) -> list[Bin] | None:
    """One unit of ``pattern`` packed again (None if it no longer fits)."""
    hosts = [h.copy(h.unit) for h in kind.hosts]
    for host, content in zip(hosts, pattern.hosts, strict=False):
        for index, copies in content:
            item = items[index]
            if fit(host, item, copies) < copies:
                return None
            put(host, item, copies)
    return hosts


def pack(kind: Kind, order: Sequence[Item], caps: Mapping[int, int]) -> Pattern | None:
    """Greedy: each item in ``order`` as many times as fits (up to its cap), host by host."""
    hosts = [h.copy(h.unit) for h in kind.hosts]
    content: list[list[tuple[int, int]]] = [[] for _ in hosts]
    left = dict(caps)
    for item in order:
        for position, host in enumerate(hosts):
            copies = fit(host, item, left.get(item.index, 0))
            if copies:
                put(host, item, copies)
                content[position].append((item.index, copies))
                left[item.index] -= copies
    if not any(content):
        return None
    return Pattern(kind.index, tuple(tuple(c) for c in content))


def shares(kind: Kind, item: Item) -> tuple[float, float]:
    """(dominant share, summed share) of one copy on one unit of ``kind``."""
    capacity: dict[str, int] = {}
    for host in kind.hosts:
        for name, quantity in host.free.items():
            capacity[name] = capacity.get(name, 0) + max(quantity, 0)
    fractions = [need / capacity[name] for name, need in item.needs.items() if capacity.get(name)]
    if not fractions:
        return 1e-9, 1e-9
    return max(max(fractions), 1e-9), max(sum(fractions), 1e-9)


# The master --------------------------------------------------------------------------------
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
        self.kinds = kinds
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
        rows_of: dict[tuple, list[int]] = {}
        for item in items:  # copies left unplaced (whole gangs), at a penalty per bundle
            key = ("item", item.index) if item.spread_group is None else ("gang", item.spread_group)
            rows_of.setdefault(key, []).append(self.row_of[item.index])
        self.slack_rows: list[list[int]] = []
        for rows in rows_of.values():
            self.slack_rows.append(rows)
            self.slack_cols.append(h.getNumCol())
            h.addCol(
                penalty * len(rows),
                0.0,
                inf,
                len(rows),
                np.array(rows, np.int32),
                np.ones(len(rows)),
            )
        self.patterns: list[Pattern] = []
        self.cols: list[int] = []
        self.known: set[Pattern] = set()

    def unit_cost(self, kind: Kind) -> float:
        return kind.cost + (self.surcharge if kind.new else 0.0)

    def add(self, pattern: Pattern) -> bool:
        if pattern in self.known:
            return False
        self.known.add(pattern)
        kind = self.kinds[pattern.kind]
        rows, vals = [], []
        for index, copies in sorted(pattern.totals().items()):
            if index in self.row_of:
                rows.append(self.row_of[index])
                vals.append(float(copies))
        if not rows:
            return False
        if kind.index in self.limit_row:
            rows.append(self.limit_row[kind.index])
            vals.append(1.0)
        if self.global_row is not None and kind.new:
            rows.append(self.global_row)
            vals.append(1.0)
        if self.cost_row is not None and kind.cost:
            rows.append(self.cost_row)
            vals.append(kind.cost)
        self.cols.append(self.h.getNumCol())
        self.patterns.append(pattern)
        self.h.addCol(
            self.unit_cost(kind),
            0.0,
            self.highspy.kHighsInf,
            len(rows),
            np.array(rows, np.int32),
            np.array(vals),
        )
        return True

    def solve_lp(self) -> tuple[dict[int, float], dict[int, float], float]:
        """Item duals, each kind's limit dual plus the global one (<= 0), and the LP value."""
        self.h.run()
        status = self.h.getModelStatus()
        if status != self.highspy.HighsModelStatus.kOptimal:
            raise SolverError(f"restricted master LP ended {self.h.modelStatusToString(status)}")
        duals = list(self.h.getSolution().row_dual)
        item_duals = {index: max(0.0, duals[row]) for index, row in self.row_of.items()}
        global_dual = duals[self.global_row] if self.global_row is not None else 0.0
        cost_dual = duals[self.cost_row] if self.cost_row is not None else 0.0
        kind_duals = {
            kind.index: (duals[self.limit_row[kind.index]] if kind.index in self.limit_row else 0.0)
            + (global_dual if kind.new else 0.0)
            + cost_dual * kind.cost
            for kind in self.kinds
        }
        return item_duals, kind_duals, self.h.getInfo().objective_function_value

    def lp_values(self) -> list[float]:
        values = self.h.getSolution().col_value
        return [values[col] for col in self.cols]

    def lp_cost_and_units(self) -> tuple[float, float]:
        """Cost (without surcharges) and new units of the current LP solution."""
        values = self.h.getSolution().col_value
        cost = units = 0.0
        for pattern, col in zip(self.patterns, self.cols, strict=True):
            kind = self.kinds[pattern.kind]
            cost += kind.cost * values[col]
            units += values[col] if kind.new else 0.0
        return cost, units

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
    ) -> list[int]:
        """Units per pattern: the integer plan of least cost plus surcharges over the
        generated patterns (falls back to the LP solution rounded down). ``start``: a plan
        the search starts from (units per pattern, covering ``demand`` but for whole gangs)."""
        highspy = self.highspy
        h = self.h
        lp_values = list(h.getSolution().col_value)
        n = len(self.cols)
        if n == 0:
            return []
        cols = np.array(self.cols, np.int32)
        h.changeColsIntegrality(n, cols, np.array([highspy.HighsVarType.kInteger] * n))
        h.setOptionValue("mip_rel_gap", MIP_REL_GAP)
        h.setOptionValue("mip_abs_gap", max(absolute_gap, 1e-6))
        h.setOptionValue("mip_allow_restart", False)
        h.setOptionValue("mip_max_nodes", max_nodes)
        if start is not None and demand is not None:
            self._start(start, demand)
        values = self._run_mip(notes, "integer plan")
        if values is None:
            notes.append("no integer plan over the patterns: LP solution rounded down")
            return [math.floor(lp_values[c] + 1e-9) for c in self.cols]
        return [round(values[c]) for c in self.cols]

    def _start(self, start: Mapping[Pattern, int], demand: Mapping[int, int]) -> None:
        values = [0.0] * self.h.getNumCol()
        position = {pattern: col for pattern, col in zip(self.patterns, self.cols, strict=True)}
        for pattern, units in start.items():
            values[position[pattern]] = float(units)
        covered = _covered(start)
        for col, rows in zip(self.slack_cols, self.slack_rows, strict=True):
            short = [
                demand.get(index, 0) - covered.get(index, 0)
                for index, row in self.row_of.items()
                if row in rows
            ]
            values[col] = float(max([0, *short]))
        solution = self.highspy.HighsSolution()
        solution.col_value = values
        solution.value_valid = True
        self.h.setSolution(solution)

    def _run_mip(self, notes: list[str], what: str) -> list[float] | None:
        h = self.h
        h.run()
        status = h.getModelStatus()
        ok = self.highspy.HighsModelStatus
        if status == ok.kTimeLimit:
            notes.append(f"{what}: solver time guard ({GUARD_TIME_S:g} s) reached")
        elif status not in (ok.kOptimal, ok.kSolutionLimit, ok.kIterationLimit) and (
            "node" not in h.modelStatusToString(status).lower()
        ):
            notes.append(f"{what}: solver ended {h.modelStatusToString(status)}")
        info = h.getInfo()
        if info.primal_solution_status != 2:  # no feasible solution
            return None
        return list(h.getSolution().col_value)


class SolverError(RuntimeError):
    pass


# Column generation --------------------------------------------------------------------------
def generate(
    items: Sequence[Item],
    demand: Mapping[int, int],
    kinds: Sequence[Kind],
    global_room: int | None,
) -> Result:
    """Patterns and units per pattern that cover ``demand`` (copies per item index)."""
    notes: list[str] = []
    items = [item for item in items if demand.get(item.index, 0) > 0]
    wanted = {item.index for item in items}
    kinds = [
        replace(kind, index=position, items=[i for i in kind.items if i.index in wanted])
        for position, kind in enumerate(k for k in kinds if k.limit != 0)
    ]
    kinds = [
        replace(kind, index=position) for position, kind in enumerate(k for k in kinds if k.items)
    ]
    if not items or not kinds:
        return Result(kinds, [], {i.index: demand[i.index] for i in items}, notes)
    by_index = {item.index: item for item in items}
    prices = [kind.cost for kind in kinds if kind.new and kind.cost > 0]
    surcharge = TIE_BREAK * min(prices, default=1.0)
    penalty = 1000.0 * max([kind.cost for kind in kinds] + [1.0])
    limits = {kind.index: kind.limit for kind in kinds}
    master = Master(items, demand, kinds, limits, global_room, penalty, surcharge)
    share_of = {
        (kind.index, item.index): shares(kind, item) for kind in kinds for item in kind.items
    }
    caps = {index: demand[index] for index in by_index}

    for item in items:  # start: a unit of the cheapest kind per copy, holding it alone
        _seed(master, kinds, item, caps, 1)

    rounds = _column_generation(master, kinds, share_of, caps, MAX_ROUNDS)
    lp_cost, lp_units = master.lp_cost_and_units()
    exact = lp_units <= EXACT_UNITS
    dual_bounds: list[DualBound] = []
    if exact:
        dual_bounds += _exact_rounds(master, kinds, share_of, caps, by_index, cost_phase=True)
        lp_cost, lp_units = master.lp_cost_and_units()
    # Fewer nodes: price each new unit at NODE_PRICING of the average unit cost of the
    # cheapest (fractional) plan and generate the patterns that favours; round under the
    # NODE_TOLERANCE price.
    if lp_units > 0 and lp_cost > 0:
        master.set_surcharge(NODE_PRICING * lp_cost / lp_units)
        rounds += _column_generation(master, kinds, share_of, caps, MAX_ROUNDS)
        if exact:
            dual_bounds += _exact_rounds(master, kinds, share_of, caps, by_index)
        master.set_surcharge(NODE_TOLERANCE * lp_cost / lp_units)
        master.solve_lp()

    from autoscaler.planner.improve import improve  # it packs with this module's helpers

    pool: dict[Pattern, None] = dict.fromkeys(master.patterns)
    args = (master, items, demand, kinds, limits, global_room, penalty, share_of, notes, pool)
    plans = [_round(*args)]
    if exact:  # a second integer plan by diving; the better one (after improvement) is kept
        plans.append(_dive(*args))
    plans = [
        dict(improve(list(p.items()), kinds, by_index, demand, global_room, master.surcharge))
        for p in plans
    ]
    for plan in plans:
        pool.update(dict.fromkeys(plan))
    taken = min(plans, key=lambda p: _objective(master, p, demand))
    taken = _fewest_units(
        taken, list(pool), items, demand, kinds, limits, global_room, share_of, notes
    )
    if rounds >= 2 * MAX_ROUNDS:
        notes.append(f"column generation stopped at its round limit ({MAX_ROUNDS} per phase)")
    chosen = sorted(taken.items(), key=lambda pu: (pu[0].kind, pu[0].hosts))
    covered = _covered(taken)
    unplaced = {
        index: demand[index] - covered.get(index, 0)
        for index in by_index
        if covered.get(index, 0) < demand[index]
    }
    return Result(kinds, chosen, unplaced, notes, dual_bounds)


def _round(master, items, demand, kinds, limits, global_room, penalty, share_of, notes, pool):
    """Integer plan: what the LP takes whole stays; the rest (at most a few units per basic
    pattern) is planned again with patterns generated for it, then solved as a MIP."""
    by_index = {item.index: item for item in items}
    lp_cost, _ = master.lp_cost_and_units()
    taken: dict[Pattern, int] = {}
    for pattern, value in zip(master.patterns, master.lp_values(), strict=True):
        if math.floor(value + 1e-9) > 0:
            taken[pattern] = math.floor(value + 1e-9)
    covered = _covered(taken)
    rest = {i: demand[i] - covered.get(i, 0) for i in by_index if covered.get(i, 0) < demand[i]}
    if not rest:
        return taken
    used: dict[int, int] = {}
    for pattern, units in taken.items():
        used[pattern.kind] = used.get(pattern.kind, 0) + units
    rest_limits = {
        k.index: None if k.limit is None else k.limit - used.get(k.index, 0) for k in kinds
    }
    rest_room = None
    if global_room is not None:
        rest_room = global_room - sum(u for k, u in used.items() if kinds[k].new)
    rest_items = [by_index[i] for i in sorted(rest)]
    residual = Master(rest_items, rest, kinds, rest_limits, rest_room, penalty, master.surcharge)
    for pattern in master.patterns:
        residual.add(pattern)
    for item in rest_items:  # small units for what is left: each item alone
        _seed(residual, kinds, item, rest, RESIDUAL_SEEDS)
    _column_generation(residual, kinds, share_of, rest, MAX_ROUNDS)
    pool.update(dict.fromkeys(residual.patterns))
    # The MIP runs over the residual LP's support and each item's cheapest single-item units:
    # a few dozen columns, so its root stays cheap whatever the pool grew to.
    support = Master(rest_items, rest, kinds, rest_limits, rest_room, penalty, master.surcharge)
    for pattern, value in zip(residual.patterns, residual.lp_values(), strict=True):
        if value > 1e-9:
            support.add(pattern)
    for item in rest_items:
        _seed(support, kinds, item, rest, RESIDUAL_SEEDS)
    support.solve_lp()
    for pattern, units in zip(
        support.patterns, support.solve_integer(notes, MIP_REL_GAP * lp_cost), strict=True
    ):
        if units > 0:
            taken[pattern] = taken.get(pattern, 0) + units
    return taken


def _dive(master, items, demand, kinds, limits, global_room, penalty, share_of, notes, pool):
    """Integer plan by diving: fix the units the LP takes whole, and where it takes none the
    pattern it takes most of; plan what is left again (patterns made for it); repeat. Then a
    MIP over every pattern seen, started from the dive's plan, may combine them better."""
    lp_cost, _ = master.lp_cost_and_units()
    dive = Master(items, demand, kinds, limits, global_room, penalty, master.surcharge)
    for pattern in master.patterns:
        dive.add(pattern)
    fixed: dict[Pattern, int] = {}
    for _ in range(DIVE_STEPS):
        covered = _covered(fixed)
        rest = {i: max(0, n - covered.get(i, 0)) for i, n in demand.items()}
        if not any(rest.values()):
            break
        used: dict[int, int] = {}
        for pattern, units in fixed.items():
            used[pattern.kind] = used.get(pattern.kind, 0) + units
        rest_limits = {
            k.index: None if k.limit is None else k.limit - used.get(k.index, 0) for k in kinds
        }
        rest_room = None
        if global_room is not None:
            rest_room = global_room - sum(u for k, u in used.items() if kinds[k].new)
        dive.bound_rows(rest, rest_limits, rest_room)
        for item in items:
            if rest[item.index]:
                _seed(dive, kinds, item, rest, 1)
        _column_generation(dive, kinds, share_of, rest, MAX_ROUNDS)
        values = dive.lp_values()
        step = {
            pattern: math.floor(value + 1e-6)
            for pattern, value in zip(dive.patterns, values, strict=True)
            if value > 1 - 1e-6
        }
        if not step:
            best = max(range(len(values)), key=lambda c: (values[c], -c), default=None)
            if best is None or values[best] < 1e-6:
                break  # what is left stays unplaced (limits)
            step = {dive.patterns[best]: 1}
        for pattern, units in step.items():
            fixed[pattern] = fixed.get(pattern, 0) + units
    pool.update(dict.fromkeys(dive.patterns))
    final = Master(items, demand, kinds, limits, global_room, penalty, master.surcharge)
    for pattern in dive.patterns:
        final.add(pattern)
    final.solve_lp()
    units = final.solve_integer(notes, MIP_REL_GAP * lp_cost, start=fixed, demand=demand)
    chosen = {p: u for p, u in zip(final.patterns, units, strict=True) if u > 0}
    return (
        chosen if _objective(final, chosen, demand) <= _objective(final, fixed, demand) else fixed
    )


def _fewest_units(
    taken: Mapping[Pattern, int],
    pool: Sequence[Pattern],
    items: Sequence[Item],
    demand: Mapping[int, int],
    kinds: Sequence[Kind],
    limits: Mapping[int, int | None],
    global_room: int | None,
    share_of: Mapping[tuple[int, int], tuple[float, float]],
    notes: list[str],
) -> Mapping[Pattern, int]:
    """Among the plans over ``pool`` that place as much as ``taken`` and cost at most
    :data:`NODE_TOLERANCE` more, one with the fewest new units (a MIP with a deterministic
    node limit, started from ``taken``); ``taken`` where none has fewer."""
    new_units = sum(u for p, u in taken.items() if kinds[p.kind].new)
    if not 1 < new_units <= FEWEST_UNITS_MAX:
        return taken
    covered = _covered(taken)
    placed = {index: min(n, covered.get(index, 0)) for index, n in demand.items()}
    cost = sum(kinds[p.kind].cost * u for p, u in taken.items())
    budget = cost * (1 + NODE_TOLERANCE) + 1e-9
    weight = budget + 1.0  # one unit fewer outweighs any cost difference within the budget
    penalty = weight * (new_units + 1)  # leaving a copy out costs more than ``taken``
    master = Master(items, placed, kinds, limits, global_room, penalty, weight)
    for pattern in pool:
        master.add(pattern)
    master.cap_cost(budget)
    _column_generation(master, kinds, share_of, placed, MAX_ROUNDS)
    units = master.solve_integer(notes, 0.5, taken, placed, FEWEST_MIP_NODES)
    chosen = {p: u for p, u in zip(master.patterns, units, strict=True) if u > 0}
    fewer = sum(u for p, u in chosen.items() if kinds[p.kind].new) < new_units
    within = sum(kinds[p.kind].cost * u for p, u in chosen.items()) <= budget
    covers = all(_covered(chosen).get(i, 0) >= n for i, n in placed.items())
    return chosen if fewer and within and covers else taken


def _objective(master: Master, chosen: Mapping[Pattern, int], demand: Mapping[int, int]) -> float:
    """Cost plus surcharges plus the penalty of what is left unplaced."""
    covered = _covered(chosen)
    cost = sum(master.unit_cost(master.kinds[p.kind]) * u for p, u in chosen.items())
    short = sum(max(0, n - covered.get(i, 0)) for i, n in demand.items())
    return cost + 1000.0 * max([k.cost for k in master.kinds] + [1.0]) * short


def _exact_rounds(
    master: Master,
    kinds: Sequence[Kind],
    share_of: Mapping[tuple[int, int], tuple[float, float]],
    caps: Mapping[int, int],
    by_index: Mapping[int, Item],
    cost_phase: bool = False,
) -> list[DualBound]:
    """Price every kind exactly (after the greedy pricing found nothing): add the patterns
    with a negative reduced cost, then the greedy search again; a Lagrangian relaxation per
    round. Stops when exact pricing finds nothing (the LP is then optimal over all patterns)
    or after :data:`EXACT_ROUNDS` rounds."""
    found: list[DualBound] = []
    for _ in range(EXACT_ROUNDS):
        item_duals, kind_duals, _ = master.solve_lp()
        value = sum(item_duals[i] * caps[i] for i in caps if i in item_duals)
        unit_values = []
        added = 0
        for kind in kinds:
            unit = best_unit(kind.hosts, kind.items, item_duals, caps, kind.needs_anchor, fit)
            unit_values.append((kind.index, unit.value_bound))
            if unit.contents is None:
                continue
            pattern = Pattern(kind.index, unit.contents)
            if replay(kind, pattern, by_index) is None:
                continue
            worth = sum(item_duals[i] * n for i, n in pattern.totals().items())
            reduced = master.unit_cost(kind) - worth - kind_duals[kind.index]
            if reduced < -1e-7 * max(1.0, master.unit_cost(kind)) and master.add(pattern):
                added += 1
        if cost_phase:
            found.append(DualBound(value, tuple(unit_values)))
        if not added:
            break
        _column_generation(master, kinds, share_of, caps, MAX_ROUNDS)
    return found


def _seed(
    master: Master, kinds: Sequence[Kind], item: Item, caps: Mapping[int, int], best: int
) -> None:
    """Add the ``best`` cheapest-per-copy units holding only ``item`` (up to its cap)."""
    ranked = []
    for kind in kinds:
        if item not in kind.items or (kind.needs_anchor and item.rider):
            continue
        pattern = pack(kind, [item], {item.index: caps[item.index]})
        if pattern is not None:
            copies = pattern.totals()[item.index]
            ranked.append((master.unit_cost(kind) / copies, kind.index, pattern))
    for _, _, pattern in sorted(ranked, key=lambda r: r[:2])[:best]:
        master.add(pattern)


def _covered(chosen: Mapping[Pattern, int]) -> dict[int, int]:
    covered: dict[int, int] = {}
    for pattern, units in chosen.items():
        for index, copies in pattern.totals().items():
            covered[index] = covered.get(index, 0) + copies * units
    return covered


def _column_generation(
    master: Master,
    kinds: Sequence[Kind],
    share_of: Mapping[tuple[int, int], tuple[float, float]],
    caps: Mapping[int, int],
    max_rounds: int,
) -> int:
    """Add improving patterns until none is found; returns the rounds used."""
    for rounds in range(1, max_rounds + 1):
        item_duals, kind_duals, _ = master.solve_lp()
        added = 0
        for wide in (False, True):  # the wider search only once the quick one finds nothing
            for kind in kinds:
                for pattern in _price(kind, item_duals, share_of, caps, wide):
                    value = sum(item_duals[i] * n for i, n in pattern.totals().items())
                    reduced = master.unit_cost(kind) - value - kind_duals[kind.index]
                    if reduced < -1e-7 * max(1.0, master.unit_cost(kind)) and master.add(pattern):
                        added += 1
            if added:
                break
        if not added:
            return rounds
    master.solve_lp()
    return max_rounds


def _price(
    kind: Kind,
    duals: Mapping[int, float],
    share_of: Mapping[tuple[int, int], tuple[float, float]],
    caps: Mapping[int, int],
    wide: bool = False,
) -> list[Pattern]:
    """Candidate patterns for ``kind`` at these duals: greedy packings in three orders, or
    (``wide``) the best of the packings that start with each item in turn."""
    valued = [item for item in kind.items if duals.get(item.index, 0.0) > 1e-12]
    if not valued:
        return []
    if kind.needs_anchor and all(item.rider for item in valued):
        return []
    orders = []
    for key in (
        lambda i: (-duals[i.index] / share_of[(kind.index, i.index)][0], i.index),
        lambda i: (-duals[i.index] / share_of[(kind.index, i.index)][1], i.index),
        lambda i: (-duals[i.index], i.index),
    ):
        ranked = sorted(valued, key=key)
        if kind.needs_anchor:  # accelerator work first, riders in the room it leaves
            ranked = [i for i in ranked if not i.rider] + [i for i in ranked if i.rider]
        orders.append(ranked)
    if wide:
        base = orders[0]
        best: tuple[float, Pattern] | None = None
        for first in base[:WIDE_FIRST]:
            if kind.needs_anchor and first.rider:
                continue
            pattern = pack(kind, [first, *(i for i in base if i is not first)], caps)
            if pattern is not None:
                value = sum(duals[i] * n for i, n in pattern.totals().items())
                if best is None or value > best[0] + 1e-12:
                    best = (value, pattern)
        return [] if best is None else [best[1]]
    riders = {item.index for item in valued if item.rider}
    found: list[Pattern] = []
    for order in orders:
        pattern = pack(kind, order, caps)
        if pattern is None or pattern in found:
            continue
        if kind.needs_anchor and all(index in riders for index in pattern.totals()):
            continue
        found.append(pattern)
    return found


def new_solver():
    """A quiet, deterministic HiGHS instance (one thread, fixed seed, the time limit only as
    a guard). Its constructor prints a banner on the C stdout before any option can be set,
    which would corrupt ``--json`` output, so file descriptor 1 is pointed at /dev/null while
    it is made."""
    import highspy

    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 1)
            solver = highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    solver.setOptionValue("output_flag", False)
    solver.setOptionValue("threads", 1)
    solver.setOptionValue("random_seed", 0)
    solver.setOptionValue("time_limit", GUARD_TIME_S)
    return solver


def add_rows(solver, rows: Sequence[tuple[list[int], list[float], float, float]]) -> None:
    """Add ``rows`` (columns, coefficients, lower, upper) to ``solver`` in one call."""
    starts, index, value = [], [], []
    for cols, vals, _, _ in rows:
        starts.append(len(index))
        index.extend(cols)
        value.extend(vals)
    solver.addRows(
        len(rows),
        np.array([r[2] for r in rows]),
        np.array([r[3] for r in rows]),
        len(index),
        np.array(starts, np.int32),
        np.array(index, np.int32),
        np.array(value),
    )
