"""Check a plan's witness against its request, in time linear in their size.

Independent of how the plan was found: every bundle's resources are read from the request's
demand (by the witness's source references), every host's capacity from its node type or
existing node, so a witness that claims too much fails whatever the planner believed. Checks:

- every bundle of the demand is placed exactly once or listed unplaced, and nothing that an
  available node type with room could hold is left unplaced (a placement group's bundle
  counts as feasible only where every bundle of its group is);
- launched units per node type stay within the plan's launches (deferred ones included);
  every existing node is used at most once;
- every host within its resources, every device within its share (a fraction of a device on
  one device, a whole request on fully free devices);
- STRICT_SPREAD: every placement names the copies of its group record it belongs to
  (``instances``), no host holds two bundles of one copy, and every copy is placed whole or
  not at all; STRICT_PACK: a host holds whole groups (as many copies of each of the group's
  bundles); each group placed whole or not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from accel.allocation import SHARE_UNITS
from autoscaler.planner.capacity import share_vector
from autoscaler.planner.items import DEVICE_RESOURCES, device_shares
from autoscaler.planner.model import STRICT_PACK, STRICT_SPREAD, PlanRequest, Resources

Key = tuple[int, int | None, int]
"""(group or -1, bundle within the group or None, bundle index)."""


def verify(
    request: PlanRequest, witness: Mapping[str, Any], launched: Mapping[str, int]
) -> list[str]:
    """Problems found (empty: the witness proves the plan). ``launched``: units per node type
    the plan launches or defers."""
    checker = _Checker(request)
    units: dict[str, int] = {}
    for position, node in enumerate(witness.get("nodes", [])):
        node_type = checker.types.get(node.get("node_type"))
        count = int(node.get("count", 0))
        label = f"nodes[{position}] ({node.get('node_type')})"
        if node_type is None or count < 1:
            checker.problems.append(f"{label}: unknown node type or count {count}")
            continue
        units[node_type.name] = units.get(node_type.name, 0) + count
        hosts = node.get("hosts", [])
        if len(hosts) > node_type.hosts:
            checker.problems.append(f"{label}: {len(hosts)} hosts, the type has {node_type.hosts}")
            continue
        for host, holds in enumerate(hosts):
            capacity = node_type.host_resources(host)
            devices = _devices(capacity, node_type.devices)
            checker.host(f"{label} host {host}", capacity, devices, holds, count)
    for name, count in sorted(units.items()):
        if count > launched.get(name, 0):
            checker.problems.append(
                f"{count} units of {name} hold demand, the plan launches {launched.get(name, 0)}"
            )
    seen: set[int] = set()
    for entry in witness.get("existing", []):
        index = entry.get("node")
        if not isinstance(index, int) or not 0 <= index < len(request.existing) or index in seen:
            checker.problems.append(f"existing node {index!r}: unknown or used twice")
            continue
        seen.add(index)
        node = request.existing[index]
        devices = _devices(node.free, {})
        for name, shares in node.device_free.items():
            devices[name] = [round(s * SHARE_UNITS) for s in shares]
        checker.host(f"existing[{index}]", node.free, devices, entry.get("holds", []), 1)
    for entry in witness.get("unplaced", []):
        key = checker.key(entry.get("source", {}))
        if key is not None:
            checker.unplaced[key] = checker.unplaced.get(key, 0) + int(entry.get("count", 0))
    checker.totals(launched)
    return checker.problems


class _Checker:
    def __init__(self, request: PlanRequest) -> None:
        self.request = request
        self.types = {t.name: t for t in request.node_types}
        self.problems: list[str] = []
        self.placed: dict[Key, int] = {}
        self.unplaced: dict[Key, int] = {}
        self.needs: dict[Key, dict[str, int]] = {}
        self.gang_bundles: dict[tuple[int, int], set[int]] = {}
        """(STRICT_SPREAD record, copy) -> its bundles placed."""

    def key(self, source: Mapping[str, Any]) -> Key | None:
        """The demand bundle a source names (None, with a problem, when it names none)."""
        demand = self.request.demand
        if "placement_group" in source:
            group, bundle = source.get("placement_group"), source.get("bundle")
            if (
                isinstance(group, int)
                and 0 <= group < len(demand.placement_groups)
                and isinstance(bundle, int)
                and 0 <= bundle < len(demand.placement_groups[group].bundles)
            ):
                return (group, bundle, 0)
        else:
            bundle = source.get("bundle")
            if isinstance(bundle, int) and 0 <= bundle < len(demand.bundles):
                return (-1, None, bundle)
        self.problems.append(f"source {dict(source)} names no bundle of the demand")
        return None

    def resources(self, key: Key) -> Resources:
        group, bundle, index = key
        if group < 0:
            return self.request.demand.bundles[index].resources
        return self.request.demand.placement_groups[group].bundles[bundle]

    def host(self, label, capacity, devices, holds: Sequence[Mapping], units: int) -> None:
        free = share_vector(capacity)
        used: dict[str, int] = {}
        device_used: dict[str, list[int]] = {name: [0] * len(s) for name, s in devices.items()}
        copies_here: set[tuple[int, int, int]] = set()  # STRICT_SPREAD (unit, record, copy)
        packed: dict[int, dict[int, int]] = {}
        for placement in holds:
            key = self.key(placement.get("source", {}))
            copies = int(placement.get("count", 0))
            if key is None or copies < 1:
                continue
            self.placed[key] = self.placed.get(key, 0) + copies * units
            needs = self.needs.get(key)
            if needs is None:
                needs = self.needs[key] = share_vector(self.resources(key))
            for name, need in needs.items():
                used[name] = used.get(name, 0) + need * copies
            self._devices(label, key, needs, copies, placement.get("devices", {}), device_used)
            group, bundle, _ = key
            if group >= 0:
                strategy = self.request.demand.placement_groups[group].strategy
                if strategy == STRICT_SPREAD:
                    self._gang_copies(label, key, placement, copies, units, copies_here)
                if strategy == STRICT_PACK:
                    counts = packed.setdefault(group, {})
                    counts[bundle] = counts.get(bundle, 0) + copies
        for name, total in sorted(used.items()):
            if total > free.get(name, 0):
                self.problems.append(
                    f"{label}: {name} {total / SHARE_UNITS:g} placed, "
                    f"{free.get(name, 0) / SHARE_UNITS:g} available"
                )
        for name, per_device in sorted(device_used.items()):
            for device, total in enumerate(per_device):
                if total > devices[name][device]:
                    self.problems.append(f"{label}: {name} device {device} over its share")
        for group, counts in sorted(packed.items()):
            size = len(self.request.demand.placement_groups[group].bundles)
            if len(counts) != size or len(set(counts.values())) != 1:
                self.problems.append(f"{label}: STRICT_PACK group {group} split across nodes")

    def _gang_copies(self, label, key, placement, copies, units, copies_here) -> None:
        """A STRICT_SPREAD placement's copies, unit by unit: named, each once on its host,
        each bundle of a copy placed once."""
        group, bundle, _ = key
        per_unit = placement.get("instances")
        count = self.request.demand.placement_groups[group].count
        if (
            not isinstance(per_unit, list)
            or len(per_unit) != units
            or not all(
                isinstance(instances, list)
                and len(instances) == copies
                and all(isinstance(i, int) and 0 <= i < count for i in instances)
                for instances in per_unit
            )
        ):
            self.problems.append(f"{label}: {_name(key)} placed without naming its copies")
            return
        for unit, instances in enumerate(per_unit):
            for instance in instances:
                if (unit, group, instance) in copies_here:
                    self.problems.append(
                        f"{label}: two bundles of copy {instance} of STRICT_SPREAD group {group}"
                    )
                copies_here.add((unit, group, instance))
                placed = self.gang_bundles.setdefault((group, instance), set())
                if bundle in placed:
                    self.problems.append(f"{label}: copy {instance} of {_name(key)} placed twice")
                placed.add(bundle)

    def _devices(self, label, key, needs, copies, granted, device_used) -> None:
        for name, share in needs.items():
            if name not in device_used:
                continue
            total = 0
            for device, quantity in granted.get(name, []):
                units = round(quantity * SHARE_UNITS)
                whole = share >= SHARE_UNITS
                if (
                    not 0 <= device < len(device_used[name])
                    or units <= 0
                    or (units != SHARE_UNITS if whole else units % share)
                ):
                    self.problems.append(f"{label}: bad {name} grant on device {device}")
                    continue
                device_used[name][device] += units
                total += units
            if total != share * copies:
                self.problems.append(
                    f"{label}: {copies} x {_name(key)} granted {total / SHARE_UNITS:g} {name}"
                    f" on devices, needs {share * copies / SHARE_UNITS:g}"
                )

    def totals(self, launched: Mapping[str, int]) -> None:
        demand = self.request.demand
        expected: dict[Key, int] = {(-1, None, i): b.count for i, b in enumerate(demand.bundles)}
        for g, group in enumerate(demand.placement_groups):
            for j in range(len(group.bundles)):
                expected[(g, j, 0)] = group.count
        for key, count in expected.items():
            placed, left = self.placed.get(key, 0), self.unplaced.get(key, 0)
            if placed + left != count:
                self.problems.append(
                    f"{_name(key)}: {placed} placed and {left} unplaced of {count}"
                )
        for g, group in enumerate(demand.placement_groups):
            if group.strategy in (STRICT_SPREAD, STRICT_PACK):
                placed = {self.placed.get((g, j, 0), 0) for j in range(len(group.bundles))}
                if len(placed) > 1:
                    self.problems.append(f"placement_groups[{g}]: not placed whole")
        for (g, instance), bundles in sorted(self.gang_bundles.items()):
            if len(bundles) != len(demand.placement_groups[g].bundles):
                self.problems.append(f"placement_groups[{g}] copy {instance}: not placed whole")
        self._feasible_left_out(launched)

    def _feasible_left_out(self, launched: Mapping[str, int]) -> None:
        """Unplaced demand that fresh hosts of available types with room left hold
        (scalar resources; a STRICT_SPREAD gang bundle by bundle on as many distinct hosts
        as those types have left, STRICT_PACK groups together). Not checked under a
        cluster-wide max_workers."""
        if self.request.limits.max_workers is not None:
            return
        present: dict[str, int] = {}
        for node in self.request.existing:
            if node.host == 0:
                present[node.node_type] = present.get(node.node_type, 0) + 1
        rooms: list[tuple[dict[str, int], int | None]] = []  # (host, hosts left; None: any)
        for t in self.request.node_types:
            units = None
            if t.max_workers is not None:
                units = t.max_workers - launched.get(t.name, 0) - present.get(t.name, 0)
            if t.available and (units is None or units > 0):
                rooms.append(
                    (share_vector(t.host_resources(0)), None if units is None else units * t.hosts)
                )
        hosts = [host for host, _ in rooms]
        demand = self.request.demand
        for key, left in sorted(self.unplaced.items(), key=lambda kv: _name(kv[0])):
            if left <= 0:
                continue
            group, _, _ = key
            if group < 0:
                shapes = [share_vector(self.resources(key))]
            else:
                pg = demand.placement_groups[group]
                members = [share_vector(b) for b in pg.bundles]
                if pg.strategy == STRICT_PACK:
                    summed: dict[str, int] = {}
                    for member in members:
                        for name, need in member.items():
                            summed[name] = summed.get(name, 0) + need
                    members = [summed]
                shapes = members  # (Ray reserves a group whole or not at all)
            fits = all(any(_holds(host, shape) for host in hosts) for shape in shapes)
            if fits and group >= 0 and demand.placement_groups[group].strategy == STRICT_SPREAD:
                fits = _on_distinct_hosts(shapes, rooms)
            if fits:
                self.problems.append(f"{_name(key)}: {left} feasible left unplaced")


def _on_distinct_hosts(
    shapes: Sequence[Mapping[str, int]], rooms: Sequence[tuple[Mapping[str, int], int | None]]
) -> bool:
    """Whether every shape gets a host of its own: a bipartite matching of shapes to the
    types' hosts left (``rooms``: a host's resources and how many such hosts are left)."""
    taken: list[list[int]] = [[] for _ in rooms]  # per type, the shapes on its hosts

    def place(shape: int, seen: set[int]) -> bool:
        for t, (host, left) in enumerate(rooms):
            if t in seen or not _holds(host, shapes[shape]):
                continue
            seen.add(t)
            if left is None or len(taken[t]) < left:
                taken[t].append(shape)
                return True
            for other in list(taken[t]):  # move one of its shapes elsewhere
                taken[t].remove(other)
                if place(other, seen):
                    taken[t].append(shape)
                    return True
                taken[t].append(other)
        return False

    return all(place(shape, set()) for shape in range(len(shapes)))


def _holds(host: Mapping[str, int], shape: Mapping[str, int]) -> bool:
    return all(need <= host.get(name, 0) for name, need in shape.items())


def _devices(capacity: Resources, counts: Mapping[str, int]) -> dict[str, list[int]]:
    """Per device resource of a host: each device's share, in units."""
    return {
        name: device_shares(quantity, counts.get(name))
        for name, quantity in capacity.items()
        if name in DEVICE_RESOURCES and quantity > 0
    }


def _name(key: Key) -> str:
    group, bundle, index = key
    return f"bundles[{index}]" if group < 0 else f"placement_groups[{group}].bundles[{bundle}]"
