"""Exact pricing: the most valuable contents of one unit of a kind, as a small MIP.

The pattern generator prices with greedy packings, which can miss the best pattern. Here the
knapsack of one unit is solved exactly (HiGHS, deterministic node limit) with the same rules
as the packer: each host's scalar resources, per-device shares (a fraction of a device fits on
one device, a whole request takes fully free devices), no more bundles of a STRICT_SPREAD
gang per host than it has copies, a launched accelerator unit holding accelerator work. The
solver's dual bound is an upper bound on the value of *any* unit of the kind, which is what
makes the Lagrangian bounds of :mod:`~autoscaler.planner.bound` valid however the search
ends.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from accel.allocation import SHARE_UNITS
from autoscaler.planner.budget import Budget
from autoscaler.planner.items import Item
from autoscaler.planner.solver import add_rows, limit_mip, make_integer, new_solver

KNAPSACK_MAX_NODES = 200
"""Branch-and-bound nodes per knapsack (deterministic); the dual bound stays valid."""
KNAPSACK_GAP = 1e-6
"""Relative gap at which a knapsack's search stops (pricing: near-exact)."""
KNAPSACK_OFF = ("mip_heuristic_run_feasibility_jump",)
"""Off for the knapsacks: on the benchmark's pricing knapsacks (a few dozen columns) this
heuristic was about 40% of their time and never found a better unit or a tighter bound."""


@dataclass(frozen=True)
class Unit:
    value_bound: float
    """No unit of the kind holds items worth more (at the given values)."""
    contents: tuple[tuple[tuple[int, int], ...], ...] | None
    """Per host, (item index, copies) of the best unit found (None: none found)."""


def best_unit(
    hosts: Sequence,
    items: Sequence[Item],
    values: Mapping[int, float],
    caps: Mapping[int, int],
    needs_anchor: bool,
    fit,
    rel_gap: float = KNAPSACK_GAP,
    work: Budget | None = None,
) -> Unit:
    """The most valuable contents of one unit with ``hosts`` (fresh or partly used bins).

    ``fit(host, item, limit)`` counts the copies of an item that fit on a host alone;
    ``needs_anchor``: the unit must hold an item that is not a rider; ``rel_gap``: the
    search stops within this fraction of the best value; ``work``: the search's work is
    counted there, and once its MIP work is spent the search stops where it stands (its
    dual bound is a bound all the same)."""
    import highspy

    chosen = [
        item
        for item in items
        if values.get(item.index, 0.0) > 1e-12 or (needs_anchor and not item.rider)
    ]
    if not chosen or (needs_anchor and all(item.rider for item in chosen)):
        return Unit(0.0, None)
    cost: list[float] = []
    upper: list[float] = []
    rows: list[tuple[list[int], list[float], float, float]] = []

    def column(value: float, hi: float) -> int:
        cost.append(value)
        upper.append(hi)
        return len(cost) - 1

    y_of = unit_model(hosts, chosen, values, caps, needs_anchor, fit, column, rows, upper)
    if y_of is None:
        return Unit(0.0, None)

    h = new_solver()
    h.setOptionValue("mip_max_nodes", KNAPSACK_MAX_NODES)
    h.setOptionValue("mip_rel_gap", rel_gap)
    for option in KNAPSACK_OFF:
        h.setOptionValue(option, False)
    n = len(cost)
    h.addVars(n, np.zeros(n), np.array(upper))
    h.changeColsCost(n, np.arange(n, dtype=np.int32), np.array(cost))
    make_integer(h, range(n))
    if rows:
        add_rows(h, rows)
    h.changeObjectiveSense(highspy.ObjSense.kMaximize)
    if work is not None:
        limit_mip(h, work, has_plan=True)
    h.run()
    status = h.getModelStatus()
    info = h.getInfo()
    if status == highspy.HighsModelStatus.kInfeasible:
        return Unit(0.0, None)
    bound = info.mip_dual_bound
    if not np.isfinite(bound):  # no bound proven: every item at its cap is one
        bound = sum(cost[y] * upper[y] for y in y_of.values())
    if info.primal_solution_status != 2:
        return Unit(max(bound, 0.0), None)
    solution = h.getSolution().col_value
    contents = []
    for position in range(len(hosts)):
        held = [
            (index, round(solution[y]))
            for (where, index), y in y_of.items()
            if where == position and round(solution[y]) > 0
        ]
        contents.append(tuple(sorted(held, key=lambda ic: _order(_item(chosen, ic[0])))))
    return Unit(max(bound, 0.0), tuple(contents))


