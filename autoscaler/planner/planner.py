"""Demand to launch plan: a pure, deterministic function.

1. Demand becomes items (a bundle, a STRICT_PACK group, one slot of a STRICT_SPREAD gang);
   each gets the node types that can host one copy. A CPU-only item that a plain type fits
   is a *rider*: under ``accelerator_conservation: spare`` (default) it may use room on
   accelerator nodes but is never the reason one is launched; under ``strict`` it stays off
   accelerator types. Items that fit nothing are infeasible, with a reason and the closest
   type.
2. Capacity comes in *kinds*: launchable types (price, room left under max_workers), and
   groups of identical free capacity (running and pending hosts, ``min_workers`` units),
   which cost nothing and are used first.
3. Column generation over *patterns* (what one unit holds, packed host by host with exact
   per-device accounting: ``packing``, ``master``, ``columns``) finds the cheapest mix; a MIP
   over the generated patterns makes it integer (``rounding``), and for small plans a second
   one takes the fewest units within 0.5% of that cost. Small plans also get exact pricing
   (``knapsack``), a second integer plan by diving, and local improvement (``improve``).
4. The chosen units are realised as they were packed; copies beyond the demand are trimmed,
   STRICT_SPREAD gangs are kept whole or not at all, and anything still unplaced is packed
   into the room left (again by patterns) before it is reported.
5. An LP over the same kinds bounds the cost and the unit count of any plan placing as
   much under the policy in force (``bound``); where exact pricing ran and everything is
   placed, its Lagrangian relaxations may raise the cost bound.
6. Limits (max_workers, upscaling_speed) hold launches back; the plan says what and why.

Work is counted, never timed (:mod:`~autoscaler.planner.budget`): once a plan has spent its
work budget, the best plan found so far is kept, the rest is packed greedily
(:mod:`~autoscaler.planner.greedy`), and the plan says so; large plans' bound is computed over
items merged by shape (:mod:`~autoscaler.planner.aggregate`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from accel.allocation import SHARE_UNITS
from autoscaler.planner.aggregate import merged_by_shape
from autoscaler.planner.bound import TARGET, BoundModel
from autoscaler.planner.budget import WORK_LIMIT, Budget
from autoscaler.planner.capacity import Bin, share_vector
from autoscaler.planner.items import (
    DEVICE_RESOURCES,
    Item,
    Source,
    assign_candidates,
    build_items,
    fresh_host,
    infeasible_reason,
    is_accelerator_type,
    positions,
)
from autoscaler.planner.keeping import runs, uncrowded
from autoscaler.planner.model import (
    CONSERVATION_POLICIES,
    SPARE,
    Demand,
    ExistingNode,
    Infeasible,
    Launch,
    NodeType,
    Plan,
    PlanRequest,
    capacity_of,
)
from autoscaler.planner.packing import Kind, Pattern, replay
from autoscaler.planner.rounding import NODE_TOLERANCE, MadeBefore, PlacedLP, Result, generate
from autoscaler.planner.solver import SolverError
from autoscaler.planner.witness import build as build_witness

UPSCALING_FLOOR = 5
GANG_REPLANS = 3
"""Plans again at most for gangs that limits leave placed in part (:meth:`_Realisation._capped`)."""
UNKNOWN_PRICE_FACTOR = 2.0


def plan(request: PlanRequest, witness: bool = False, work_limit: int = WORK_LIMIT) -> Plan:
    """The least-cost launches that place the request's demand; ``witness``: with the proof
    of what every node holds (:mod:`~autoscaler.planner.witness`); ``work_limit``: the work
    budget (:mod:`~autoscaler.planner.budget`)."""
    types = {t.name: t for t in sorted(request.node_types, key=lambda t: t.name)}
    policy = request.limits.accelerator_conservation
    if policy not in CONSERVATION_POLICIES:
        raise ValueError(
            f"accelerator_conservation must be one of {', '.join(CONSERVATION_POLICIES)}"
        )
    notes: list[str] = []
    items = build_items(request.demand)
    assign_candidates(items, list(types.values()), policy)
    infeasible, items, every_item = _impossible_left_out(
        items, request.demand, list(types.values())
    )

    existing = capacity_of(request.existing, request.demand.resource_names())
    existing_units = _existing_units(existing)
    min_launches = {
        name: max(0, t.min_workers - existing_units.get(name, 0)) if t.available else 0
        for name, t in types.items()
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
    beyond = _gangs_beyond_limits(items, types, existing, min_launches, unit_room, global_room)
    for _, members in sorted(beyond.items()):
        infeasible.append(_limited(members, members[0].gang_copies, types))
    items = [item for item in items if item.spread_group not in beyond]
    prices = _surrogate_prices(types, notes)
    for name, t in types.items():
        if not t.available:
            why = t.unavailable_reason or "no capacity in any of its offerings now"
            notes.append(f"{name}: {why}; not launched")
    kinds = _kinds(types, items, existing, min_launches, unit_room, prices)
    demand = {item.index: item.count for item in items}

    budget = Budget(work_limit)
    # The bound's model for the whole demand, its cost LP solved while the plan is made.
    demand_bound = BoundModel(*merged_by_shape(items, demand, kinds), global_room, background=True)
    realised = _Realisation(items, kinds, global_room, notes, budget)
    realised.run(demand, demand_bound)
    if budget.exhausted:
        notes.append(budget.note())
    placed = realised.placed()
    unplaced = {index: n - placed.get(index, 0) for index, n in demand.items()}
    places_all = all(missing <= 0 for missing in unplaced.values())
    by_index = {item.index: item for item in items}
    reported_groups: set[int] = set()
    for index, missing in sorted(unplaced.items()):
        if missing <= 0:
            continue
        item = by_index[index]
        if item.spread_group is None:
            infeasible.append(_limited([item], missing, types))
        elif item.spread_group not in reported_groups:
            reported_groups.add(item.spread_group)
            gang = [i for i in items if i.spread_group == item.spread_group]
            infeasible.append(_limited(gang, missing // item.slots, types))

    launches, deferred = _launches(
        types, realised.groups, every_item, min_launches, existing_units, request
    )
    cost = sum(prices[launch.node_type] * launch.count for launch in launches)
    min_cost = sum(prices[name] * n for name, n in min_launches.items())
    demand_cost = cost - min_cost
    # The bounds are for everything the plan places, on units launched now or deferred.
    planned_cost = demand_cost + sum(prices[name] * n for name, n in deferred)
    planned_units = sum(launch.count for launch in launches if launch.reason == "demand")
    planned_units += sum(n for _, n in deferred)

    def known_cost(floor: float) -> float:
        """What rounding's bounds (its whole-unit one, the one it checked its plan against)
        and the Lagrangian relaxations prove about plans placing the whole demand; where
        limits left some out, a Lagrangian relaxation of placing what the plan placed."""
        if not places_all:
            best, wanted = 0.0, planned_cost / (1 + TARGET)
            for kinds_used, dual in PlacedLP(items, placed, kinds, global_room).bounds(wanted):
                best = max(best, dual.cost_bound(kinds_used, planned_cost + 1e-9, floor) or 0.0)
                if planned_cost <= (1 + TARGET) * best:
                    break
            return best
        floor = max(floor, realised.cost_floor, realised.proven_cost)
        costs = [realised.cost_floor, realised.proven_cost]
        if realised.dual_bounds:
            kinds_used, duals = realised.dual_bounds
            costs += [d.cost_bound(kinds_used, planned_cost + 1e-9, floor) for d in duals]
        return max([0.0] + [c for c in costs if c is not None])

    model = demand_bound
    if _nonzero(placed) != _nonzero(demand):  # the bound is for what the plan places
        model = BoundModel(*merged_by_shape(items, placed, kinds), global_room)
    bounds = model.bounds(
        planned_cost * (1 + NODE_TOLERANCE) + 1e-9,
        planned_units,
        known_cost,
        whole_floor=max(realised.cost_floor, realised.proven_cost) if places_all else 0.0,
        plan_cost=planned_cost,
    )
    notes.extend(bounds.notes)
    cost_bound, unit_bound = bounds.cost, bounds.units
    lower = min(cost, min_cost + cost_bound)
    node_count = sum(launch.count for launch in launches)
    node_bound = min(node_count, sum(min_launches.values()) + unit_bound)
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
    notes.extend(_policy_notes(policy, realised, by_index, types))
    if node_count > 1:
        notes.append(
            f"fewer nodes at nearly equal cost: the fewest found among plans at most "
            f"{NODE_TOLERANCE:.1%} dearer than the cheapest found; {node_count} nodes (no plan "
            f"placing as much at most {NODE_TOLERANCE:.1%} dearer than this one launches fewer "
            f"than {node_bound})"
        )
    return Plan(
        launches=tuple(launches),
        infeasible=tuple(infeasible),
        cost_per_hour=round(cost, 6),
        lower_bound_per_hour=round(lower, 6),
        placed_on_existing=realised.placed_on_existing(),
        deferred=tuple(deferred),
        notes=tuple(notes),
        node_lower_bound=node_bound,
        budget_reached=budget.exhausted,
        witness=build_witness(realised.groups, every_item) if witness else None,
    )


def _nonzero(counts: Mapping[int, int]) -> dict[int, int]:
    return {index: n for index, n in counts.items() if n}


def _policy_notes(
    policy: str, realised: _Realisation, items: Mapping[int, Item], types: Mapping[str, NodeType]
) -> list[str]:
    riders = sum(
        copies * group.units
        for group in realised.groups
        if is_accelerator_type(types[group.kind.node_type])
        for host in group.hosts
        for index, copies in host
        if items[index].rider
    )
    if policy == SPARE:
        return [
            "accelerator_conservation: spare: CPU-only work may use room on accelerator nodes "
            "that exist, are pending or are launched for accelerator work, but no accelerator "
            f"node is launched for it while a plain type fits ({riders} CPU-only copies placed "
            "on accelerator nodes)"
        ]
    return [
        "accelerator_conservation: strict: CPU-only work stays off accelerator nodes whenever "
        "a plain type fits it"
    ]


# Capacity kinds ----------------------------------------------------------------------------
def _impossible_left_out(
    items: Sequence[Item], demand: Demand, node_types: Sequence[NodeType]
) -> tuple[list[Infeasible], list[Item], dict[int, Item]]:
    """The infeasible records, the items to plan, and every item (for the witness: the
    copies left out are listed last among its sources, so they are the ones unplaced).

    A bundle no node type holds is infeasible; so is a placement group with such a bundle
    (a STRICT_PACK group: that no type holds whole), whatever its strategy: Ray reserves a
    group whole or not at all, so none of its bundles is planned and it is one record."""
    by_index = {item.index: item for item in items}
    why_of = {
        item.index: infeasible_reason(item, node_types) for item in items if not item.candidates
    }
    dead: dict[int, tuple[str, str | None]] = {}  # group -> why, closest type
    for index, why in why_of.items():
        for (record, group, _), _ in by_index[index].sources:
            if record == "placement_groups":
                dead.setdefault(group, why)
    infeasible, planned, every = [], [], {}
    for item in items:
        live = [(source, n) for source, n in item.sources if not _of_group(source, dead)]
        left_out = [(source, n) for source, n in item.sources if _of_group(source, dead)]
        count = sum(n for _, n in live)
        every[item.index] = replace(item, sources=live + left_out) if left_out else item
        if not item.candidates and count:
            infeasible.append(Infeasible(_summed(item.resources), count, *why_of[item.index]))
        elif item.candidates and count:
            planned.append(replace(item, count=count, sources=live) if left_out else item)
    for group, (why, closest) in sorted(dead.items()):
        record = demand.placement_groups[group]
        reason = (
            f"{why} (in a {record.strategy} placement group of {len(record.bundles)} bundles: "
            "Ray reserves a group whole or not at all, so none of them is planned)"
        )
        infeasible.append(Infeasible(_summed(record.bundles), record.count, reason, closest))
    return infeasible, planned, every


def _of_group(source: Source, groups: Mapping[int, object]) -> bool:
    record, group, _ = source
    return record == "placement_groups" and group in groups


def _gangs_beyond_limits(
    items: Sequence[Item],
    types: Mapping[str, NodeType],
    existing: Sequence[ExistingNode],
    min_launches: Mapping[str, int],
    unit_room: Mapping[str, int | None],
    global_room: int | None,
) -> dict[int, list[Item]]:
    """STRICT_SPREAD gangs (their items) with more bundles per copy than the limits allow
    hosts that hold any of them (each copy needs that many distinct hosts). They are left out
    before planning, so a gang that can never be placed whole takes no room from other
    demand."""
    gangs: dict[int, list[Item]] = defaultdict(list)
    for item in items:
        if item.spread_group is not None:
            gangs[item.spread_group].append(item)
    beyond = {}
    for gang, members in gangs.items():
        names = {name for item in members for name in item.candidates}
        hosts = sum(1 for node in existing if node.node_type in names)
        hosts += sum(min_launches[name] * types[name].hosts for name in names)
        launchable = [name for name in names if types[name].available]
        new_hosts = sum(
            (unit_room[name] if unit_room[name] is not None else math.inf) * types[name].hosts
            for name in launchable
        )
        if global_room is not None:
            most = max((types[name].hosts for name in launchable), default=0)
            new_hosts = min(new_hosts, global_room * most)
        if hosts + new_hosts < positions(members):
            beyond[gang] = members
    return beyond


def _kinds(
    types: Mapping[str, NodeType],
    items: Sequence[Item],
    existing: Sequence[ExistingNode],
    min_launches: Mapping[str, int],
    unit_room: Mapping[str, int | None],
    prices: Mapping[str, float],
) -> list[Kind]:
    """Free capacity first (existing hosts grouped when identical, min_workers units), then
    every launchable type."""
    eligible = {name: [item for item in items if name in item.candidates] for name in types}
    kinds: list[Kind] = []
    groups: dict[tuple, list[Bin]] = {}
    members: dict[tuple, list[int]] = {}
    for index, node in enumerate(existing):
        host = _existing_bin(node, index)
        if node.node_type not in types:
            continue
        key = (
            node.node_type,
            tuple(sorted(host.free.items())),
            tuple(sorted((r, tuple(s)) for r, s in host.devices.items())),
        )
        groups.setdefault(key, []).append(host)
        members.setdefault(key, []).append(index)
    for key in sorted(groups):
        hosts = groups[key]
        kinds.append(
            Kind(
                0,
                key[0],
                0.0,
                len(hosts),
                (hosts[0],),
                new=False,
                existing=True,
                items=eligible[key[0]],
                members=tuple(members[key]),
            )
        )
    for name, count in sorted(min_launches.items()):
        if count:
            spec = types[name]
            hosts = tuple(fresh_host(spec, h, -1) for h in range(spec.hosts))
            kinds.append(Kind(0, name, 0.0, count, hosts, new=False, items=eligible[name]))
    for name, spec in types.items():
        if not spec.available or unit_room[name] == 0:
            continue
        hosts = tuple(fresh_host(spec, h, -1) for h in range(spec.hosts))
        kinds.append(
            Kind(
                0,
                name,
                prices[name],
                unit_room[name],
                hosts,
                new=True,
                needs_anchor=is_accelerator_type(spec),
                items=eligible[name],
            )
        )
    for position, kind in enumerate(kinds):
        kind.index = position
    return kinds


# Realisation -------------------------------------------------------------------------------
@dataclass(eq=False)
class _Group:
    """``units`` identical units of one kind, each holding ``hosts`` (per host, copies)."""

    kind: Kind
    hosts: list[list[tuple[int, int]]]
    units: int

    def copies(self) -> dict[int, int]:
        """Copies per item index on one unit (computed once: ``hosts`` never change)."""
        counts = self.__dict__.get("_copies")
        if counts is None:
            counts = self.__dict__["_copies"] = defaultdict(int)
            for host in self.hosts:
                for index, n in host:
                    counts[index] += n
        return counts


class _Realisation:
    """Units chosen by the patterns, trimmed to the demand, gangs whole, residue packed."""

    def __init__(
        self,
        items: Sequence[Item],
        kinds: Sequence[Kind],
        global_room: int | None,
        notes: list,
        budget: Budget,
    ) -> None:
        self.items = {item.index: item for item in items}
        self.budget = budget
        self.kinds = kinds
        self.global_room = global_room
        self.notes = notes
        self.groups: list[_Group] = []
        self.dual_bounds: tuple[list[Kind], list] | None = None
        self.cost_floor = 0.0
        self.proven_cost = 0.0
        self.reach: dict[int, int] = {}
        """Per gang, the most whole copies its bundles placed ever held (before hosts
        crowded with them were relieved: :meth:`_strip_crowded_gangs`)."""
        self.broken_up: set[int] = set()
        """Gangs whose bundles were placed beyond their whole copies (then taken off)."""

    def run(self, demand: Mapping[int, int], bound: BoundModel | None = None) -> None:
        """Plan ``demand`` (``bound``: the bound's model for it, which rounding asks too);
        where that leaves gangs with fewer whole copies than the plan first held, plan again
        for those copies (:meth:`_capped`); where limits leave demand out, plan again for
        what was placed (:meth:`_fitted`)."""
        self._planned(demand, bound)
        placed = self.placed()
        if any(placed.get(i, 0) < n for i, n in demand.items()) and not self.budget.exhausted:
            self._fitted({index: n for index, n in placed.items() if n > 0})

    def _planned(
        self,
        demand: Mapping[int, int],
        bound: BoundModel | None,
        before: MadeBefore | None = None,
    ) -> None:
        self._realise(demand, bound, before)
        if self._cut_gangs():
            self._capped(demand)

    def _fitted(self, placed: Mapping[int, int]) -> None:
        """Plan again for ``placed``: the units were chosen for copies that limits then left
        out too, so they may be more, or other, than what was placed needs (e.g. every unit
        a limit allows of a type where fewer, with another type's, hold the same). The plan
        made before is among those the new one is chosen from (under tight limits, rounding
        again may place less), and the new plan is kept where it places every copy of
        ``placed`` for less."""
        again = _Realisation(
            list(self.items.values()), self.kinds, self.global_room, [], self.budget
        )
        before: dict[tuple[tuple, tuple], int] = defaultdict(int)
        for group in self.groups:
            before[group.kind.identity, tuple(tuple(host) for host in group.hosts)] += group.units
        again._planned(placed, None, before)
        held = again.placed()
        if all(held.get(index, 0) >= n for index, n in placed.items()) and (
            again.new_cost() < self.new_cost() - 1e-9
        ):
            self.groups = again.groups
            self.notes.extend(again.notes)

    def new_cost(self) -> float:
        """What the units this plan launches cost."""
        return sum(group.kind.cost * group.units for group in self.groups if group.kind.new)

    def _realise(
        self,
        demand: Mapping[int, int],
        bound: BoundModel | None,
        before: MadeBefore | None = None,
    ) -> None:
        """Plan ``demand`` (``before``: a plan of it made before, one to keep in the running)."""
        result = self._generate(demand, self.kinds, self.global_room, bound, before)
        self.notes.extend(result.notes)
        self.cost_floor = result.cost_floor
        self.proven_cost = result.proven_cost
        if result.dual_bounds:
            self.dual_bounds = (result.kinds, result.dual_bounds)
        self._add(result.kinds, result.chosen)
        self._trim(demand)
        self._dissolve_anchorless()
        placed = self.placed()
        short = {i: n - placed.get(i, 0) for i, n in demand.items() if placed.get(i, 0) < n}
        if short:
            self._pack_residue(short)
            self._trim(demand)
            if self._dissolve_anchorless(dry_run=True):
                self.notes.append(
                    "an accelerator unit holds only CPU-only work after trimming (kept)"
                )

    def _cut_gangs(self) -> dict[int, int]:
        """Gangs placed for fewer whole copies than the plan first held, which happens
        where limits leave a gang placed in part and its bundles were packed for every copy
        (a host may then hold more of them than the copies placed), and gangs whose bundles
        were placed beyond their whole copies, short of all of them (the room those bundles
        took was planned for nothing): per gang, the whole copies placed."""
        placed = self.placed()
        whole = self._whole_gangs({index: placed.get(index, 0) for index in self.items})
        cut = {}
        for gang, (copies, members) in whole.items():
            reached = self.reach.get(gang, 0)
            short = gang in self.broken_up and copies < members[0].gang_copies
            if copies < reached or short:
                cut[gang] = copies
        return cut

    def _capped(self, demand: Mapping[int, int]) -> None:
        """Plan again, up to :data:`GANG_REPLANS` times, with each gang that came out with
        fewer whole copies than its plan first held asking for that many copies only (so
        no host takes more of its bundles than that); the plan placing the most is kept
        (the cheapest of those)."""

        def worth(realised: _Realisation) -> tuple[int, float]:
            return sum(realised.placed().values()), -realised.new_cost()

        best, last, caps = self, self, {}
        for _ in range(GANG_REPLANS):
            cut = {g: n for g, n in last._cut_gangs().items() if n < caps.get(g, n + 1)}
            if not cut:
                break
            caps.update(cut)
            capped = {
                item.index: replace(item, count=caps[item.spread_group] * item.slots)
                for item in self.items.values()
                if item.spread_group in caps
            }
            kinds = [
                replace(k, items=[capped.get(i.index, i) for i in k.items]) for k in self.kinds
            ]
            items = [capped.get(index, item) for index, item in self.items.items()]
            last = _Realisation(items, kinds, self.global_room, [], self.budget)
            last._realise(
                {i: capped[i].count if i in capped else n for i, n in demand.items()}, None
            )
            if worth(last) > worth(best):
                best = last
        if best is not self:
            self.groups = best.groups
            self.notes.extend(best.notes)

    def _generate(
        self,
        demand: Mapping[int, int],
        kinds: Sequence[Kind],
        room: int | None,
        bound: BoundModel | None = None,
        before: MadeBefore | None = None,
    ) -> Result:
        """Patterns for ``demand``; where the solver gives up (its last-resort time guard),
        the budget counts as spent and everything is packed greedily instead."""
        items = list(self.items.values())
        try:
            return generate(items, demand, kinds, room, self.budget, bound, before)
        except SolverError as error:
            self.notes.append(f"solver stopped ({error}): the plan was packed greedily")
            self.budget.spend(self.budget.limit)
            return generate(items, demand, kinds, room, self.budget, bound)

    def placed(self) -> dict[int, int]:
        counts: dict[int, int] = defaultdict(int)
        for group in self.groups:
            for index, n in group.copies().items():
                counts[index] += n * group.units
        return dict(counts)

    def placed_on_existing(self) -> int:
        return sum(
            n * group.units
            for group in self.groups
            if group.kind.existing
            for n in group.copies().values()
        )

    def _add(self, kinds: Sequence[Kind], chosen: Sequence[tuple[Pattern, int]]) -> None:
        for pattern, units in chosen:
            kind = kinds[pattern.kind]
            origin = kind.origin
            if not isinstance(origin, _Group):
                self.groups.append(_Group(kind, [list(h) for h in pattern.hosts], units))
                continue
            # Room left on units already chosen: those units hold more.
            origin.units -= units
            hosts = [list(a) + list(b) for a, b in zip(origin.hosts, pattern.hosts, strict=False)]
            self.groups.append(_Group(origin.kind, hosts, units))
        self.groups = [g for g in self.groups if g.units > 0]

    def _targets(self, demand: Mapping[int, int]) -> dict[int, int]:
        """Copies to keep: the demand, and for a gang's items its whole copies' bundles."""
        placed = self.placed()
        targets = {index: min(n, placed.get(index, 0)) for index, n in demand.items()}
        for gang, (copies, members) in self._whole_gangs(targets).items():
            self.reach[gang] = max(self.reach.get(gang, 0), copies)
            for item in members:
                if placed.get(item.index, 0) > copies * item.slots:
                    self.broken_up.add(gang)
                targets[item.index] = copies * item.slots
        return targets

    def _whole_gangs(self, copies: Mapping[int, int]) -> dict[int, tuple[int, list[Item]]]:
        """Per gang, the whole copies that ``copies`` (per item) hold, and its items."""
        gangs: dict[int, list[Item]] = defaultdict(list)
        for index in copies:
            item = self.items[index]
            if item.spread_group is not None:
                gangs[item.spread_group].append(item)
        return {
            gang: (min(copies[i.index] // i.slots for i in members), members)
            for gang, members in gangs.items()
        }

    def _trim(self, demand: Mapping[int, int]) -> None:
        """Copies beyond the demand and beyond whole gangs taken off (then, where a gang
        is placed for fewer copies than it has, off hosts holding more of its bundles than
        that, and trimmed again: no hand-out of its copies exists otherwise)."""
        while True:
            targets = self._targets(demand)
            placed = self.placed()
            holders: dict[int, list[int]] = defaultdict(list)  # item -> groups holding it
            for position, group in enumerate(self.groups):
                for index in group.copies():
                    holders[index].append(position)
            for index in sorted(placed):
                excess = placed[index] - targets.get(index, 0)
                if excess > 0:
                    self._trim_item(index, excess, holders)
            self.groups = [g for g in self.groups if g.units > 0 and any(g.hosts)]
            if not self._strip_crowded_gangs(targets):
                return

    def _strip_crowded_gangs(self, targets: Mapping[int, int]) -> bool:
        """Where a gang is placed for fewer copies than it has, a host may hold more of its
        bundles than the copies placed (``targets``), and then no hand-out of its copies
        exists: take bundles off such hosts, keeping as many copies as
        :func:`~autoscaler.planner.keeping.uncrowded` finds; returns whether any were taken."""
        stripped = False
        for copies, members in self._whole_gangs(targets).values():
            if copies == members[0].gang_copies:
                continue  # placed whole: no host holds more of it than its copies
            cuts = uncrowded(self.groups, members, copies)
            groups = []
            for position, group in enumerate(self.groups):
                if position not in cuts:
                    groups.append(group)
                    continue
                stripped = True
                for unit_cuts, units in runs(cuts[position]):
                    hosts = [list(h) for h in group.hosts]
                    for h, index, take in unit_cuts:
                        hosts[h] = _without([hosts[h]], index, take)[0]
                    groups.append(_Group(group.kind, hosts, units))
            self.groups = [g for g in groups if any(g.hosts)]
        return stripped

    def _trim_item(self, index: int, excess: int, holders: dict[int, list[int]]) -> None:
        """Take ``excess`` copies off units: first where that empties a launched unit, then
        launched units, then free capacity (``holders``: groups per item, kept up to date)."""

        def split(group: _Group) -> None:
            for held in group.copies():
                holders[held].append(len(self.groups))
            self.groups.append(group)

        def order(position: int) -> tuple:
            group = self.groups[position]
            counts = group.copies()
            return (not group.kind.new, len(counts) > 1, -counts.get(index, 0), position)

        for position in sorted(holders[index], key=order):
            if excess <= 0:
                break
            group = self.groups[position]
            per_unit = group.copies()[index]
            whole = min(group.units, excess // per_unit)
            if whole:
                stripped = [[(i, n) for i, n in host if i != index] for host in group.hosts]
                group.units -= whole
                split(_Group(group.kind, stripped, whole))
                excess -= whole * per_unit
            if 0 < excess < per_unit and group.units > 0:
                group.units -= 1
                split(_Group(group.kind, _without(group.hosts, index, excess), 1))
                excess = 0

    def _dissolve_anchorless(self, dry_run: bool = False) -> bool:
        """Drop launched accelerator units left holding only riders (their riders are then
        packed again)."""
        found = False
        for group in self.groups:
            if group.kind.needs_anchor and all(
                self.items[i].rider for host in group.hosts for i, _ in host
            ):
                found = True
                if not dry_run:
                    group.units = 0
        self.groups = [g for g in self.groups if g.units > 0]
        return found

    def _pack_residue(self, short: Mapping[int, int]) -> None:
        """Pack what is missing into the room left on chosen units, then new units."""
        used: dict[str, int] = defaultdict(int)
        for group in self.groups:
            if group.kind.new:
                used[group.kind.node_type] += group.units
        kinds: list[Kind] = []
        for group in self.groups:
            hosts = replay(
                group.kind, Pattern(-1, tuple(tuple(h) for h in group.hosts)), self.items
            )
            if hosts is None:
                continue
            room = Kind(
                0,
                group.kind.node_type,
                0.0,
                group.units,
                tuple(hosts),
                new=False,
                existing=group.kind.existing,
                items=group.kind.items,
                origin=group,
            )
            kinds.append(room)
        for kind in self.kinds:
            if kind.new:
                limit = None if kind.limit is None else kind.limit - used[kind.node_type]
                kinds.append(
                    Kind(
                        0,
                        kind.node_type,
                        kind.cost,
                        limit,
                        kind.hosts,
                        True,
                        needs_anchor=kind.needs_anchor,
                        items=kind.items,
                    )
                )
        room = None
        if self.global_room is not None:
            room = self.global_room - sum(used.values())
        result = self._generate(short, kinds, room)
        self.notes.extend(result.notes)
        self._add(result.kinds, result.chosen)


def _without(hosts: list[list[tuple[int, int]]], index: int, copies: int) -> list:
    """``hosts`` with ``copies`` fewer copies of ``index`` (taken from the last host first)."""
    out = [list(host) for host in hosts]
    for host in reversed(out):
        for position in range(len(host) - 1, -1, -1):
            i, n = host[position]
            if i != index or copies <= 0:
                continue
            take = min(n, copies)
            copies -= take
            if n - take:
                host[position] = (i, n - take)
            else:
                del host[position]
    return out


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
        name: [round(share * SHARE_UNITS) for share in shares]
        for name, shares in node.device_free.items()
    }
    for name, quantity in node.free.items():
        if name in DEVICE_RESOURCES and name not in devices and quantity > 0:
            whole, rest = divmod(round(quantity * SHARE_UNITS), SHARE_UNITS)
            devices[name] = [SHARE_UNITS] * whole + ([rest] if rest else [])
    return Bin(node.node_type, -(index + 1), share_vector(node.free), devices, new=False)


def _surrogate_prices(types: Mapping[str, NodeType], notes: list[str]) -> dict[str, float]:
    """Known prices, and for unknown ones a price high enough to be used only as a last
    resort (their cost is then left out of the plan's total)."""
    known = [t.price for t in types.values() if t.price is not None]
    fallback = UNKNOWN_PRICE_FACTOR * max(known, default=1.0)
    return {name: t.price if t.price is not None else fallback for name, t in types.items()}


# Results --------------------------------------------------------------------------------
def _launches(
    types: Mapping[str, NodeType],
    groups: Sequence[_Group],
    items: Mapping[int, Item],
    min_launches: Mapping[str, int],
    existing_units: Mapping[str, int],
    request: PlanRequest,
) -> tuple[list[Launch], list[tuple[str, int]]]:
    # What the new units of each type hold: launched for demand (new) or for min_workers.
    serves: dict[tuple[str, bool], dict[tuple, int]] = defaultdict(lambda: defaultdict(int))
    units: dict[str, int] = defaultdict(int)
    for group in groups:
        if group.kind.existing:
            continue
        name = group.kind.node_type
        if group.kind.new:
            units[name] += group.units
        for index, copies in group.copies().items():
            for resources in items[index].resources:
                key = tuple(sorted(resources.items()))
                serves[name, group.kind.new][key] += copies * group.units

    def served(name: str, new: bool) -> tuple[tuple[dict[str, float], int], ...]:
        return tuple((dict(k), n) for k, n in sorted(serves[name, new].items()))

    launches = [
        Launch(name, count, "min_workers", served(name, False))
        for name, count in sorted(min_launches.items())
        if count
    ]
    deferred = []
    speed = request.limits.upscaling_speed
    for name in sorted(units):
        count = units[name]
        have = existing_units.get(name, 0) + min_launches.get(name, 0)
        if speed is not None and have > 0:
            cap = max(UPSCALING_FLOOR, math.ceil(speed * have))
            if count > cap:
                deferred.append((name, count - cap))
                count = cap
        launches.append(Launch(name, count, "demand", served(name, True)))
    return launches, deferred


def _limited(members: Sequence[Item], missing: int, types: Mapping[str, NodeType]) -> Infeasible:
    """Demand that fits some type but was not placed (limits, capacity), as one record
    (a STRICT_SPREAD gang is one record: resources of all its bundles, count of gangs)."""
    candidates = sorted({name for item in members for name in item.candidates})
    unavailable = [name for name in candidates if not types[name].available]
    if unavailable and len(unavailable) == len(candidates):
        if any(types[name].unavailable_reason for name in unavailable):
            reason = "every fitting node type is unavailable now: " + ", ".join(
                f"{name} ({types[name].unavailable_reason or 'out of capacity'})"
                for name in unavailable
            )
        else:
            reason = f"every fitting node type is out of capacity now: {', '.join(unavailable)}"
    elif members[0].spread_group is not None:
        reason = (
            f"STRICT_SPREAD gang of {positions(members)} bundles cannot be "
            f"placed whole on distinct nodes within max_workers ({', '.join(candidates)})"
        )
    else:
        reason = "limited by max_workers of " + ", ".join(candidates)
    merged: dict[str, float] = defaultdict(float)
    for item in members:  # (a gang's item: its resources once per position it stands for)
        for name, quantity in _summed(item.resources).items():
            merged[name] += quantity * item.slots
    return Infeasible(dict(merged), missing, reason, candidates[0])


def _summed(bundles: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """The bundles' resources added up."""
    total: dict[str, float] = defaultdict(float)
    for resources in bundles:
        for name, quantity in resources.items():
            total[name] += quantity
    return dict(total)
