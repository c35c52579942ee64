"""Which bundles of a gang placed in part to keep: as many whole copies as the hosts allow.

Where limits leave a STRICT_SPREAD gang placed for fewer copies than it has, its bundles
were packed with each host allowed as many as the gang has copies, so a host may hold more
of them than the copies placed, and then no hand-out of copies exists (a host would hold
two bundles of one copy). Which bundles to keep, for ``w`` copies, is a transportation
problem: each of the gang's items keeps ``w`` copies' bundles (its ``slots`` per copy), no
host more than ``w`` in all, none more than it holds; :func:`kept` solves it with HiGHS,
and :func:`uncrowded` finds the most copies it allows.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from autoscaler.planner.items import Item
from autoscaler.planner.solver import add_rows, make_integer, new_solver

Cuts = tuple[tuple[int, int, int], ...]
"""Bundles one unit sheds: (host, item, bundles)."""


def uncrowded(groups: Sequence[Any], members: Sequence[Item], copies: int) -> dict[int, list[Cuts]]:
    """Bundles of one gang (its ``members``, ``copies`` whole copies placed) to take off
    units so that no host holds more of them than the copies still whole: per group
    position, per unit, its cuts (nothing where no host is crowded). Keeps the most copies
    ``w`` (a binary search) for which each item can keep ``w`` copies' bundles with no
    host keeping more than ``w`` (:func:`kept`)."""
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
    no such choice exists. Its columns are whole (the transportation problem's matrix is
    totally unimodular, so the MIP ends at its root)."""
    import highspy

    if whole == 0:
        return [{} for _ in hosts]
    pairs = [(h, i) for h, held in enumerate(hosts) for i in sorted(held) if held[i] > 0]
    if not pairs:
        return None
    of_item: dict[int, list[int]] = defaultdict(list)
    of_host: dict[int, list[int]] = defaultdict(list)
    for column, (h, i) in enumerate(pairs):
        of_item[i].append(column)
        of_host[h].append(column)
    rows = [  # each item keeps its copies' bundles; no host more than ``whole``
        *((of_item[i], [1.0] * len(of_item[i]), whole * n, whole * n) for i, n in slots.items()),
        *((cols, [1.0] * len(cols), 0.0, float(whole)) for cols in of_host.values()),
    ]
    solver = new_solver()
    n = len(pairs)
    solver.addVars(n, np.zeros(n), np.array([float(hosts[h][i]) for h, i in pairs]))
    make_integer(solver, range(n))
    add_rows(solver, rows)
    solver.run()
    if solver.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    flow: list[dict[int, int]] = [{} for _ in hosts]
    for (h, i), value in zip(pairs, solver.getSolution().col_value, strict=True):
        if round(value) > 0:
            flow[h][i] = round(value)
    return flow


def runs(per_unit: Sequence[Cuts]) -> list[tuple[Cuts, int]]:
    """Consecutive units that shed alike: (their cuts, how many)."""
    runs: list[tuple[Cuts, int]] = []
    for cuts in per_unit:
        if runs and runs[-1][0] == cuts:
            runs[-1] = (cuts, runs[-1][1] + 1)
        else:
            runs.append((cuts, 1))
    return runs
