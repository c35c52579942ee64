"""Configurations (patterns): what one unit of a kind holds, chosen by column generation.

A *kind* is something units can be taken from: a launchable node type (price per unit, a
per-type room) or a group of identical free capacity (running, pending or ``min_workers``
hosts: cost 0, as many units as hosts). A *pattern* is one unit's contents, host by host,
found by actually packing the unit with :class:`~autoscaler.planner.capacity.Bin` (per-device
shares, STRICT_SPREAD slots, STRICT_PACK groups), so every pattern the master picks is
realisable as it stands.

Gilmore-Gomory: the restricted master LP ``min sum(cost[p] x[p])`` subject to every item's
copies being covered, per-kind and global limits, prices its duals; a per-kind knapsack
(greedy packings in several orders, exact device accounting) offers new patterns with a
negative reduced cost, until none is found or a fixed round count is reached. The master is
then solved over the generated patterns as a MIP (deterministic node limit), and a second
MIP picks, among plans within :data:`NODE_TOLERANCE` of that cost, the one with the fewest
units. Nothing depends on wall-clock time; a time limit is a last-resort guard that is
reported when hit.
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

MAX_ROUNDS = 60
"""Column-generation rounds at most (deterministic)."""
MIP_REL_GAP = 1e-3
MIP_MAX_NODES = 400
GUARD_TIME_S = 20.0
"""Last-resort guard per solver call; never reached on sane inputs, reported when it is."""
NODE_TOLERANCE = 0.005
"""Among plans costing at most this much more than the cheapest found, fewest units win."""
TIE_BREAK = 1e-3
"""Per-unit surcharge, as a fraction of the cheapest price, so equal-cost patterns favour
bigger units (it changes any plan's cost by at most this fraction)."""


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


@dataclass
class Result:
    kinds: list[Kind]
    """The kinds the patterns refer to (by position)."""
    chosen: list[tuple[Pattern, int]]
    """Patterns and how many units of each."""
    unplaced: dict[int, int]
    notes: list[str]


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
        h.setOptionValue("output_flag", False)
        h.setOptionValue("threads", 1)
        h.setOptionValue("random_seed", 0)
        h.setOptionValue("time_limit", GUARD_TIME_S)
        inf = highspy.kHighsInf
        self.row_of = {item.index: row for row, item in enumerate(items)}
        for item in items:
            h.addRow(float(demand[item.index]), inf, 0, np.array([], np.int32), np.array([]))
        self.limit_row: dict[int, int] = {}
        for kind in kinds:
            if kind.limit is not None:
                self.limit_row[kind.index] = h.getNumRow()
                h.addRow(-inf, float(kind.limit), 0, np.array([], np.int32), np.array([]))
        self.global_row = None
        if global_room is not None:
            self.global_row = h.getNumRow()
            h.addRow(-inf, float(global_room), 0, np.array([], np.int32), np.array([]))
        self.slack_cols: list[int] = []
        for item in items:  # copies left unplaced, at a penalty
            self.slack_cols.append(h.getNumCol())
            h.addCol(
                penalty, 0.0, inf, 1, np.array([self.row_of[item.index]], np.int32), np.ones(1)
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
            rows.append(self.row_of[index])
            vals.append(float(copies))
        if kind.index in self.limit_row:
            rows.append(self.limit_row[kind.index])
            vals.append(1.0)
        if self.global_row is not None and kind.new:
            rows.append(self.global_row)
            vals.append(1.0)
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
        kind_duals = {
            kind.index: (duals[self.limit_row[kind.index]] if kind.index in self.limit_row else 0.0)
            + (global_dual if kind.new else 0.0)
            for kind in self.kinds
        }
        return item_duals, kind_duals, self.h.getInfo().objective_function_value

    def solve_integer(self, notes: list[str]) -> list[int]:
        """Units per pattern: the cheapest integer plan over the generated patterns, then the
        one with the fewest new units among those within :data:`NODE_TOLERANCE` of it."""
        highspy = self.highspy
        h = self.h
        lp_values = list(h.getSolution().col_value)
        n = len(self.cols)
        if n == 0:
            return []
        cols = np.array(self.cols, np.int32)
        h.changeColsIntegrality(n, cols, np.array([highspy.HighsVarType.kInteger] * n))
        h.setOptionValue("mip_rel_gap", MIP_REL_GAP)
        h.setOptionValue("mip_max_nodes", MIP_MAX_NODES)
        first = self._run_mip(notes, "cheapest plan")
        if first is None:
            notes.append("no integer plan over the patterns: LP solution rounded down")
            return [math.floor(lp_values[c] + 1e-9) for c in self.cols]
        units = [round(first[c]) for c in self.cols]
        real_cost = sum(
            self.kinds[p.kind].cost * u for p, u in zip(self.patterns, units, strict=True)
        )
        slack = sum(first[c] for c in self.slack_cols)
        new_units = sum(
            u for p, u in zip(self.patterns, units, strict=True) if self.kinds[p.kind].new
        )
        if new_units <= 1:
            return units
        # Fewest units within the tolerance, placing as much, cheaper breaking ties.
        inf = highspy.kHighsInf
        costs = np.array([self.kinds[p.kind].cost for p in self.patterns])
        h.addRow(-inf, real_cost * (1 + NODE_TOLERANCE) + 1e-9, n, cols, costs)
        slack_cols = np.array(self.slack_cols, np.int32)
        h.addRow(-inf, slack + 1e-6, len(slack_cols), slack_cols, np.ones(len(slack_cols)))
        scale = 0.5 / max(real_cost * (1 + NODE_TOLERANCE), 1e-9)
        objective = [
            (1.0 if self.kinds[p.kind].new else 0.0) + scale * self.kinds[p.kind].cost
            for p in self.patterns
        ]
        h.changeColsCost(n, cols, np.array(objective))
        h.changeColsCost(len(slack_cols), slack_cols, np.zeros(len(slack_cols)))
        solution = highspy.HighsSolution()
        solution.col_value = first
        solution.value_valid = True
        h.setSolution(solution)
        second = self._run_mip(notes, "fewest nodes")
        if second is None:
            return units
        fewer = [round(second[c]) for c in self.cols]
        fewer_new = sum(
            u for p, u in zip(self.patterns, fewer, strict=True) if self.kinds[p.kind].new
        )
        return fewer if fewer_new <= new_units else units

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
    master = Master(items, demand, kinds, global_room, penalty, surcharge)
    share_of = {
        (kind.index, item.index): shares(kind, item) for kind in kinds for item in kind.items
    }
    caps = {index: demand[index] for index in by_index}

    # Start: for each item, a unit of its cheapest kind per copy filled with it alone.
    for item in items:
        best = None
        for kind in kinds:
            if item not in kind.items or (kind.needs_anchor and item.rider):
                continue
            pattern = pack(kind, [item], {item.index: caps[item.index]})
            if pattern is None:
                continue
            copies = pattern.totals()[item.index]
            key = (master.unit_cost(kind) / copies, kind.index)
            if best is None or key < best[0]:
                best = (key, pattern)
        if best is not None:
            master.add(best[1])

    for _rounds in range(1, MAX_ROUNDS + 1):
        item_duals, kind_duals, _ = master.solve_lp()
        added = 0
        for kind in kinds:
            for pattern in _price(kind, item_duals, share_of, caps):
                value = sum(item_duals[i] * n for i, n in pattern.totals().items())
                reduced = master.unit_cost(kind) - value - kind_duals[kind.index]
                if reduced < -1e-7 * max(1.0, master.unit_cost(kind)) and master.add(pattern):
                    added += 1
        if not added:
            break
    else:
        notes.append(f"column generation stopped at its round limit ({MAX_ROUNDS})")
        master.solve_lp()
    units = master.solve_integer(notes)
    chosen = [(p, u) for p, u in zip(master.patterns, units, strict=True) if u > 0]
    covered: dict[int, int] = {}
    for pattern, count in chosen:
        for index, copies in pattern.totals().items():
            covered[index] = covered.get(index, 0) + copies * count
    unplaced = {
        index: demand[index] - covered.get(index, 0)
        for index in by_index
        if covered.get(index, 0) < demand[index]
    }
    return Result(kinds, chosen, unplaced, notes)


def _price(
    kind: Kind,
    duals: Mapping[int, float],
    share_of: Mapping[tuple[int, int], tuple[float, float]],
    caps: Mapping[int, int],
) -> list[Pattern]:
    """Candidate patterns for ``kind`` at these duals: greedy packings in three orders."""
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
    """A HiGHS instance. Its constructor prints a banner on the C stdout before any option
    can be set, which would corrupt ``--json`` output, so file descriptor 1 is pointed at
    /dev/null while it is made."""
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
    return solver
