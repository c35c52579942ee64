"""Which bundles of a gang placed in part to keep: as many whole copies as the hosts allow.

Where limits leave a STRICT_SPREAD gang placed for fewer copies than it has, its bundles
were packed with each host allowed as many as the gang has copies, so a host may hold more
of them than the copies placed, and then no hand-out of copies exists (a host would hold
two bundles of one copy). Which bundles to keep, for ``w`` copies, is a transportation
problem: each of the gang's items keeps ``w`` copies' bundles (its ``slots`` per copy), no
host more than ``w`` in all, none more than it holds; :func:`kept` solves it as a maximum
flow, and :func:`uncrowded` finds the most copies it allows.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from autoscaler.planner.items import Item

Cuts = tuple[tuple[int, int, int], ...]
"""Bundles one unit sheds: (host, item, bundles)."""


def uncrowded(groups: Sequence[Any], members: Sequence[Item], copies: int) -> dict[int, list[Cuts]]:
    """Bundles of one gang (its ``members``, ``copies`` whole copies placed) to take off
    units so that no host holds more of them than the copies still whole: per group
    position, per unit, its cuts (nothing where no host is crowded). Keeps the most copies
    ``w`` (a binary search) for which each item can keep ``w`` copies' bundles with no
    host keeping more than ``w`` (:func:`kept`, a flow)."""
    slots = {item.index: item.slots for item in members}
    holding = [  # (group position, host, its bundles of the gang per item)
        (position, h, held)
        for position, group in enumerate(groups)
        for h, host in enumerate(group.hosts)
        if (held := _held(host, slots))
    ]
    if all(sum(held.values()) <= copies for *_, held in holding):
        return {}
    hosts = [  # ... unit by unit (alike units share what they hold)
        (position, unit, h, held)
        for position, h, held in holding
        for unit in range(groups[position].units)
    ]
    bundles = [held for *_, held in hosts]
    low, high, keep = 1, copies - 1, kept(bundles, slots, 0)
    while low <= high:
        middle = (low + high) // 2
        found = kept(bundles, slots, middle)
        if found is None:
            high = middle - 1
        else:
            keep, low = found, middle + 1
    assert keep is not None  # (keeping nothing always fits)
    cuts: dict[int, dict[int, list[tuple[int, int, int]]]] = {}
    for (position, unit, h, held), on_host in zip(hosts, keep, strict=True):
        on_unit = cuts.setdefault(position, {}).setdefault(unit, [])
        on_unit.extend(
            (h, i, n - on_host.get(i, 0)) for i, n in sorted(held.items()) if n > on_host.get(i, 0)
        )
    return {
        position: [tuple(per_unit.get(unit, ())) for unit in range(groups[position].units)]
        for position, per_unit in cuts.items()
        if any(per_unit.values())
    }


def _held(host: Sequence[tuple[int, int]], slots: Mapping[int, int]) -> dict[int, int]:
    """The bundles ``host`` holds of each of the gang's items (those in ``slots``)."""
    found: dict[int, int] = defaultdict(int)
    for index, n in host:
        if index in slots:
            found[index] += n
    return dict(found)


def kept(
    hosts: Sequence[Mapping[int, int]], slots: Mapping[int, int], whole: int
) -> list[dict[int, int]] | None:
    """Per host, the bundles of each item to keep so that every item keeps ``whole``
    copies' bundles (``slots`` per copy) and no host more than ``whole`` in all; None where
    no such choice exists. A maximum flow (items to hosts, augmenting paths found by
    breadth-first search)."""
    need = {index: whole * n for index, n in slots.items()}
    flow: list[dict[int, int]] = [defaultdict(int) for _ in hosts]
    load = [0] * len(hosts)
    while any(need.values()):
        path = _augmenting_path(hosts, flow, load, need, whole)
        if path is None:
            return None
        item, steps = path
        room = min(
            [need[item], whole - load[steps[-1][1]]]
            + [hosts[h][i] - flow[h][i] if forward else flow[h][i] for i, h, forward in steps]
        )
        need[item] -= room
        load[steps[-1][1]] += room
        for i, h, forward in steps:
            flow[h][i] += room if forward else -room
    return [dict(f) for f in flow]


def _augmenting_path(
    hosts: Sequence[Mapping[int, int]],
    flow: Sequence[Mapping[int, int]],
    load: Sequence[int],
    need: Mapping[int, int],
    whole: int,
) -> tuple[int, list[tuple[int, int, bool]]] | None:
    """A shortest path from an item still short to a host with room, through hosts whose
    kept bundles of another item can move: (the item, [(item, host, forward)])."""
    parent: dict[tuple[str, int], tuple] = {}
    queue = [("item", i) for i in sorted(need) if need[i] > 0]
    for node in queue:
        parent[node] = None
    for kind, node in queue:
        if kind == "item":
            for h, held in enumerate(hosts):
                if flow[h][node] < held.get(node, 0) and ("host", h) not in parent:
                    parent[("host", h)] = ("item", node)
                    if load[h] < whole:
                        return _path(parent, h)
                    queue.append(("host", h))
        else:
            for i, kept in sorted(flow[node].items()):
                if kept > 0 and ("item", i) not in parent:
                    parent[("item", i)] = ("host", node)
                    queue.append(("item", i))
    return None


def _path(parent: Mapping[tuple[str, int], Any], host: int) -> tuple[int, list]:
    """The path ``parent`` records from an item to ``host``: (the item, its steps)."""
    steps = []
    node = ("host", host)
    while parent[node] is not None:
        kind, item = parent[node]
        steps.append((item, node[1], True))
        previous = parent[(kind, item)]
        if previous is None:
            return item, list(reversed(steps))
        steps.append((item, previous[1], False))
        node = previous
    raise AssertionError("a path starts at an item")


def runs(per_unit: Sequence[Cuts]) -> list[tuple[Cuts, int]]:
    """Consecutive units that shed alike: (their cuts, how many)."""
    runs: list[tuple[Cuts, int]] = []
    for cuts in per_unit:
        if runs and runs[-1][0] == cuts:
            runs[-1] = (cuts, runs[-1][1] + 1)
        else:
            runs.append((cuts, 1))
    return runs
