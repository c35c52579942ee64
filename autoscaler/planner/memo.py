"""Plans remembered by their input, for a planner that is asked again.

The planner is deterministic: the same request gets the same plan on any machine, under any
load (its work limits are counts, not time). A monitor asks again for requests it planned
before: the same observation twice in one round (disruption's plan with every node, then
the round's own), and round after round where nothing changed, such as a backlog that
``max_workers`` keeps waiting, whose plans are the slowest to make. :class:`PlanMemo` hands
back the plan it made for such a request instead of making it again.

A request is matched by equality, as Python compares the records (a mapping's order does
not count: Ray may list a node's resources in another order each round), through a hashable
copy of it, in what the planner plans: of existing nodes' free capacity, only the resources
some bundle asks for (:func:`~autoscaler.planner.model.capacity_of`; by the name written or
its canonical one). In a Ray cluster a node's free ``object_store_memory`` changes with every
object stored, round after round, and no plan depends on it unless a bundle asks for it.
The plan handed back is the one made for a request equal in all of that. The one exception to
determinism is the solver's last-resort time guard
(:data:`~autoscaler.planner.solver.GUARD_TIME_S` per solve, never reached on sane inputs):
a plan it cut short is handed back like any other until the request changes.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping

from autoscaler.planner.aliases import canonical_demand, plan_canonical
from autoscaler.planner.model import Plan, PlanRequest, capacity_of

MEMO_SIZE = 8
"""Requests remembered (the least recently asked for are forgotten first). A round asks for
at most a few: with and without its idle nodes, Ray's ``request_resources`` first."""


class PlanMemo:
    """``planner``'s plans for the last :data:`MEMO_SIZE` requests asked for."""

    def __init__(
        self, planner: Callable[[PlanRequest], Plan] = plan_canonical, size: int = MEMO_SIZE
    ) -> None:
        self.planner = planner
        self.size = size
        self.plans: OrderedDict[Hashable, Plan] = OrderedDict()
        self.made = 0
        """Plans made (requests not remembered)."""
        self.reused = 0
        """Plans handed back without planning."""

    def plan(self, request: PlanRequest) -> Plan:
        """The plan for ``request``: the one made before for it, else a new one."""
        key = _key(request)
        known = self.plans.get(key)
        if known is not None:
            self.plans.move_to_end(key)
            self.reused += 1
            return known
        made = self.planner(request)
        self.made += 1
        self.plans[key] = made
        if len(self.plans) > self.size:
            self.plans.popitem(last=False)
        return made


def _key(request: PlanRequest) -> Hashable:
    """What the plan of ``request`` depends on: all of it, but of existing nodes' capacity
    only the resources the demand asks for, as written or renamed to canonical names."""
    canonical, _ = canonical_demand(request.demand, request.node_types)
    asked = request.demand.resource_names() | canonical.resource_names()
    return _frozen(dataclasses.replace(request, existing=capacity_of(request.existing, asked)))


def _frozen(value: object) -> Hashable:
    """A hashable copy of ``value`` (records, mappings, sequences) that equals another's
    exactly where the values are equal."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        return type(value), tuple(_frozen(getattr(value, f.name)) for f in fields if f.compare)
    if isinstance(value, Mapping):
        try:
            return frozenset(value.items())  # values hashable already (numbers, tuples)
        except TypeError:
            return frozenset((key, _frozen(item)) for key, item in value.items())
    if isinstance(value, list | tuple):
        return tuple(_frozen(item) for item in value)
    if isinstance(value, set | frozenset):
        return frozenset(_frozen(item) for item in value)
    return value
