"""Greedy packing: what is left once the work budget is spent, in time linear in the units.

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
    left = {item.index: demand[item.index] for item in items if demand.get(item.index, 0) > 0}
    capacity: dict[str, int] = {}
    for kind in kinds:
        for host in kind.hosts:
            for name, quantity in host.free.items():
                capacity[name] = max(capacity.get(name, 0), quantity)
    ranked = sorted(items, key=lambda item: (-_largest_share(item, capacity), item.index))
    rank = {item.index: position for position, item in enumerate(ranked)}
    room = {kind.index: kind.limit for kind in kinds}
    chosen: list[tuple[Pattern, int]] = []

    def take(kind: Kind, pattern: Pattern, most: int | None) -> int:
        totals = pattern.totals()
        units = min(left[i] // copies for i, copies in totals.items())
        units = max(1, units if most is None else min(most, units))
        for index, copies in totals.items():
            left[index] -= copies * units
        if room[kind.index] is not None:
            room[kind.index] -= units
        chosen.append((pattern, units))
        return units

    for kind in kinds:  # free capacity: fill each unit with what fits, largest first
        if kind.new:
            continue
        while room[kind.index] != 0 and any(n > 0 for n in left.values()):
            pattern = _fill(kind, rank, left, {})
            if pattern is None:
                break
            take(kind, pattern, room[kind.index])
    options: dict[int, list[tuple[float, int, Kind, int]]] = {}
    new_room = global_room
    while new_room is None or new_room > 0:
        first = next((item for item in ranked if left.get(item.index, 0) > 0), None)
        if first is None:
            break
        if first.index not in options:
            options[first.index] = _by_price(first, kinds)
        best = next((o for o in options[first.index] if room[o[1]] != 0), None)
        if best is None:  # no kind with room holds it: it stays unplaced
            left[first.index] = -left[first.index]
            continue
        kind, alone = best[2], min(best[3], left[first.index])
        units = math.ceil(left[first.index] / alone)
        share = {i: n // units for i, n in left.items() if n > 0 and i != first.index}
        pattern = _fill(kind, rank, {**share, first.index: alone}, {first.index: -1})
        most = units if room[kind.index] is None else min(units, room[kind.index])
        if new_room is not None:
            most = min(most, new_room)
        taken = take(kind, pattern, most)
        if new_room is not None:
            new_room -= taken
    unplaced = {i: abs(n) for i, n in left.items() if n}
    return chosen, unplaced


def _fill(
    kind: Kind, rank: Mapping[int, int], caps: Mapping[int, int], first: Mapping[int, int]
) -> Pattern | None:
    """One unit of ``kind`` packed with ``caps`` copies at most, ``first`` items first, then
    by rank; None if nothing fits."""
    positions = [p for p, item in enumerate(kind.items) if caps.get(item.index, 0) > 0]
    if not positions:
        return None

    def key(position: int) -> tuple[int, int]:
        index = kind.items[position].index
        return first.get(index, 0), rank[index]

    positions.sort(key=key)
    order = np.array(positions, np.int64)
    limits = np.array([caps.get(item.index, 0) for item in kind.items], np.int64)
    return pack_rows(kind, order, limits)


def _by_price(item: Item, kinds: Sequence[Kind]) -> list[tuple[float, int, Kind, int]]:
    """New kinds that may launch for ``item``, cheapest per copy first: (price per copy, kind
    index, kind, copies one unit holds)."""
    found = []
    for kind in kinds:
        if not kind.new or (kind.needs_anchor and item.rider) or item not in kind.items:
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
