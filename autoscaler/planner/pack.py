"""Placing items onto hosts: existing capacity, then new units, with exact device accounting.

The packer keeps every host (bin) and a log of placements, so a STRICT_SPREAD gang that
could not be placed whole is rolled back, and an under-used new unit can be emptied into
free room elsewhere. Identical units are filled once and the fill pattern is repeated, so
100,000 bundles cost as much work as their distinct shapes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from autoscaler.planner.capacity import Bin
from autoscaler.planner.items import Item, fresh_host
from autoscaler.planner.model import NodeType


@dataclass(eq=False)
class Placement:
    item: Item
    bin: Bin
    count: int
    grants: list[tuple[str, int, int]]


class Packer:
    """Open hosts by node type, and the units this plan launches."""

    def __init__(
        self,
        node_types: Mapping[str, NodeType],
        open_bins: Iterable[Bin],
        unit_room: Mapping[str, int | None],
        global_room: int | None,
    ) -> None:
        self.node_types = node_types
        self.bins: dict[str, list[Bin]] = {}
        for host in open_bins:
            self.bins.setdefault(host.node_type, []).append(host)
        self.unit_room = dict(unit_room)
        self.global_room = global_room
        self.demand_units: dict[str, list[int]] = {}
        """Units launched for demand, per type (min_workers units are not listed here)."""
        self.log: list[Placement] = []
        self.placed: dict[int, int] = {}
        """Copies placed per item index."""
        self.unit_load: dict[tuple[str, int], int] = {}
        """Copies placed per (node type, unit)."""
        self._next_unit = max((b.unit for bins in self.bins.values() for b in bins), default=0) + 1

    # Placing onto open hosts ------------------------------------------------------------
    def place_open(self, item: Item, count: int, types: Iterable[str], new_only: bool) -> int:
        """First-fit onto open hosts of ``types``; returns how many copies were placed."""
        placed = 0
        for name in types:
            for host in self.bins.get(name, ()):
                if placed == count:
                    return placed
                if new_only and not host.new:
                    continue
                placed += self._put(item, host, count - placed)
        return placed

    def _put(self, item: Item, host: Bin, count: int) -> int:
        if item.spread_group is not None:
            taken = host.spread_slots.get(item.spread_group)
            if taken is not None and taken != item.slot:
                return 0
        if len(item.parts) == 1:
            fit = host.fit_count(item.parts[0], count)
        else:
            fit = 0
            while fit < count and host.fits_all(item.parts):
                self._record(item, host, 1)
                fit += 1
            return fit
        if fit:
            self._record(item, host, fit)
        return fit

    def _record(self, item: Item, host: Bin, count: int) -> None:
        grants: list[tuple[str, int, int]] = []
        for part in item.parts:
            grants.extend(host.place(part, count))
        if item.spread_group is not None:
            host.spread_slots[item.spread_group] = item.slot
        self._append(Placement(item, host, count, grants))

    def _append(self, placement: Placement) -> None:
        self.log.append(placement)
        self._count(placement, placement.count)

    def _count(self, placement: Placement, copies: int) -> None:
        index = placement.item.index
        self.placed[index] = self.placed.get(index, 0) + copies
        key = (placement.bin.node_type, placement.bin.unit)
        self.unit_load[key] = self.unit_load.get(key, 0) + copies

    # Opening units ----------------------------------------------------------------------
    def room(self, node_type: str) -> int | None:
        """Units of ``node_type`` this plan may still launch (None: unlimited)."""
        limits = [r for r in (self.unit_room.get(node_type), self.global_room) if r is not None]
        return min(limits) if limits else None

    def fill_new_units(self, node_type: str, wanted: list[tuple[Item, int]]) -> dict[int, int]:
        """Open units of ``node_type`` for ``wanted`` copies; returns copies left per item."""
        left = {item.index: count for item, count in wanted if count > 0}
        by_index = {item.index: item for item, _ in wanted}
        order = sorted(by_index.values(), key=lambda i: _size(i, self.node_types[node_type]))
        while any(left.values()) and self.room(node_type) != 0:
            hosts = self._open_unit(node_type)
            first = len(self.log)
            pattern: dict[int, int] = {}
            for item in order:
                for host in hosts:
                    if left.get(item.index):
                        placed = self._put(item, host, left[item.index])
                        left[item.index] -= placed
                        pattern[item.index] = pattern.get(item.index, 0) + placed
            if not any(pattern.values()):
                self._close_last_unit(node_type)
                break
            self._repeat(node_type, hosts, self.log[first:], pattern, left)
        return {index: count for index, count in left.items() if count}

    def _repeat(
        self,
        node_type: str,
        hosts: list[Bin],
        template: list[Placement],
        pattern: dict[int, int],
        left: dict[int, int],
    ) -> None:
        """Open identical copies of a filled unit while the remaining demand repeats it."""
        used = {index: n for index, n in pattern.items() if n}
        copies = min(left[index] // n for index, n in used.items())
        room = self.room(node_type)
        if room is not None:
            copies = min(copies, room)
        for _ in range(max(copies, 0)):
            unit = self._new_unit_id(node_type)
            clones = {id(h): h.copy(unit) for h in hosts}
            self.bins[node_type].extend(clones.values())
            for p in template:
                self._append(Placement(p.item, clones[id(p.bin)], p.count, list(p.grants)))
        for index, n in used.items():
            left[index] -= n * max(copies, 0)

    def _open_unit(self, node_type: str) -> list[Bin]:
        unit = self._new_unit_id(node_type)
        spec = self.node_types[node_type]
        hosts = [fresh_host(spec, host, unit) for host in range(spec.hosts)]
        self.bins.setdefault(node_type, []).extend(hosts)
        return hosts

    def _new_unit_id(self, node_type: str) -> int:
        unit = self._next_unit
        self._next_unit += 1
        self.demand_units.setdefault(node_type, []).append(unit)
        if self.unit_room.get(node_type) is not None:
            self.unit_room[node_type] -= 1
        if self.global_room is not None:
            self.global_room -= 1
        return unit

    def _close_last_unit(self, node_type: str) -> None:
        self.close_unit(node_type, self.demand_units[node_type][-1])

    def close_unit(self, node_type: str, unit: int) -> None:
        """Drop an empty demand unit and give its room back."""
        self.bins[node_type] = [b for b in self.bins[node_type] if b.unit != unit]
        self.demand_units[node_type].remove(unit)
        if self.unit_room.get(node_type) is not None:
            self.unit_room[node_type] += 1
        if self.global_room is not None:
            self.global_room += 1

    # Undoing ----------------------------------------------------------------------------
    def undo(self, placement: Placement) -> None:
        for part in placement.item.parts:
            placement.bin.remove(part, placement.count, [])
        for name, index, units in placement.grants:
            placement.bin.devices[name][index] += units
        self.log.remove(placement)
        self._count(placement, -placement.count)

    def redo(self, placement: Placement) -> None:
        """Re-apply an undone placement exactly where it was."""
        for part in placement.item.parts:
            for name, need in part.needs:
                placement.bin.free[name] = placement.bin.free.get(name, 0) - need * placement.count
        for name, index, units in placement.grants:
            placement.bin.devices[name][index] -= units
        self._append(placement)

    def placed_count(self, item: Item) -> int:
        return self.placed.get(item.index, 0)


def _size(item: Item, node_type: NodeType) -> tuple[float, int]:
    """Sort key: biggest dominant share of one host first."""
    host = fresh_host(node_type, 0, -1)
    share = max(
        (need / host.free[name] for name, need in item.needs.items() if host.free.get(name)),
        default=0.0,
    )
    return (-share, item.index)
