"""Demand to launch plan: a pure, deterministic function.

1. Demand becomes items; each item gets the node types that can host one copy (CPU-only
   items stay off accelerator types when a plain type fits). Items that fit nothing are
   infeasible, with a reason and the closest type.
2. ``min_workers`` units are launched first; with existing and pending nodes they are free
   capacity.
3. A mixed-integer program over aggregated capacity picks how many units of each type to
   launch at least cost; its dual bound is the plan's lower bound.
4. The packer realises that choice host by host with per-device accounting, places what
   is left first-fit or on the cheapest fitting type, rolls back gangs that cannot be
   placed whole, and empties under-used units into free room where it can.
5. Limits (max_workers, upscaling_speed) hold launches back; the plan says what and why.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence

from autoscaler.planner.capacity import Bin, to_units
from autoscaler.planner.items import (
    DEVICE_RESOURCES,
    Item,
    assign_candidates,
    build_items,
    fresh_host,
    infeasible_reason,
)
from autoscaler.planner.milp import POOL, Capacity, Solution, solve
from autoscaler.planner.model import (
    ExistingNode,
    Infeasible,
    Launch,
    NodeType,
    Plan,
    PlanRequest,
)
from autoscaler.planner.pack import Packer

UPSCALING_FLOOR = 5
UNKNOWN_PRICE_FACTOR = 2.0


def plan(request: PlanRequest) -> Plan:
    """The least-cost launches that place the request's demand."""
    types = {t.name: t for t in sorted(request.node_types, key=lambda t: t.name)}
    notes: list[str] = []
    items = build_items(request.demand, list(types.values()))
    assign_candidates(items, list(types.values()))
    infeasible = [_infeasible(item, list(types.values())) for item in items if not item.candidates]
    items = [item for item in items if item.candidates]

    existing_units = _existing_units(request.existing)
    open_bins = [_existing_bin(node, index) for index, node in enumerate(request.existing)]
    min_launches = {
        name: max(0, t.min_workers - existing_units.get(name, 0)) for name, t in types.items()
    }
    unit_room = {
        name: None
        if t.max_workers is None
        else max(0, t.max_workers - existing_units.get(name, 0) - min_launches[name])
        for name, t in types.items()
    }
    worker_units = sum(n for name, n in existing_units.items()) + sum(min_launches.values())
    global_room = (
        None
        if request.limits.max_workers is None
        else max(0, request.limits.max_workers - worker_units)
    )
    next_unit = len(request.existing) + 1
    for name, count in min_launches.items():
        for _ in range(count):
            open_bins.extend(
                fresh_host(types[name], h, next_unit) for h in range(types[name].hosts)
            )
            next_unit += 1

    prices = _surrogate_prices(types, notes)
    launchable = [
        Capacity(name, _unit_capacity(t), prices[name], unit_room[name], t.hosts, _devices(t))
        for name, t in types.items()
        if t.available and unit_room[name] != 0
    ]
    for name, t in types.items():
        if not t.available:
            notes.append(f"{name}: no capacity in any of its offerings now; not launched")
    pools = _pools(open_bins)
    solution = solve(items, launchable, pools, global_room)

    packer = Packer(types, open_bins, unit_room, global_room)
    launchable_names = {cap.name for cap in launchable}
    _place(items, packer, solution, launchable_names, prices)
    unplaced = _settle_gangs(items, packer)
    _empty_weak_units(packer, prices)
    for item in items:
        missing = item.count - packer.placed_count(item)
        if missing > 0:
            unplaced[item.index] = max(unplaced.get(item.index, 0), missing)
    by_index = {item.index: item for item in items}
    reported_groups: set[int] = set()
    for index, missing in sorted(unplaced.items()):
        item = by_index[index]
        if item.spread_group is None:
            infeasible.append(_limited([item], missing, types))
        elif item.spread_group not in reported_groups:
            reported_groups.add(item.spread_group)
            gang = [i for i in items if i.spread_group == item.spread_group]
            infeasible.append(_limited(gang, missing, types))

    launches, deferred = _launches(types, packer, min_launches, existing_units, request)
    cost = sum(prices[launch.node_type] * launch.count for launch in launches)
    min_cost = sum(prices[name] * n for name, n in min_launches.items())
    lower = min(cost, min_cost + solution.bound)
    unknown = sorted(
        {launch.node_type for launch in launches if types[launch.node_type].price is None}
    )
    if unknown:
        notes.append(f"unknown price for {', '.join(unknown)}: excluded from the cost")
        cost -= sum(
            prices[launch.node_type] * launch.count
            for launch in launches
            if launch.node_type in unknown
        )
        lower = min(lower, cost)
    placed_existing = sum(p.count for p in packer.log if not p.bin.new)
    return Plan(
        launches=tuple(launches),
        infeasible=tuple(infeasible),
        cost_per_hour=round(cost, 6),
        lower_bound_per_hour=round(lower, 6),
        placed_on_existing=placed_existing,
        deferred=tuple(deferred),
        notes=tuple(notes),
    )


