"""The planner's inputs and outputs: plain frozen records, no I/O.

Demand is *shapes with counts* (one record for 5,000 identical bundles). Resources are
``{name: quantity}`` maps in the node resource model (``CPU``, ``memory`` in bytes, ``GPU``,
``TPU``, ``neuron_cores``, ``accelerator_type:<T>``...).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

Resources = Mapping[str, float]

PACK = "PACK"
SPREAD = "SPREAD"
STRICT_PACK = "STRICT_PACK"
STRICT_SPREAD = "STRICT_SPREAD"
STRATEGIES = (PACK, SPREAD, STRICT_PACK, STRICT_SPREAD)

SPARE = "spare"
STRICT = "strict"
CONSERVATION_POLICIES = (SPARE, STRICT)
"""``accelerator_conservation``: may CPU-only work use room on accelerator nodes?

``spare`` (default): an accelerator node is never launched for CPU-only work while a plain
type fits it, but CPU-only work may use the room left on accelerator nodes that exist, are
pending, or are launched in the same plan for accelerator work. ``strict``: CPU-only work
stays off accelerator nodes whenever a plain type fits it, even where they have room."""


@dataclass(frozen=True)
class NodeType:
    """A launchable node type. A multi-host TPU slice is one unit of ``hosts`` hosts."""

    name: str
    resources: Resources
    """What one host advertises (host 0 of a slice additionally carries ``head_resources``)."""
    price: float | None
    """Hourly price of one unit (the whole slice); None when unknown."""
    min_workers: int = 0
    max_workers: int | None = None
    """Units of this type allowed at once (None: no per-type limit)."""
    hosts: int = 1
    head_resources: Resources = field(default_factory=dict)
    """Extra resources on host 0 only, e.g. ``{"TPU-v4-16-head": 1}``."""
    devices: Mapping[str, int] = field(default_factory=dict)
    """Device count per accelerator resource on one host (``{"GPU": 8}``): a fractional
    request must fit one device's remaining share. Defaults to the resource quantity."""
    market: str = "on-demand"
    priority: int = 0
    """Higher wins between types of equal cost."""
    available: bool = True
    """False while every offering of the type is known to be out of capacity, or while the
    type is held after its nodes repeatedly failed to come up: nothing of it is launched,
    not even for ``min_workers``."""
    unavailable_reason: str | None = None
    """Why it is unavailable, when that is not capacity (said in notes and infeasibility)."""
    offering: Hashable | None = None
    """What the type launches (the cloud's offering record: instance type, market, zones),
    resolved once at load; carried for the reconciler, opaque to the planner."""

    def host_resources(self, host: int) -> dict[str, float]:
        """What host ``host`` of a fresh unit advertises (host 0 also the head resources)."""
        resources = dict(self.resources)
        for name, quantity in (self.head_resources if host == 0 else {}).items():
            resources[name] = resources.get(name, 0.0) + quantity
        return resources


@dataclass(frozen=True)
class ExistingNode:
    """A node that is running or already being launched, with what is still free on it."""

    node_type: str
    free: Resources
    device_free: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    """Free share of each device per accelerator resource (``{"GPU": (1.0, 0.4)}``)."""
    pending: bool = False
    host: int = 0
    """Host index within its slice (one record per host)."""
    node_id: str | None = None
    worker: bool = True
    """False for the head node, which does not count against ``max_workers``."""


@dataclass(frozen=True)
class BundleDemand:
    """``count`` identical bundles, each placeable on its own."""

    resources: Resources
    count: int = 1


@dataclass(frozen=True)
class PlacementGroupDemand:
    """``count`` identical placement groups."""

    strategy: str
    bundles: tuple[Resources, ...]
    count: int = 1


