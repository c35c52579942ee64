"""Greedy packing in one pass: the plan large plans start from, and what is left once the
work budget is spent (:mod:`~autoscaler.planner.budget`).

Largest items first (by their largest share of the roomiest kind), free capacity first
(existing hosts, ``min_workers`` units, room left on units already chosen), then new units:
each step takes the kind that holds the first item left most cheaply per copy, fills one
unit with that item and, beside it, an even share of everything else left, and repeats
that unit as often as its contents allow. Every item some kind with room holds is placed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from autoscaler.planner.items import Item
from autoscaler.planner.packing import Kind, Pattern, pack, pack_rows


def greedy(
    items: Sequence[Item],
    demand: Mapping[int, int],
    kinds: Sequence[Kind],
    global_room: int | None,
) -> tuple[list[tuple[Pattern, int]], dict[int, int]]:
    """Patterns with their units covering ``demand`` where room allows, and what is left."""
    items = [item for item in items if demand.get(item.index, 0) > 0]
    capacity: dict[str, int] = {}
    for kind in kinds:
        for host in kind.hosts:
            for name, quantity in host.free.items():
                capacity[name] = max(capacity.get(name, 0), quantity)
    ranked = sorted(items, key=lambda item: (-_largest_share(item, capacity), item.index))
    at = {item.index: position for position, item in enumerate(ranked)}
    # Copies left per item, by rank; one more slot (always 0) for items not asked for here.
    left = np.array([demand[item.index] for item in ranked] + [0], np.int64)
    rows = {kind.index: {item.index: row for row, item in enumerate(kind.items)} for kind in kinds}
    ranks = {
        kind.index: np.array([at.get(item.index, len(ranked)) for item in kind.items], np.int64)
        for kind in kinds
    }
    room = {kind.index: kind.limit for kind in kinds}
    chosen: list[tuple[Pattern, int]] = []

    def fill(kind: Kind, caps: np.ndarray, first: int | None = None) -> Pattern | None:
        """One unit packed with ``caps`` copies (per row of the kind) at most, the row
        ``first`` first, then by rank."""
        found = np.flatnonzero(caps > 0)
        if found.size == 0:
            return None
        order = found[np.argsort(ranks[kind.index][found], kind="stable")].tolist()
        if first is not None:
            order = [first] + [row for row in order if row != first]
        return pack_rows(kind, order, caps.tolist())

    def take(kind: Kind, pattern: Pattern, most: int | None) -> int:
        totals = [(at[index], copies) for index, copies in pattern.totals().items()]
        units = min(int(left[position]) // copies for position, copies in totals)
        units = max(1, units if most is None else min(most, units))
        for position, copies in totals:
            left[position] -= copies * units
        if room[kind.index] is not None:
            room[kind.index] -= units
        chosen.append((pattern, units))
        return units

    for kind in kinds:  # free capacity: fill each unit with what fits, largest first
        while not kind.new and room[kind.index] != 0:
            pattern = fill(kind, left[ranks[kind.index]])
            if pattern is None:
                break
            take(kind, pattern, room[kind.index])
    options: dict[tuple, list[tuple[float, int, Kind, int]]] = {}
    new_room = global_room
    position = 0
    while new_room is None or new_room > 0:
        while position < len(ranked) and left[position] <= 0:
            position += 1
        if position == len(ranked):
            break
        first = ranked[position]
        shape = (first.parts, first.rider)
        if shape not in options:
            options[shape] = _by_price(first, kinds, rows)
        best = next((o for o in options[shape] if room[o[1]] != 0), None)
        if best is None:  # no kind with room holds it: it stays unplaced
            left[position] = -left[position]
            continue
        kind, alone = best[2], min(best[3], int(left[position]))
        units = math.ceil(int(left[position]) / alone)
        share = left[ranks[kind.index]]
        share = np.where(share >= units, share // units, 0)
        row = rows[kind.index][first.index]
        share[row] = alone
        most = units if room[kind.index] is None else min(units, room[kind.index])
        if new_room is not None:
            most = min(most, new_room)
        taken = take(kind, fill(kind, share, row), most)
        if new_room is not None:
            new_room -= taken
    unplaced = {item.index: abs(int(left[p])) for p, item in enumerate(ranked) if left[p]}
    return chosen, unplaced


def _by_price(
    item: Item, kinds: Sequence[Kind], rows: Mapping[int, Mapping[int, int]]
) -> list[tuple[float, int, Kind, int]]:
    """New kinds that may launch for ``item``, cheapest per copy first: (price per copy, kind
    index, kind, copies one unit holds)."""
    found = []
    for kind in kinds:
        if not kind.new or (kind.needs_anchor and item.rider) or item.index not in rows[kind.index]:
            continue
        pattern = pack(kind, [item], {item.index: 1 << 30})
        if pattern is not None:
            alone = pattern.totals()[item.index]
            found.append((kind.cost / alone, kind.index, kind, alone))
    return sorted(found, key=lambda option: option[:2])


def _largest_share(item: Item, capacity: Mapping[str, int]) -> float:
    """The item's largest share of any resource of the roomiest host that has it."""
    return max(
        (need / capacity[name] for name, need in item.needs.items() if capacity.get(name)),
        default=0.0,
    )
