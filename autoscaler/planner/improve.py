"""Local improvement of an integer plan: fewer and cheaper units, moves checked by packing.

On small plans nearly every pattern is used once and the LP's rounding leaves units that a
packer can empty or shrink. Each move re-packs real contents with
:class:`~autoscaler.planner.capacity.Bin` (per-device shares, STRICT_SPREAD gangs), keeps
each item on the kinds it may use (accelerator conservation) and a launched accelerator unit
anchored, and respects per-kind and global unit limits. A move is taken only when it lowers
cost plus the per-unit surcharge (fewer units at nearly equal cost), so the plan never gets
dearer; passes are bounded, so the result is deterministic.

- *empty*: a unit's contents go into the room left on the other units;
- *shrink*: a unit becomes the cheapest kind that holds its contents;
- *merge*: two units become one unit of a kind that holds both contents;
- *gather*: several units become one unit of another kind that holds all their contents
  (e.g. four small nodes one four times as big, at the same price per CPU);
- *split*: what of a unit's contents fits in the room left on the others goes there, and the
  rest onto one or two units that cost less together (e.g. an 8-GPU node whose fractional
  work fits the spare devices of another becomes a 4-GPU and a 1-GPU node).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from autoscaler.planner.capacity import Bin
from autoscaler.planner.items import Item
from autoscaler.planner.packing import Kind, Pattern, fit, put, replay

PASSES = 4
"""Improvement passes at most (each tries every move once)."""
MAX_UNITS = 400
"""Plans with more units are left as they are (pairs grow quadratically; rounding matters
little there)."""
TRIALS = 3000
"""Trials (a kind considered for a unit or a pair, a unit's contents moved) per improvement
at most: the work limit that keeps it fast and deterministic; moves found by then are kept."""


@dataclass(eq=False)
class _Unit:
    kind: Kind
    host: Bin
    content: list[tuple[int, int]]
    """(item index, copies) in the order they were packed."""
    needs: dict[str, int] | None = None
    kinds: int = 0
    """Bit set (by price rank) of the single-host kinds that may hold every item here."""
    free: np.ndarray | None = None
    """The host's free scalar resources (in the search's resource order)."""


def improve(
    chosen: Sequence[tuple[Pattern, int]],
    kinds: Sequence[Kind],
    items: Mapping[int, Item],
    demand: Mapping[int, int],
    global_room: int | None,
    surcharge: float,
    budget: float | None = None,
    beside: Mapping[Pattern, int] | None = None,
) -> list[tuple[Pattern, int]]:
    """``chosen`` (patterns and units) made cheaper where moves allow; same coverage.
    ``budget``: no move may raise the plan's cost (surcharges aside) above it (with a large
    ``surcharge``, moves then trade cost for fewer units within the budget). ``beside``:
    units of the plan that stay as they are (not returned), counted against the limits."""
    total = sum(units for _, units in chosen)
    if total > MAX_UNITS or total == 0:
        return list(chosen)
    units: list[_Unit] = []
    kept: list[tuple[Pattern, int]] = []
    for pattern, count in chosen:
        kind = kinds[pattern.kind]
        if len(kind.hosts) != 1:  # slices stay as they are
            kept.append((pattern, count))
            continue
        for _ in range(count):
            hosts = replay(kind, pattern, items)
            if hosts is None:
                kept.append((pattern, 1))
                continue
            units.append(_Unit(kind, hosts[0], list(pattern.hosts[0])))
    fixed = kept + list((beside or {}).items())
    search = _Search(units, kinds, items, global_room, surcharge, fixed, budget)
    search.trim(demand)
    for _ in range(PASSES):
        moves = (search.empty, search.shrink, search.merge, search.gather)
        # split tries every unit: only where the other moves find nothing
        if not any([move() for move in moves]) and not search.split():
            break
    return kept + search.patterns()


@dataclass
class _Room:
    """The units' free scalar resources, fullest units first, for first fit."""

    order: list[_Unit]
    row_of: dict[int, int]
    """Unit (by id) -> its row."""
    free: np.ndarray
    total: np.ndarray
    """Free resources of all units together (none counted below zero)."""


