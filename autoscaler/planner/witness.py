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
unit: ``quantity`` is what the ``count`` copies take on that device.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from accel.allocation import SHARE_UNITS
from autoscaler.planner.capacity import Bin
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
    cursors = {index: _Cursor(item.sources) for index, item in items.items()}
    members: dict[int, Iterator[int]] = {}
    nodes: list[dict[str, Any]] = []
    on_existing: list[dict[str, Any]] = []
    for group in groups:
        granted = _granted(group.kind.hosts, group.hosts, items)
        per_unit: dict[int, int] = {}
        for host in group.hosts:
            for index, copies in host:
                per_unit[index] = per_unit.get(index, 0) + copies
        left = group.units
        while left > 0:
            run = min([left] + [cursors[i].whole_units(n) for i, n in per_unit.items()])
            run = max(run, 1)
            hosts = [_placements(host, cursors, items, run) for host in granted]
            left -= run
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


def _placements(entries, cursors, items, units: int) -> list[dict[str, Any]]:
    placements: list[dict[str, Any]] = []
    for item, per_copy in entries:
        start = 0
        for source, n in cursors[item.index].take(len(per_copy), units):
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
                if devices:
                    placement["devices"] = {
                        name: [[d, q / SHARE_UNITS] for d, q in sorted(on.items())]
                        for name, on in sorted(devices.items())
                    }
                placements.append(placement)
    return placements


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
