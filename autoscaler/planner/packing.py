"""One unit of capacity and what it holds: kinds, patterns, and packing them.

A *kind* is something units can be taken from: a launchable node type (price per unit, a
per-type room) or a group of identical free capacity (running, pending or ``min_workers``
hosts: cost 0, as many units as hosts). A *pattern* is one unit's contents, host by host,
found by actually packing the unit with :class:`~autoscaler.planner.capacity.Bin` (per-device
shares, STRICT_SPREAD gangs' items, STRICT_PACK groups), so every pattern is realisable as it
stands.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from autoscaler.planner.capacity import Bin
from autoscaler.planner.items import Item


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

    @property
    def identity(self) -> tuple:
        """What this kind is, whatever position a list of kinds gives it."""
        return (self.node_type, self.new, self.existing, self.members)


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


def fit(host: Bin, item: Item, limit: int, room_checked: bool = False) -> int:
    """Copies of ``item`` that fit on ``host`` (at most ``limit``; ``room_checked``: the
    host's scalar room holds ``limit`` copies already)."""
    if limit <= 0:
        return 0
    if item.spread_group is not None:  # a host holds a gang's bundles of each copy at most once
        limit = min(limit, item.gang_copies - host.spread_counts.get(item.spread_group, 0))
        if limit <= 0:
            return 0
    if len(item.parts) == 1:
        if room_checked:
            return host.device_fit_count(item.parts[0], limit)
        return host.fit_count(item.parts[0], limit)
    if len(item.device_parts) <= 1:  # scalars add up; one part's device shares decide alone
        copies = limit
        for name, need in item.positive_needs:
            copies = min(copies, host.free.get(name, 0) // need)
        for part in item.device_parts:
            copies = min(copies, host.fit_count(part, copies))
        return max(copies, 0)
    trial = host.copy(host.unit)
    copies = 0
    while copies < limit:
        for part in item.parts:
            if trial.fit_count(part, 1) < 1:
                return copies
            trial.place(part, 1)
        copies += 1
    return copies


def put(host: Bin, item: Item, copies: int) -> None:
    """Place ``copies`` of ``item`` (as :func:`fit` counted them)."""
    if len(item.device_parts) <= 1:
        for part in item.parts:
            host.place(part, copies)
    else:
        for _ in range(copies):
            for part in item.parts:
                host.place(part, 1)
    if item.spread_group is not None:
        gang = item.spread_group
        host.spread_counts[gang] = host.spread_counts.get(gang, 0) + copies


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
    for item in order:
        _put_greedily(hosts, content, item, caps.get(item.index, 0))
    return _pattern(kind, content)


def pack_rows(kind: Kind, order: Sequence[int], caps: Sequence[int]) -> Pattern | None:
    """:func:`pack` with the order given as positions in ``kind.items`` and caps per position.

    Remembered per kind: pricing meets the same order and caps again in later rounds (a
    third to a half of its packings on small and 200-bundle plans), and packing is
    deterministic, so the pattern is the one packed before."""
    packed = kind.__dict__.setdefault("_packed", {})
    key = (tuple(order), tuple([caps[row] for row in order]))
    found = packed.get(key, False)
    if found is False:
        found = packed[key] = _pack_rows(kind, order, caps)
    return found


def _pack_rows(kind: Kind, order: Sequence[int], caps: Sequence[int]) -> Pattern | None:
    items = kind.items
    hosts = [h.copy(h.unit) for h in kind.hosts]
    content: list[list[tuple[int, int]]] = [[] for _ in hosts]
    if len(hosts) == 1:  # most kinds: no loop over hosts per item
        host, placed = hosts[0], content[0]
        free, needed = host.free, unit_vectors(kind).needed_by_all
        for row in order:
            if _put_on(host, placed, items[row], caps[row]) and any(
                free.get(name, 0) < least for name, least in needed
            ):
                break  # full: no item left fits (a resource every item needs is short)
    else:
        for row in order:
            _put_greedily(hosts, content, items[row], caps[row])
    return _pattern(kind, content)


def _put_greedily(
    hosts: Sequence[Bin], content: list[list[tuple[int, int]]], item: Item, copies: int
) -> None:
    """As many of ``copies`` of ``item`` as fit, host by host (``content`` records them)."""
    for host, placed in zip(hosts, content, strict=True):
        if copies <= 0:
            return
        copies -= _put_on(host, placed, item, copies)


def _put_on(host: Bin, placed: list[tuple[int, int]], item: Item, copies: int) -> int:
    """As many of ``copies`` of ``item`` as fit on ``host`` (``placed`` records them); returns
    how many.

    The scalar room is checked inline (no call), and only items that pass and need more
    (devices, several parts, a STRICT_SPREAD gang's item) are fitted exactly: the same copies as
    :func:`fit`, at a fraction of the calls (pricing packs every kind in several orders every
    round, and most items it visits no longer fit)."""
    if copies <= 0:
        return 0
    free = host.free
    for name, need in item.positive_needs:
        room = free.get(name, 0) // need
        if room < copies:
            copies = room
            if copies <= 0:
                return 0
    if not item.scalar:
        copies = fit(host, item, copies, room_checked=True)
        if not copies:
            return 0
    put(host, item, copies)
    placed.append((item.index, copies))
    return copies


def _pattern(kind: Kind, content: list[list[tuple[int, int]]]) -> Pattern | None:
    if not any(content):
        return None
    return Pattern(kind.index, tuple(tuple(c) for c in content))


@dataclass(frozen=True)
class UnitVectors:
    """A kind's items as arrays (one row per position in ``kind.items``), and as lists where
    pricing reads them one by one."""

    names: list[str]
    needs: np.ndarray
    """Units of each resource in ``names`` one copy needs."""
    indices: np.ndarray
    """Item index per row."""
    capacity: np.ndarray
    """One unit's capacity of each resource in ``names`` (all hosts together)."""
    index_list: list[int]
    """``indices`` as a list."""
    dominant: list[float]
    """Largest share of one unit's capacity one copy takes."""
    dominant_resource: list[int]
    """The resource (column in ``names``) of that share."""
    summed: list[float]
    """Sum of the shares of one unit's capacity one copy takes."""
    rider_list: list[bool]
    """Whether the item in that row is a rider."""
    rider_indices: frozenset[int]
    """The riders' item indices."""
    needed_by_all: tuple[tuple[str, int], ...]
    """(resource, least units one copy of any item needs) for each resource every item
    needs: a host with less of one holds nothing more."""


def unit_vectors(kind: Kind) -> UnitVectors:
    """Computed once per kind (not a field: a replaced kind computes its own)."""
    cached = kind.__dict__.get("_vectors")
    if cached is not None:
        return cached
    capacity: dict[str, int] = {}
    for host in kind.hosts:
        for name, quantity in host.free.items():
            capacity[name] = capacity.get(name, 0) + max(quantity, 0)
    names = sorted({n for item in kind.items for n in item.needs} | set(capacity))
    column = {name: j for j, name in enumerate(names)}
    needs = np.zeros((len(kind.items), len(names)), np.int64)
    for position, item in enumerate(kind.items):
        for name, need in item.needs.items():
            needs[position, column[name]] = need
    total = np.array([capacity.get(name, 0) for name in names], np.float64)
    shares = np.where(total > 0, needs / np.where(total > 0, total, 1.0), 0.0)
    indices = [item.index for item in kind.items]
    riders = [item.rider for item in kind.items]
    used = [{name for name, _ in item.positive_needs} for item in kind.items]
    shared = set.intersection(*used) if used else set()
    cached = UnitVectors(
        names,
        needs,
        np.array(indices, np.int64),
        total.astype(np.int64),
        indices,
        np.maximum(shares.max(axis=1, initial=0.0), 1e-9).tolist(),
        (shares.argmax(axis=1) if names else np.zeros(len(indices), np.int64)).tolist(),
        np.maximum(shares.sum(axis=1), 1e-9).tolist(),
        riders,
        frozenset(i for i, rider in zip(indices, riders, strict=True) if rider),
        tuple((n, min(item.needs[n] for item in kind.items)) for n in sorted(shared)),
    )
    kind.__dict__["_vectors"] = cached
    return cached


def covered_copies(chosen: Mapping[Pattern, int]) -> dict[int, int]:
    covered: dict[int, int] = {}
    for pattern, units in chosen.items():
        for index, copies in pattern.totals().items():
            covered[index] = covered.get(index, 0) + copies * units
    return covered