@dataclass(frozen=True)
class Demand:
    bundles: tuple[BundleDemand, ...] = ()
    placement_groups: tuple[PlacementGroupDemand, ...] = ()

    def resource_names(self) -> set[str]:
        """Every resource some bundle asks a positive quantity of."""
        shapes = [b.resources for b in self.bundles]
        shapes += [b for g in self.placement_groups for b in g.bundles]
        return {name for shape in shapes for name, quantity in shape.items() if quantity}


def capacity_of(
    existing: Iterable[ExistingNode], names: Collection[str]
) -> tuple[ExistingNode, ...]:
    """``existing`` with only the free capacity of the resources ``names`` (devices too).

    Room of a resource no bundle asks for decides nothing about where a bundle fits, yet it
    may change every round without any meaning for the plan: Ray's free
    ``object_store_memory`` moves with every object stored. The planner plans only this
    capacity, so requests that differ elsewhere get the same plan (and a monitor's memo
    hands it back)."""
    return tuple(
        replace(
            node,
            free={n: q for n, q in node.free.items() if n in names},
            device_free={n: s for n, s in node.device_free.items() if n in names},
        )
        for node in existing
    )


@dataclass(frozen=True)
class Limits:
    max_workers: int | None = None
    """Worker units allowed across the cluster (None: unlimited)."""
    upscaling_speed: float | None = None
    """Launches of a type per step are capped at ``max(5, speed x its current units)`` once
    it has units; a type with none may launch all its demand needs in the first step."""
    accelerator_conservation: str = SPARE
    """``spare`` or ``strict`` (see :data:`CONSERVATION_POLICIES`)."""


@dataclass(frozen=True)
class PlanRequest:
    node_types: tuple[NodeType, ...]
    demand: Demand
    existing: tuple[ExistingNode, ...] = ()
    limits: Limits = field(default_factory=Limits)


@dataclass(frozen=True)
class Launch:
    """``count`` new units of ``node_type`` and the demand they serve."""

    node_type: str
    count: int
    reason: str
    """``demand`` or ``min_workers``."""
    serves: tuple[tuple[Resources, int], ...] = ()
    """(bundle resources, how many) placed on these new units."""


@dataclass(frozen=True)
class Infeasible:
    resources: Resources
    count: int
    reason: str
    closest_node_type: str | None = None


@dataclass(frozen=True)
class Plan:
    launches: tuple[Launch, ...]
    infeasible: tuple[Infeasible, ...]
    cost_per_hour: float
    """Hourly cost of the new units (unknown prices count as 0 and are listed in notes)."""
    lower_bound_per_hour: float
    """No plan that places the same demand costs less."""
    placed_on_existing: int = 0
    deferred: tuple[tuple[str, int], ...] = ()
    """(node type, units) held back by limits (upscaling_speed, max_workers)."""
    notes: tuple[str, ...] = ()
    node_lower_bound: int = 0
    """No plan that places the same demand and costs at most 0.5% more than this one
    launches fewer units (nodes; a slice is one), min_workers units included."""
    budget_reached: bool = False
    """The work budget ran out (:mod:`~autoscaler.planner.budget`): the plan is the best found
    by then, with the rest packed greedily; the lower bound is valid all the same."""
    witness: Mapping[str, Any] | None = field(default=None, compare=False)
    """What every node holds (``plan(..., witness=True)``; see ``planner.witness``)."""

    @property
    def node_count(self) -> int:
        """Units launched (min_workers included)."""
        return sum(launch.count for launch in self.launches)

    @property
    def gap(self) -> float:
        """How far the cost is above the lower bound, as a fraction of the bound (0.02: 2%
        above; the planner's target is 3%); infinite where no positive bound was proved."""
        if self.cost_per_hour <= self.lower_bound_per_hour:
            return 0.0
        if self.lower_bound_per_hour <= 0:
            return math.inf
        return self.cost_per_hour / self.lower_bound_per_hour - 1

    def launch_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for launch in self.launches:
            counts[launch.node_type] = counts.get(launch.node_type, 0) + launch.count
        return counts
