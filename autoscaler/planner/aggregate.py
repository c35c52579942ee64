"""Demand merged by shape for the lower bound of large plans.

The bound's LP (:mod:`~autoscaler.planner.bound`) has a column per item and kind. Items of
the same shape (the same parts, both riders or neither: hence the same candidate types) from
different records, gangs or slots differ only in what the bound relaxes, so one item holding
all their copies still gives a valid bound: a unit holds at most as many copies of the
merged item as fit on it alone or as the merged demand has, which every plan satisfies. The
merged items drop the bound's per-gang rows (a host holds one bundle per gang copy): above
:data:`MERGE_FROM` items gangs are a small share of the demand and the LP over merged items
is several times smaller.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from autoscaler.planner.items import Item
from autoscaler.planner.packing import Kind

MERGE_FROM = 300
"""Items from which the bound is computed over items merged by shape."""


def merged_by_shape(
    items: Sequence[Item], demand: Mapping[int, int], kinds: Sequence[Kind]
) -> tuple[list[Item], dict[int, int], list[Kind]]:
    """Items, demand and kinds with same-shape items merged (unchanged below
    :data:`MERGE_FROM` items)."""
    if len(items) < MERGE_FROM:
        return list(items), dict(demand), list(kinds)
    first: dict[tuple, Item] = {}
    merged_demand: dict[int, int] = {}
    into: dict[int, int] = {}
    for item in items:
        key = (item.parts, item.rider)
        if key not in first:
            first[key] = Item(
                item.index,
                item.resources,
                item.parts,
                0,
                candidates=item.candidates,
                cpu_only=item.cpu_only,
                rider=item.rider,
            )
        head = first[key]
        head.count += item.count
        into[item.index] = head.index
        merged_demand[head.index] = merged_demand.get(head.index, 0) + demand.get(item.index, 0)
    heads = {item.index: item for item in first.values()}
    merged_kinds = []
    for kind in kinds:
        held = dict.fromkeys(into[item.index] for item in kind.items if item.index in into)
        merged_kinds.append(replace(kind, items=[heads[index] for index in held]))
    return list(first.values()), merged_demand, merged_kinds