# Inputs --------------------------------------------------------------------------------
def _existing_units(existing: Sequence[ExistingNode]) -> dict[str, int]:
    """Worker units per type (the head is not a worker)."""
    units: dict[str, set] = defaultdict(set)
    for index, node in enumerate(existing):
        if node.host == 0 and node.worker:
            units[node.node_type].add(node.node_id or index)
    return {name: len(ids) for name, ids in units.items()}


def _existing_bin(node: ExistingNode, index: int) -> Bin:
    devices = {
        name: [round(share * 10_000) for share in shares]
        for name, shares in node.device_free.items()
    }
    for name, quantity in node.free.items():
        if name in DEVICE_RESOURCES and name not in devices and quantity > 0:
            whole, rest = divmod(round(quantity * 10_000), 10_000)
            devices[name] = [10_000] * whole + ([rest] if rest else [])
    return Bin(node.node_type, -(index + 1), to_units(node.free), devices, new=False)


def _surrogate_prices(types: Mapping[str, NodeType], notes: list[str]) -> dict[str, float]:
    """Known prices, and for unknown ones a price high enough to be used only as a last
    resort (their cost is then left out of the plan's total)."""
    known = [t.price for t in types.values() if t.price is not None]
    fallback = UNKNOWN_PRICE_FACTOR * max(known, default=1.0)
    return {name: t.price if t.price is not None else fallback for name, t in types.items()}


def _unit_capacity(node_type: NodeType) -> dict[str, int]:
    capacity: dict[str, int] = defaultdict(int)
    for host in range(node_type.hosts):
        for name, quantity in fresh_host(node_type, host, -1).free.items():
            capacity[name] += quantity
    return dict(capacity)


def _devices(node_type: NodeType) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for host in range(node_type.hosts):
        for name, shares in fresh_host(node_type, host, -1).devices.items():
            counts[name] += len(shares)
    return dict(counts)


def _pools(open_bins: Sequence[Bin]) -> list[Capacity]:
    free: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for host in open_bins:
        for name, quantity in host.free.items():
            free[host.node_type][name] += max(quantity, 0)
    return [Capacity(POOL + name, dict(cap), 0.0, None) for name, cap in sorted(free.items())]


# Placement ------------------------------------------------------------------------------
def _order(items: Sequence[Item]) -> list[Item]:
    """Gangs first (they are the hardest to place), then groups, then biggest first."""

    def key(item: Item) -> tuple:
        size = sum(need for name, need in item.needs.items() if name in DEVICE_RESOURCES)
        return (
            item.spread_group is None,
            len(item.parts) == 1,
            -size,
            -item.needs.get("CPU", 0),
            -item.needs.get("memory", 0),
            item.index,
        )

    return sorted(items, key=key)