class _Search:
    def __init__(self, units, kinds, items, global_room, surcharge, kept, budget) -> None:
        self.units: list[_Unit] = units
        self.kinds = kinds
        self.items = items
        self.surcharge = surcharge
        self.eligible = {kind.index: {item.index for item in kind.items} for kind in kinds}
        self.used: dict[int, int] = {}
        for unit in units:
            self.used[unit.kind.index] = self.used.get(unit.kind.index, 0) + 1
        for pattern, count in kept:
            self.used[pattern.kind] = self.used.get(pattern.kind, 0) + count
        self.global_room = global_room
        single = [kind for kind in kinds if len(kind.hosts) == 1]
        self.ranked = sorted(single, key=lambda k: (self.price(k), k.index))
        self.holders: dict[int, int] = {}  # item index -> bit set of kinds it may use
        for rank, kind in enumerate(self.ranked):
            for index in self.eligible[kind.index]:
                self.holders[index] = self.holders.get(index, 0) | (1 << rank)
        self.anchorless = sum(1 << r for r, k in enumerate(self.ranked) if not k.needs_anchor)
        self.trials = TRIALS
        self.budget = budget
        self.total = sum(u.kind.cost for u in units) + sum(kinds[p.kind].cost * n for p, n in kept)
        self.names = sorted({name for unit in units for name in unit.host.free})
        self.column = {name: j for j, name in enumerate(self.names)}
        self.cached_room: _Room | None = None
        self.wants: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        """Per item index: the resources one copy needs (positions) and how much of each."""
        for unit in self.units:
            self._summarise(unit)

    def _needs(self, content: list[tuple[int, int]]) -> tuple[dict[str, int], int]:
        """What ``content`` needs in all, and the bit set (by price rank) of the single-host
        kinds that may hold every item of it (a launched accelerator unit only with work other
        than riders)."""
        needs: dict[str, int] = {}
        mask = (1 << len(self.ranked)) - 1
        anchored = False
        for index, copies in content:
            for name, need in self.items[index].needs.items():
                needs[name] = needs.get(name, 0) + need * copies
            mask &= self.holders.get(index, 0)
            anchored = anchored or not self.items[index].rider
        return needs, mask if anchored else mask & self.anchorless

    def _summarise(self, unit: _Unit) -> None:
        unit.needs, unit.kinds = self._needs(unit.content)
        unit.free = np.array([unit.host.free.get(name, 0) for name in self.names], np.int64)
        self.cached_room = None

    def _wants(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        found = self.wants.get(index)
        if found is None:
            needs = self.items[index].needs
            named = [(j, needs[name]) for j, name in enumerate(self.names) if needs.get(name, 0)]
            found = self.wants[index] = (
                np.array([j for j, _ in named], np.int64),
                np.array([need for _, need in named], np.int64),
            )
        return found

    def price(self, kind: Kind) -> float:
        return kind.cost + (self.surcharge if kind.new else 0.0)

    def trim(self, demand: Mapping[int, int]) -> None:
        """Copies beyond the demand off the last units holding them (a gang's items are trimmed
        by the planner, which keeps gangs whole)."""
        placed: dict[int, int] = {}
        for unit in self.units:
            for index, copies in unit.content:
                placed[index] = placed.get(index, 0) + copies
        for index, count in placed.items():
            excess = count - demand.get(index, 0)
            if excess <= 0 or self.items[index].spread_group is not None:
                continue
            # Off launched units first (the dearest first), free capacity last.
            holders = sorted(
                enumerate(self.units),
                key=lambda pu: (not pu[1].kind.new, -self.price(pu[1].kind), -pu[0]),
            )
            for _, unit in holders:
                if excess <= 0:
                    break
                held = sum(n for i, n in unit.content if i == index)
                take = min(held, excess)
                if take:
                    self._rebuild(unit, _less(unit.content, index, take))
                    excess -= take
        self.units = [u for u in self.units if u.content]
        self.cached_room = None
        self._anchor()

    def _anchor(self) -> None:
        """A launched accelerator unit that trimming left with only CPU-only work becomes
        the cheapest kind that may hold that work, dearer or not (the planner would drop it
        and place its contents again, on a unit of its own)."""
        for unit in list(self.units):
            if not unit.kind.needs_anchor or any(
                not self.items[index].rider for index, _ in unit.content
            ):
                continue
            best = self._cheapest(unit.content, unit.needs, unit.kinds, math.inf, (unit.kind,))
            if best is not None:
                kind, host, ordered = best
                self._drop(unit)
                self._add(_Unit(kind, host, ordered))

    def _rebuild(
        self, unit: _Unit, content: list[tuple[int, int]], host: Bin | None = None
    ) -> None:
        if host is None:
            host = unit.kind.hosts[0].copy(unit.kind.hosts[0].unit)
            for index, copies in content:
                put(host, self.items[index], copies)
        unit.host, unit.content = host, content
        self._summarise(unit)

    # Moves ------------------------------------------------------------------------------
    def empty(self) -> bool:
        """Move every copy on a unit to room left on others; the dearest units first."""
        changed = False
        ranked = sorted(enumerate(self.units), key=lambda pu: (-self.price(pu[1].kind), pu[0]))
        for _, unit in ranked:
            if unit not in self.units or self.price(unit.kind) <= 0:
                continue  # emptying free capacity gains nothing
            if self.trials <= 0:
                break
            self.trials -= 1
            trial: dict[int, Bin] = {}
            additions: dict[int, list[tuple[int, int]]] = {}
            if self._place_all(unit, trial, additions):
                self._take(trial, additions)
                self._drop(unit)
                changed = True
        return changed

    def _take(self, trial: dict[int, Bin], additions: dict[int, list[tuple[int, int]]]) -> None:
        """The other units take what a move placed on them (their ``trial`` hosts)."""
        for other in self.units:
            if id(other) in additions:
                other.host = trial[id(other)]
                self._rebuild(other, other.content + additions[id(other)], other.host)

    def _room(self) -> _Room:
        """The units' free resources, fullest units first (rebuilt after a move)."""
        if self.cached_room is None:
            sizes = np.array([-len(u.content) for u in self.units], np.int64)
            rows = np.argsort(sizes, kind="stable")  # ties keep their order
            order = [self.units[r] for r in rows.tolist()]
            free = np.array([u.free for u in order], np.int64).reshape(len(order), len(self.names))
            total = np.maximum(free, 0).sum(axis=0)
            row_of = {id(unit): row for row, unit in enumerate(order)}
            self.cached_room = _Room(order, row_of, free, total)
        return self.cached_room

    def _place_all(self, unit, trial, additions) -> bool:
        """First fit of ``unit``'s contents into copies of the other hosts, fullest units
        first (none tried where the others' free resources together fall short)."""
        room = self._room()
        own = room.row_of[id(unit)]
        others = (room.total - np.maximum(room.free[own], 0)).tolist()
        column = self.column
        if any(need > others[column[name]] for name, need in unit.needs.items() if name in column):
            return False
        return not self._place(unit, trial, additions, whole=True)

    def _place(self, unit, trial, additions, whole: bool = False) -> list[tuple[int, int]]:
        """First fit of ``unit``'s contents into copies of the other hosts (``trial``, by
        unit id), fullest units first, recording what each takes in ``additions``: the
        copies that fit nowhere, in packing order (``whole``: stop at the first of them)."""
        room = self._room()
        own = room.row_of[id(unit)]
        free = room.free.copy()
        left_over: list[tuple[int, int]] = []
        for index, copies in self._packing_order(unit.content):
            item = self.items[index]
            left = copies
            columns, wants = self._wants(index)
            # Only hosts with room for one copy's scalar needs are fitted (the rest fit none).
            for row in np.flatnonzero((free[:, columns] >= wants).all(axis=1)).tolist():
                other = room.order[row]
                if row == own or index not in self.eligible[other.kind.index]:
                    continue
                host = trial.get(id(other), other.host)
                n = fit(host, item, left)
                if n:
                    if id(other) not in trial:
                        host = trial[id(other)] = other.host.copy(other.host.unit)
                    put(host, item, n)
                    free[row, columns] -= wants * n
                    additions.setdefault(id(other), []).append((index, n))
                    left -= n
                    if not left:
                        break
            if left:
                left_over.append((index, left))
                if whole:
                    break
        return left_over

    def shrink(self) -> bool:
        """Each unit as the cheapest kind that holds its contents."""
        changed = False
        for unit in list(self.units):
            best = self._cheapest(
                unit.content, unit.needs, unit.kinds, self.price(unit.kind), (unit.kind,)
            )
            if best is not None:
                kind, host, ordered = best
                self._drop(unit)
                self._add(_Unit(kind, host, ordered))
                changed = True
        return changed

    def merge(self) -> bool:
        """Two units as one that holds both contents, if that costs less."""
        changed = False
        position = 0
        while position < len(self.units):
            first = self.units[position]
            merged = False
            for second in self.units[position + 1 :]:
                if self.trials <= 0:
                    return changed
                mask = first.kinds & second.kinds
                if not mask:
                    continue
                limit = self.price(first.kind) + self.price(second.kind)
                if self.price(self.ranked[_lowest(mask)]) >= limit - 1e-9:
                    self.trials -= 1  # the trial finding that (as _cheapest counts it)
                    continue
                needs = dict(first.needs)
                for name, need in second.needs.items():
                    needs[name] = needs.get(name, 0) + need
                content = first.content + second.content
                best = self._cheapest(content, needs, mask, limit, (first.kind, second.kind))
                if best is None:
                    continue
                kind, host, ordered = best
                self._drop(first)
                self._drop(second)
                self._add(_Unit(kind, host, ordered), position)
                changed = merged = True
                break
            if not merged:
                position += 1
        return changed

    def gather(self) -> bool:
        """Several units as one of another kind that holds all their contents, if that costs
        less: per kind, the dearest units that fit it whole are packed into one unit of it."""
        changed = False
        for rank, kind in enumerate(self.ranked):
            if not kind.new:
                continue
            while self.trials > 0:
                found = self._gathered(rank, kind)
                if found is None:
                    break
                host, absorbed, content = found
                for unit in absorbed:
                    self._drop(unit)
                self._add(_Unit(kind, host, content))
                changed = True
        return changed

    def _gathered(self, rank: int, kind: Kind):
        """(packed host, units it replaces, contents) for one unit of ``kind`` holding the
        dearest units that fit it whole, where that lowers the cost; else None."""
        bit = 1 << rank
        candidates = [
            unit
            for _, unit in sorted(
                enumerate(self.units), key=lambda pu: (-self.price(pu[1].kind), pu[0])
            )
            if unit.kinds & bit and unit.kind.new and unit.kind is not kind
        ]
        host = kind.hosts[0].copy(kind.hosts[0].unit)
        absorbed: list[_Unit] = []
        content: list[tuple[int, int]] = []
        for unit in candidates:
            if self.trials <= 0:
                break
            if any(need > host.free.get(n, 0) for n, need in unit.needs.items()):
                continue
            self.trials -= 1
            trial = host.copy(host.unit)
            ordered = self._put_whole(trial, unit.content)
            if ordered is not None:
                host = trial
                absorbed.append(unit)
                content.extend(ordered)
        if len(absorbed) < 2:
            return None
        if self.price(kind) >= sum(self.price(u.kind) for u in absorbed) - 1e-9:
            return None
        if not self._allowed(kind, [u.kind for u in absorbed]):
            return None
        return host, absorbed, content

    def split(self) -> bool:
        """What of a unit's contents fits in room left on the others goes there, the rest (if
        any) onto one or two units (cheapest kinds first) that cost less together than the
        unit; the dearest units first."""
        changed = False
        ranked = sorted(enumerate(self.units), key=lambda pu: (-self.price(pu[1].kind), pu[0]))
        for _, unit in ranked:
            if unit not in self.units or not unit.kind.new:
                continue
            if self.trials <= 0:
                break
            self.trials -= 1
            trial: dict[int, Bin] = {}
            additions: dict[int, list[tuple[int, int]]] = {}
            rest = self._place(unit, trial, additions)
            found = self._on_two(rest, self.price(unit.kind), unit.kind) if rest else []
            if found is None:
                continue
            self._take(trial, additions)
            self._drop(unit)
            for kind, host, ordered in found:
                self._add(_Unit(kind, host, ordered))
            changed = True
        return changed

    def _on_two(self, content, limit: float, freed: Kind):
        """``content`` on one unit, or on two (the cheapest kind that holds some of it, in
        packing order, then the cheapest that holds the rest), costing less than ``limit`` in
        place of a unit of ``freed``: [(kind, packed host, contents)], or None."""
        needs, mask = self._needs(content)
        one = self._cheapest(content, needs, mask, limit, (freed,))
        if one is not None:
            return [one]
        ordered = self._packing_order(content)
        holders = self.holders.get(ordered[0][0], 0)  # the kinds that may hold the first item
        while holders and self.trials > 0:
            rank = _lowest(holders)
            holders &= holders - 1
            kind = self.ranked[rank]
            if self.price(kind) >= limit - 1e-9:
                return None
            self.trials -= 1
            host = kind.hosts[0].copy(kind.hosts[0].unit)
            held, rest = [], []
            for index, copies in ordered:
                n = fit(host, self.items[index], copies)
                if n:
                    put(host, self.items[index], n)
                    held.append((index, n))
                if copies - n:
                    rest.append((index, copies - n))
            _, held_mask = self._needs(held)
            if not held or not rest or not (held_mask >> rank) & 1:
                continue
            if not self._allowed(kind, (freed,)):
                continue
            rest_needs, rest_mask = self._needs(rest)
            self.used[kind.index] = self.used.get(kind.index, 0) + 1  # counted for the second
            self.total += kind.cost
            try:
                second = self._cheapest(
                    rest, rest_needs, rest_mask, limit - self.price(kind), (freed,)
                )
            finally:
                self.used[kind.index] -= 1
                self.total -= kind.cost
            if second is not None:
                return [(kind, host, held), second]
        return None

    # Helpers ----------------------------------------------------------------------------
    def _cheapest(self, content, needs, mask, limit, freed):
        """The cheapest single-host kind in ``mask`` priced below ``limit`` that holds
        ``content`` in place of units of the ``freed`` kinds: (kind, packed host, contents in
        packing order), or None."""
        while mask and self.trials > 0:
            kind = self.ranked[_lowest(mask)]
            mask &= mask - 1
            self.trials -= 1
            if self.price(kind) >= limit - 1e-9:
                return None
            free = kind.hosts[0].free
            if any(need > free.get(name, 0) for name, need in needs.items()):
                continue
            if not self._allowed(kind, freed):
                continue
            host = kind.hosts[0].copy(kind.hosts[0].unit)
            ordered = self._put_whole(host, content)
            if ordered is not None:
                return kind, host, ordered
        return None

    def _packing_order(self, content: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """``content`` (item index, copies) largest items first."""
        return sorted(content, key=lambda ic: _size(self.items[ic[0]]))

    def _put_whole(self, host: Bin, content: list[tuple[int, int]]):
        """Put all of ``content`` on ``host`` in packing order: that order, or None where some
        item does not fit whole (``host`` is then left partly filled)."""
        ordered = self._packing_order(content)
        if all(_put_all(host, self.items[i], n) for i, n in ordered):
            return ordered
        return None

    def _allowed(self, kind: Kind, freed: Sequence[Kind]) -> bool:
        """Whether one more unit of ``kind``, in place of units of the ``freed`` kinds, fits
        its limit, the global one and the cost budget."""
        back = sum(1 for k in freed if k.index == kind.index)
        if kind.limit is not None and self.used.get(kind.index, 0) - back + 1 > kind.limit:
            return False
        if self.global_room is not None and kind.new:
            new_units = sum(n for k, n in self.used.items() if self.kinds[k].new)
            if new_units - sum(1 for k in freed if k.new) + 1 > self.global_room:
                return False
        if self.budget is not None:
            return self.total - sum(k.cost for k in freed) + kind.cost <= self.budget
        return True

    def _drop(self, unit: _Unit) -> None:
        self.cached_room = None
        self.units.remove(unit)
        self.used[unit.kind.index] -= 1
        self.total -= unit.kind.cost

    def _add(self, unit: _Unit, position: int | None = None) -> None:
        self._summarise(unit)
        self.units.insert(len(self.units) if position is None else position, unit)
        self.used[unit.kind.index] = self.used.get(unit.kind.index, 0) + 1
        self.total += unit.kind.cost

    def patterns(self) -> list[tuple[Pattern, int]]:
        counts: dict[Pattern, int] = {}
        for unit in self.units:
            pattern = Pattern(unit.kind.index, (tuple(unit.content),))
            counts[pattern] = counts.get(pattern, 0) + 1
        return list(counts.items())


def _lowest(mask: int) -> int:
    """The position of ``mask``'s lowest set bit (the cheapest kind of a set by price rank)."""
    return (mask & -mask).bit_length() - 1


def _size(item: Item) -> tuple:
    """Packing order: whole devices, then larger fractions, then larger needs first."""
    whole = sum(s for part in item.parts for _, s in part.devices if s >= 10_000)
    fraction = max((s for part in item.parts for _, s in part.devices if s < 10_000), default=0)
    return (-whole, -fraction, -sum(item.needs.values()), item.index)


def _put_all(host: Bin, item: Item, copies: int) -> bool:
    """Put ``copies`` of ``item`` on ``host`` if all fit (else leave it partly filled)."""
    if fit(host, item, copies) < copies:
        return False
    put(host, item, copies)
    return True


def _less(content: list[tuple[int, int]], index: int, take: int) -> list[tuple[int, int]]:
    out = []
    for i, n in reversed(content):
        if i == index and take:
            cut = min(n, take)
            take -= cut
            n -= cut
        if n:
            out.append((i, n))
    return list(reversed(out))