def unit_model(hosts, chosen, values, caps, needs_anchor, fit, column, rows, upper):
    """Columns (via ``column(value, upper)``) and rows (``(cols, vals, lo, hi)``) of one
    unit's contents; returns {(host, item index): copies column}, or None when nothing fits.
    An item's copies on all the unit's hosts together are at most its cap."""
    inf = np.inf
    y_of: dict[tuple[int, int], int] = {}
    for position, host in enumerate(hosts):
        for item in chosen:
            alone = fit(host.copy(host.unit), item, caps.get(item.index, 0))
            if alone > 0:
                y_of[(position, item.index)] = column(values.get(item.index, 0.0), float(alone))
        on_host = [item for item in chosen if (position, item.index) in y_of]
        if not on_host:
            continue
        for name, free in sorted(host.free.items()):
            users = [(item, item.needs.get(name, 0)) for item in on_host]
            users = [(item, need) for item, need in users if need > 0]
            if users and sum(need * upper[y_of[(position, i.index)]] for i, need in users) > free:
                # In units of the needs' common divisor: exact, and within HiGHS's range
                # (memory in share units reaches 1e15, which it refuses as a coefficient).
                scale = math.gcd(*(need for _, need in users))
                cols = [y_of[(position, item.index)] for item, _ in users]
                vals = [float(need // scale) for _, need in users]
                rows.append((cols, vals, -inf, float(max(free, 0) // scale)))
        for name, shares in sorted(host.devices.items()):
            _devices(position, name, shares, on_host, y_of, column, rows, upper)
        spread: dict[int, list[Item]] = {}
        for item in on_host:
            if item.spread_group is not None:
                spread.setdefault(item.spread_group, []).append(item)
        for members in spread.values():  # each copy of a gang at most once on a host
            if len(members) > 1:
                cols = [y_of[(position, item.index)] for item in members]
                rows.append((cols, [1.0] * len(cols), -inf, float(members[0].gang_copies)))
    if not y_of:
        return None
    columns_of: dict[int, list[int]] = {}  # (one host's column is bounded by the cap already)
    for (_, index), y in y_of.items():
        columns_of.setdefault(index, []).append(y)
    for index, cols in columns_of.items():
        if len(cols) > 1 and sum(upper[y] for y in cols) > caps.get(index, 0):
            rows.append((cols, [1.0] * len(cols), -inf, float(caps.get(index, 0))))
    if needs_anchor:
        anchors = [y for (_, index), y in y_of.items() if not _item(chosen, index).rider]
        if not anchors:
            return None
        rows.append((anchors, [1.0] * len(anchors), 1.0, inf))
    return y_of


def _item(items: Sequence[Item], index: int) -> Item:
    for item in items:
        if item.index == index:
            return item
    raise KeyError(index)


def _order(item: Item) -> tuple:
    """Packing order that replays a solution: whole devices first, then fractions largest
    first, then everything else."""
    whole = sum(share for part in item.parts for _, share in part.devices if share >= SHARE_UNITS)
    fraction = max(
        (share for part in item.parts for _, share in part.devices if share < SHARE_UNITS),
        default=0,
    )
    return (-whole, -fraction, item.index)


def _devices(position, name, shares, on_host, y_of, column, rows, upper) -> None:
    """Per-device rows of one device resource on one host."""
    whole_users: list[tuple[int, float]] = []
    fraction_users: list[tuple[int, int]] = []  # (y column, share) per fractional part
    for item in on_host:
        y = y_of[(position, item.index)]
        devices_per_copy = 0
        for part in item.parts:
            for resource, share in part.devices:
                if resource != name:
                    continue
                if share >= SHARE_UNITS:
                    devices_per_copy += share // SHARE_UNITS
                else:
                    fraction_users.append((y, share))
        if devices_per_copy:
            whole_users.append((y, float(devices_per_copy)))
    if not whole_users and not fraction_users:
        return
    full = [d for d, free in enumerate(shares) if free == SHARE_UNITS]
    taken = {d: column(0.0, 1.0) for d in full} if whole_users else {}
    if whole_users:  # devices taken whole cover the whole requests
        cols = [y for y, _ in whole_users] + list(taken.values())
        vals = [k for _, k in whole_users] + [-1.0] * len(taken)
        rows.append((cols, vals, -np.inf, 0.0))
    if not fraction_users:
        return
    per_device: dict[int, list[tuple[int, float]]] = {d: [] for d in range(len(shares))}
    for y, share in fraction_users:  # each fractional copy lands on one device
        on = {}
        for d, free in enumerate(shares):
            if free >= share:
                on[d] = column(0.0, float(min(upper[y], free // share)))
                per_device[d].append((on[d], float(share)))
        rows.append(([y, *on.values()], [1.0] + [-1.0] * len(on), 0.0, 0.0))
    for d, free in enumerate(shares):
        if not per_device[d]:
            continue
        cols = [c for c, _ in per_device[d]]
        vals = [v for _, v in per_device[d]]
        if d in taken:
            cols.append(taken[d])
            vals.append(float(free))
        rows.append((cols, vals, -np.inf, float(free)))