def _place(
    items: Sequence[Item],
    packer: Packer,
    solution: Solution,
    launchable: set[str],
    prices: Mapping[str, float],
) -> None:
    left = {item.index: item.count for item in items}
    ordered = _order(items)
    for item in ordered:  # 1. free capacity, as much as the program used
        planned = sum(
            v for (i, t), v in solution.assignment.items() if i == item.index and t.startswith(POOL)
        )
        if planned > 0:
            target = min(left[item.index], math.ceil(planned - 1e-6))
            left[item.index] -= packer.place_open(item, target, item.candidates, new_only=False)
    per_type: dict[str, list[tuple[Item, int]]] = defaultdict(list)
    for item in ordered:  # 2. new units of the types the program chose
        for name in item.candidates:
            planned = solution.assignment.get((item.index, name), 0.0)
            share = min(left[item.index], round(planned))
            if share > 0 and name in launchable:
                per_type[name].append((item, share))
                left[item.index] -= share
    for name in sorted(per_type):
        for index, rest in packer.fill_new_units(name, per_type[name]).items():
            left[index] += rest
    for item in ordered:  # 3. what is left: any open room, then the cheapest fitting type
        if left[item.index]:
            left[item.index] -= packer.place_open(item, left[item.index], item.candidates, False)
        for name in _by_cost_per_copy(item, packer, launchable, prices):
            if not left[item.index]:
                break
            rest = packer.fill_new_units(name, [(item, left[item.index])])
            left[item.index] = rest.get(item.index, 0)


def _by_cost_per_copy(
    item: Item, packer: Packer, launchable: set[str], prices: Mapping[str, float]
) -> list[str]:
    """Candidate types cheapest per copy of ``item`` first (higher priority breaks ties)."""
    ranked = []
    for name in item.candidates:
        if name not in launchable:
            continue
        spec = packer.node_types[name]
        fit = sum(
            fresh_host(spec, host, -1).fit_count(item.parts[0], item.count)
            if len(item.parts) == 1
            else int(fresh_host(spec, host, -1).fits_all(item.parts))
            for host in range(spec.hosts)
        )
        if fit:
            ranked.append((prices[name] / fit, -spec.priority, name))
    return [name for _, _, name in sorted(ranked)]


def _settle_gangs(items: Sequence[Item], packer: Packer) -> dict[int, int]:
    """Keep only whole STRICT_SPREAD gangs; roll back the rest. Returns unplaced copies."""
    unplaced: dict[int, int] = {}
    groups: dict[int, list[Item]] = defaultdict(list)
    for item in items:
        if item.spread_group is not None:
            groups[item.spread_group].append(item)
    for members in groups.values():
        whole = min(packer.placed_count(item) for item in members)
        for item in members:
            extra = packer.placed_count(item) - whole
            for placement in reversed([p for p in packer.log if p.item is item]):
                if extra <= 0:
                    break
                if placement.count <= extra:
                    packer.undo(placement)
                    extra -= placement.count
                else:  # shrink it: undo, then re-place the copies that stay
                    keep = placement.count - extra
                    packer.undo(placement)
                    packer.place_open(item, keep, [placement.bin.node_type], new_only=False)
                    extra = 0
            if whole < item.count:
                unplaced[item.index] = item.count - whole
    return unplaced


def _empty_weak_units(packer: Packer, prices: Mapping[str, float]) -> None:
    """Close demand units left empty, then try emptying the least-used unit of each type
    into free room elsewhere (a cheaper plan when rounding left a unit nearly idle)."""
    for name, units in list(packer.demand_units.items()):
        for unit in list(units):
            if not packer.unit_load.get((name, unit)):
                packer.close_unit(name, unit)
    for name in sorted(packer.demand_units, key=lambda n: -prices[n]):
        units = packer.demand_units[name]
        if not units:
            continue
        weakest = min(units, key=lambda u: (packer.unit_load.get((name, u), 0), -u))
        moved = [p for p in packer.log if p.bin.node_type == name and p.bin.unit == weakest]
        _try_move(packer, moved, name, weakest)


