"""Edge colouring of bipartite multigraphs (König's theorem): how a plan's STRICT_SPREAD
bundles are handed to the copies of their groups.

Hosts on one side, a group's positions (slots) on the other, one edge per bundle: with as
many colours as the group has copies placed, where every slot has that many edges and every
host at most that many, a proper colouring exists, and each colour (a copy) then has every
slot once and no host twice.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import islice


def colour_edges(
    hosts: Sequence[tuple[Sequence[tuple[int, int]], int]], colours: int
) -> list[list[dict[int, list[int]]]]:
    """A proper edge colouring with ``colours`` colours of the bipartite multigraph of
    ``hosts`` ((per slot, its edges to the host), how many such hosts), where every slot has
    that many edges and every host at most that many: per entry, per host, per slot, the
    colours of its edges. Hosts with edges to several slots are coloured first, one by one,
    by alternating paths (König's theorem: a colour free at the host and one free at the
    slot are made the same by swapping the two along the path from the slot); hosts of one
    slot then take that slot's colours left, in order."""
    at_host: list[dict[int, int]] = []  # per host with several slots: colour -> slot
    at_slot: dict[int, dict[int, int]] = {}  # slot -> colour -> host (with several slots)
    found: list[list[dict[int, list[int]]]] = [[] for _ in hosts]
    for entry, (edges, units) in enumerate(hosts):
        if len(edges) < 2:
            continue
        for _ in range(units):
            host, used = len(at_host), {}
            at_host.append(used)
            for slot, count in edges:
                for _ in range(count):
                    free = _least_free(used, colours)
                    on_slot = at_slot.setdefault(slot, {})
                    if free in on_slot:
                        other = _least_free(on_slot, colours)
                        if other in used:
                            _swap_along_path(at_host, at_slot, slot, free, other)
                        else:
                            free = other
                    used[free] = slot
                    on_slot[free] = host
            found[entry].append(used)  # (turned into colours per slot below)
    for per_unit in found:
        for unit, used in enumerate(per_unit):
            by_slot: dict[int, list[int]] = {}
            for colour, slot in sorted(used.items()):
                by_slot.setdefault(slot, []).append(colour)
            per_unit[unit] = by_slot
    left: dict[int, Iterator[int]] = {}
    for entry, (edges, units) in enumerate(hosts):
        if len(edges) > 1:
            continue
        for _ in range(units):
            on_host = {}
            for slot, count in edges:
                if slot not in left:
                    taken = at_slot.get(slot, {})
                    left[slot] = iter([c for c in range(colours) if c not in taken])
                on_host[slot] = list(islice(left[slot], count))
                if len(on_host[slot]) < count:
                    raise ValueError(f"more than {colours} edges at slot {slot}: no colouring")
            found[entry].append(on_host)
    return found


def _least_free(used: Mapping[int, int], colours: int) -> int:
    colour = 0
    while colour in used:
        colour += 1
    if colour >= colours:
        raise ValueError(f"more than {colours} edges at one vertex: no colouring")
    return colour


def _swap_along_path(at_host, at_slot, slot: int, first: int, second: int) -> None:
    """Swap ``first`` and ``second`` on the path from ``slot`` that alternates them (first
    at slots, second at hosts), so ``first`` is free at ``slot``."""
    path = []
    while (host := at_slot[slot].get(first)) is not None:
        path.append((host, slot, first))
        slot = at_host[host].get(second)
        if slot is None:
            break
        path.append((host, slot, second))
    for host, on, colour in path:
        del at_host[host][colour]
        del at_slot[on][colour]
    for host, on, colour in path:
        swapped = second if colour == first else first
        at_host[host][swapped] = on
        at_slot[on][swapped] = host
