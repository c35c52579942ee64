"""A plan's proof: what every node holds, bundle by bundle, device by device.

The planner's chosen units are packed again host by host with
:class:`~autoscaler.planner.capacity.Bin` to record each copy's device grants, and each
item's copies are handed back to the demand records they came from (``Item.sources``, in
order). The result is a plain JSON-ready document that :mod:`~autoscaler.planner.verify`
checks in linear time against the request alone:

- ``nodes``: launched units, ``count`` identical ones per record, per host the placements;
- ``existing``: per running or pending node (its index in ``PlanRequest.existing``) the
  placements made on it;
- ``unplaced``: demand left out, per source.

A placement is ``{"source": {"bundle": i} | {"placement_group": g, "bundle": j}, "count": n,
"resources": {...}, "devices": {"GPU": [[device, quantity], ...]}}`` for one host of one
unit: ``quantity`` is what the ``count`` copies take on that device. A STRICT_SPREAD bundle's
placement also names, unit by unit, which copies of its placement-group record the bundles
belong to (``"instances"``: per unit of the node record, ``n`` numbers below the group
record's ``count``), so a checker sees that no host holds two bundles of one copy. A host
may hold bundles of several of a group's positions, from different copies: the planner only
keeps each host within the group's copies, and plans a shape's positions as one item. Here
each such item's bundles are first dealt to its positions, as many to each as copies are
placed; then the copies are handed out as the colours of a bipartite edge colouring (hosts
against positions, one edge per bundle), which exists by König's theorem (every position
has as many bundles as copies placed, every host at most that many), so each copy has every
position once and no host twice.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from accel.allocation import SHARE_UNITS
from autoscaler.planner.capacity import Bin
from autoscaler.planner.colouring import colour_edges
from autoscaler.planner.items import Item, Source


class _Cursor:
    """An item's copies handed out source by source, in demand order."""

    def __init__(self, sources: Sequence[tuple[Source, int]]) -> None:
        self.sources = [[source, left] for source, left in sources]
        self.position = 0

    def whole_units(self, per_unit: int) -> int:
        """Units that can take ``per_unit`` copies each from the current source alone."""
        while self.position < len(self.sources) and self.sources[self.position][1] == 0:
            self.position += 1
        if self.position == len(self.sources):
            return 0
        return self.sources[self.position][1] // per_unit

    def take(self, copies: int, units: int) -> list[tuple[Source, int]]:
        """``copies`` per unit for ``units`` units: (source, copies per unit). Runs of
        several units are sized by :meth:`whole_units`, so they take from one source."""
        taken: list[tuple[Source, int]] = []
        while copies > 0 and self.position < len(self.sources):
            entry = self.sources[self.position]
            n = min(copies, entry[1] // units)
            if n == 0 and units > 1:
                break
            if n:
                taken.append((entry[0], n))
                entry[1] -= n * units
                copies -= n
            if entry[1] == 0:
                self.position += 1
        return taken

    def left(self) -> Iterator[tuple[Source, int]]:
        for source, left in self.sources:
            if left:
                yield source, left


def build(groups: Sequence[Any], items: Mapping[int, Item]) -> dict[str, Any]:
    """The witness of realised ``groups`` (kind, per-host contents, units); ``items``: every
    item of the demand, placed or not."""
    placed = _placed_gang_bundles(groups, items)
    gang_copies = _gang_copies(groups, items, placed)
    records = {index: _records(items[index]) for index in placed}
    cursors = {  # (a gang's copies 0 .. n - 1 are placed, every position of each)
        index: _Cursor(
            _gang_left(item, records[index], placed[index]) if index in placed else item.sources
        )
        for index, item in items.items()
    }
    members: dict[int, Iterator[int]] = {}
    nodes: list[dict[str, Any]] = []
    on_existing: list[dict[str, Any]] = []
    for position, group in enumerate(groups):
        granted = _granted(group.kind.hosts, group.hosts, items)
        per_unit: dict[int, int] = {}  # copies per unit of the items handed out by cursor
        for host in group.hosts:
            for index, copies in host:
                if index not in placed:
                    per_unit[index] = per_unit.get(index, 0) + copies
        gangs: list[GangCopies] = [{}] * group.units
        if any(index in placed for host in group.hosts for index, _ in host):
            gangs = [
                _unit_gang_copies(granted, gang_copies, records, position, u)
                for u in range(group.units)
            ]
        left, unit = group.units, 0
        while left > 0:
            run = max(min([left] + [cursors[i].whole_units(n) for i, n in per_unit.items()]), 1)
            if group.kind.existing and gangs[unit]:
                run = 1  # (one entry per existing node)
            run = _same_sources(gangs, unit, run)
            hosts = [
                _placements(host, cursors, items, run, _merged(gangs[unit : unit + run], h))
                for h, host in enumerate(granted)
            ]
            left -= run
            unit += run
            if group.kind.existing:
                nodes_of = members.setdefault(id(group.kind), iter(group.kind.members))
                for _ in range(run):
                    node = next(nodes_of)
                    on_existing.append({"node": node, "holds": hosts[0]})
            else:
                record = {"node_type": group.kind.node_type, "count": run, "hosts": hosts}
                nodes.append(record)
    unplaced = [
        {"source": _source(bundle), "count": left}
        for index in sorted(cursors)
        for source, left in cursors[index].left()
        for bundle in _bundles_of(source, items[index])
    ]
    return {"nodes": nodes, "existing": on_existing, "unplaced": unplaced}


GangCopies = dict[tuple[int, int], list[tuple[Source, list[int]]]]
"""One unit's STRICT_SPREAD bundles: per (host, entry on it), per record, their copies."""


def _unit_gang_copies(granted, gang_copies, records, position: int, unit: int) -> GangCopies:
    """The copies unit ``unit`` of group ``position`` holds, entry by entry (an item may be
    listed twice on a host: its copies go to its entries in order); ``records``: per gang
    item, :func:`_records`."""
    found: GangCopies = {}
    for h, entries in enumerate(granted):
        on_host = gang_copies.get((position, unit, h))
        if not on_host:
            continue
        given: dict[int, int] = {}
        for e, (item, per_copy) in enumerate(entries):
            if item.index in on_host:
                start = given.get(item.index, 0)
                given[item.index] = start + len(per_copy)
                mine = on_host[item.index][start : start + len(per_copy)]
                found[(h, e)] = _copies_by_source(records[item.index], mine)
    return found


def _same_sources(gangs: Sequence[GangCopies], unit: int, run: int) -> int:
    """How many of the ``run`` units from ``unit`` take their STRICT_SPREAD bundles from the
    same records, as many from each, as ``unit`` does (they share one record)."""

    def shape(copies: GangCopies) -> dict:
        return {key: [(s, len(c)) for s, c in chunks] for key, chunks in copies.items()}

    first = shape(gangs[unit])
    same = 1
    while same < run and shape(gangs[unit + same]) == first:
        same += 1
    return same


def _merged(gangs: Sequence[GangCopies], host: int) -> dict[int, list]:
    """Per entry of ``host``, per record, (record, copies per unit, the copies unit by unit)
    over units that take them alike (:func:`_same_sources`)."""
    found: dict[int, list] = {}
    for (h, entry), chunks in gangs[0].items():
        if h == host:
            found[entry] = [
                (source, len(copies), [g[(h, entry)][k][1] for g in gangs])
                for k, (source, copies) in enumerate(chunks)
            ]
    return found


HostKey = tuple[int, int, int]
"""(group position, unit within the group, host within the unit)."""


def _placed_gang_bundles(groups: Sequence[Any], items: Mapping[int, Item]) -> dict[int, int]:
    """Bundles placed per STRICT_SPREAD gang item."""
    placed: dict[int, int] = {}
    for group in groups:
        for host in group.hosts:
            for index, copies in host:
                if items[index].spread_group is not None:
                    placed[index] = placed.get(index, 0) + copies * group.units
    return placed


def _gang_copies(
    groups: Sequence[Any], items: Mapping[int, Item], placed: Mapping[int, int]
) -> dict[HostKey, dict]:
    """Per host, per STRICT_SPREAD gang item on it, (position, copy of its gang) of each of
    its bundles (see the module doc); ``placed``: bundles placed per gang item."""
    hosts_of: dict[int, list[tuple[tuple[int, int], list[tuple[int, int]], int]]] = {}
    for position, group in enumerate(groups):
        for h, content in enumerate(group.hosts):
            on_host: dict[int, list[tuple[int, int]]] = {}
            for index, copies in content:
                gang = items[index].spread_group
                if gang is not None:
                    on_host.setdefault(gang, []).append((index, copies))
            for gang, edges in on_host.items():
                hosts_of.setdefault(gang, []).append(((position, h), edges, group.units))
    found: dict[HostKey, dict[int, list[tuple[int, int]]]] = {}
    for hosts in hosts_of.values():
        members = {index for _, edges, _ in hosts for index, _ in edges}
        shares = {divmod(placed[index], items[index].slots) for index in members}
        whole, rest = next(iter(shares))
        if len(shares) != 1 or rest:
            raise ValueError(f"a STRICT_SPREAD gang placed unevenly: {sorted(shares)} copies")
        runs = _by_position([(edges, units) for _, edges, units in hosts], items, whole)
        coloured = colour_edges([(edges, units) for _, edges, units in runs], whole)
        next_unit: dict[int, int] = {}
        for (entry, _, _), per_unit in zip(runs, coloured, strict=True):
            position, h = hosts[entry][0]
            for on_host in per_unit:
                unit = next_unit.get(entry, 0)
                next_unit[entry] = unit + 1
                held = found.setdefault((position, unit, h), {})
                for (index, k), colours in on_host.items():
                    held.setdefault(index, []).extend((k, c) for c in colours)
    return found


def _by_position(
    hosts: Sequence[tuple[Sequence[tuple[int, int]], int]], items: Mapping[int, Item], copies: int
) -> list[tuple[int, list[tuple[tuple[int, int], int]], int]]:
    """A gang's edges (per host entry, per item, bundles on each of its ``units`` hosts) with
    each item's bundles dealt to the positions it stands for, ``copies`` to each, in order:
    (entry, per (item, k-th position of its shape) the bundles, units alike) for runs of
    alike units, entry by entry. Any such deal gives every position as many bundles as the
    gang has copies, so the colouring exists."""
    dealt: dict[int, int] = {}  # bundles of each item dealt so far
    runs: list[tuple[int, list[tuple[tuple[int, int], int]], int]] = []
    for entry, (edges, units) in enumerate(hosts):
        for _ in range(units):
            on_host: dict[tuple[int, int], int] = {}
            for index, count in edges:
                first = dealt.get(index, 0)
                end = dealt[index] = first + count
                while first < end:  # bundles first .. end - 1: position k has k * copies ..
                    k = first // copies
                    upto = min(end, (k + 1) * copies)
                    on_host[(index, k)] = on_host.get((index, k), 0) + upto - first
                    first = upto
            alike = sorted(on_host.items())
            if runs and runs[-1][0] == entry and runs[-1][1] == alike:
                runs[-1] = (entry, alike, runs[-1][2] + 1)
            else:
                runs.append((entry, alike, 1))
    return runs


def _granted(bins: Sequence[Bin], hosts, items: Mapping[int, Item]):
    """Per host, (item, per copy: per part the device grants) as packed on fresh bins."""
    out = []
    for template, content in zip(bins, hosts, strict=False):
        host = template.copy(template.unit)
        entries = []
        for index, copies in content:
            item = items[index]
            if not any(part.devices for part in item.parts):
                for part in item.parts:
                    host.place(part, copies)
                entries.append((item, [[[] for _ in item.parts]] * copies))
                continue
            per_copy = [[host.grant(part) for part in item.parts] for _ in range(copies)]
            entries.append((item, per_copy))
        out.append(entries)
    return out


def _placements(entries, cursors, items, units: int, gangs) -> list[dict[str, Any]]:
    """One host's placements for ``units`` units; ``gangs``: per entry holding STRICT_SPREAD
    bundles, per record, their copies unit by unit (the other entries' copies come from
    ``cursors``)."""
    placements: list[dict[str, Any]] = []
    for e, (item, per_copy) in enumerate(entries):
        start = 0
        if e in gangs:
            taken = gangs[e]
        else:
            taken = [(s, n, None) for s, n in cursors[item.index].take(len(per_copy), units)]
        for source, n, instances in taken:
            chunk = per_copy[start : start + n]
            start += n
            for part, (resources, bundle) in enumerate(
                zip(item.resources, _bundles_of(source, item), strict=True)
            ):
                devices: dict[str, dict[int, int]] = {}
                for grants in chunk:
                    for name, device, share in grants[part]:
                        on = devices.setdefault(name, {})
                        on[device] = on.get(device, 0) + share
                placement = {
                    "source": _source(bundle),
                    "count": n,
                    "resources": dict(resources),
                }
                if instances is not None:
                    placement["instances"] = instances
                if devices:
                    placement["devices"] = {
                        name: [[d, q / SHARE_UNITS] for d, q in sorted(on.items())]
                        for name, on in sorted(devices.items())
                    }
                placements.append(placement)
    return placements


def _copies_by_source(
    records: Sequence[Record], bundles: Sequence[tuple[int, int]]
) -> list[tuple[Source, list[int]]]:
    """A gang item's ``bundles`` ((k, copy): the k-th position of the item's shape, copies
    numbered across the records the gang merges, in demand order; ``records``: the item's
    :func:`_records`) as (bundle source: record and position, their copies' numbers within
    the record)."""
    found: dict[tuple[int, int], list[int]] = {}
    offsets = [offset for offset, _, _ in records]
    for k, copy in bundles:
        number = bisect_right(offsets, copy) - 1
        found.setdefault((number, k), []).append(copy - offsets[number])
    return [
        (("placement_groups", records[number][2][k][1], records[number][2][k][2]), mine)
        for (number, k), mine in sorted(found.items())
    ]


Record = tuple[int, int, list[Source]]


def _records(item: Item) -> list[Record]:
    """A gang item's records: (first copy's number across them, copies, the sources of its
    positions of the item's shape, in order)."""
    records: list[Record] = []
    offset = 0
    for source, count in item.sources:
        if records and records[-1][2][0][1] == source[1]:
            records[-1][2].append(source)
            continue
        if records:
            offset += records[-1][1]
        records.append((offset, count, [source]))
    return records


def _gang_left(item: Item, records: Sequence[Record], bundles: int) -> list[tuple[Source, int]]:
    """A gang item's sources and the copies of each left out where ``bundles`` of it (its
    gang's first copies, every position of each) are placed."""
    placed = bundles // item.slots
    return [
        (source, count - min(count, max(0, placed - offset)))
        for offset, count, sources in records
        for source in sources
    ]


def _bundles_of(source: Source, item: Item) -> list[Source]:
    """The bundle sources one copy stands for (every bundle of a STRICT_PACK group)."""
    kind, index, bundle = source
    if kind == "placement_groups" and bundle is None:
        return [(kind, index, j) for j in range(len(item.resources))]
    return [source]


def _source(source: Source) -> dict[str, int]:
    kind, index, bundle = source
    if kind == "bundles":
        return {"bundle": index}
    return {"placement_group": index, "bundle": bundle}