def _try_move(packer: Packer, moved: list, name: str, unit: int) -> None:
    """Re-place a unit's placements elsewhere; keep the change only if all of them moved."""
    hosts = [b for b in packer.bins[name] if b.unit == unit]
    packer.bins[name] = [b for b in packer.bins[name] if b.unit != unit]
    for placement in moved:
        packer.undo(placement)
    start = len(packer.log)
    for placement in moved:
        got = packer.place_open(placement.item, placement.count, placement.item.candidates, False)
        if got < placement.count:
            for new_placement in reversed(packer.log[start:]):
                packer.undo(new_placement)
            packer.bins[name].extend(hosts)
            for old in moved:
                packer.redo(old)
            return
    packer.bins[name].extend(hosts)
    packer.close_unit(name, unit)


# Results --------------------------------------------------------------------------------
def _launches(
    types: Mapping[str, NodeType],
    packer: Packer,
    min_launches: Mapping[str, int],
    existing_units: Mapping[str, int],
    request: PlanRequest,
) -> tuple[list[Launch], list[tuple[str, int]]]:
    launches = [
        Launch(name, count, "min_workers") for name, count in sorted(min_launches.items()) if count
    ]
    deferred = []
    speed = request.limits.upscaling_speed
    serves: dict[str, dict[tuple, int]] = defaultdict(lambda: defaultdict(int))
    demand_units = {name: set(units) for name, units in packer.demand_units.items()}
    for p in packer.log:
        if p.bin.new and p.bin.unit in demand_units.get(p.bin.node_type, ()):
            for resources in p.item.resources:
                serves[p.bin.node_type][tuple(sorted(resources.items()))] += p.count
    for name in sorted(packer.demand_units):
        count = len(packer.demand_units[name])
        if not count:
            continue
        have = existing_units.get(name, 0) + min_launches.get(name, 0)
        if speed is not None and have > 0:
            cap = max(UPSCALING_FLOOR, math.ceil(speed * have))
            if count > cap:
                deferred.append((name, count - cap))
                count = cap
        served = tuple((dict(k), n) for k, n in sorted(serves[name].items()))
        launches.append(Launch(name, count, "demand", served))
    return launches, deferred


def _infeasible(item: Item, node_types: Sequence[NodeType]) -> Infeasible:
    reason, closest = infeasible_reason(item, node_types)
    return Infeasible(_merged(item), item.count, reason, closest)


def _limited(members: Sequence[Item], missing: int, types: Mapping[str, NodeType]) -> Infeasible:
    """Demand that fits some type but was not placed (limits, capacity), as one record
    (a STRICT_SPREAD gang is one record: resources of all its bundles, count of gangs)."""
    candidates = sorted({name for item in members for name in item.candidates})
    unavailable = [name for name in candidates if not types[name].available]
    if unavailable and len(unavailable) == len(candidates):
        reason = f"every fitting node type is out of capacity now: {', '.join(unavailable)}"
    elif members[0].spread_group is not None:
        reason = (
            f"STRICT_SPREAD gang of {len(members)} bundles cannot be placed whole "
            f"on distinct nodes within max_workers ({', '.join(candidates)})"
        )
    else:
        reason = "limited by max_workers of " + ", ".join(candidates)
    merged: dict[str, float] = defaultdict(float)
    for item in members:
        for name, quantity in _merged(item).items():
            merged[name] += quantity
    return Infeasible(dict(merged), missing, reason, candidates[0])


def _merged(item: Item) -> dict[str, float]:
    total: dict[str, float] = defaultdict(float)
    for resources in item.resources:
        for name, quantity in resources.items():
            total[name] += quantity
    return dict(total)
