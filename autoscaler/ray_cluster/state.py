"""Ray's cluster resource state (what Ray's GCS serves external autoscalers) as our records.

Pending resource requests become bundles with counts, pending gang requests placement groups
with their strategy, cluster resource constraints (``ray.autoscaler.sdk.request_resources``)
a demand held against node totals, and every live Ray node its totals, what is free, status
and idle time. Reads the message's fields only, so it needs no Ray import.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from autoscaler.demand import combine
from autoscaler.planner.model import (
    PACK,
    STRATEGIES,
    STRICT_PACK,
    STRICT_SPREAD,
    BundleDemand,
    Demand,
    PlacementGroupDemand,
)

HEAD_RESOURCE = "node:__internal_head__"
DEAD = "DEAD"
DRAINING = "DRAINING"
IDLE = "IDLE"


@dataclass(frozen=True)
class RayNode:
    """One live Ray node."""

    node_id: str
    """Ray's node id, hex."""
    instance_id: str
    """``RAY_CLOUD_INSTANCE_ID`` it started with (empty when not set)."""
    node_type: str
    """``RAY_NODE_TYPE_NAME`` it started with (empty when not set)."""
    total: Mapping[str, float]
    available: Mapping[str, float]
    status: str
    """RUNNING, IDLE or DRAINING."""
    idle_s: float
    """How long Ray has seen nothing running on it (tasks, actors, objects, groups)."""
    head: bool = False

    @property
    def idle(self) -> bool:
        return self.status == IDLE


@dataclass(frozen=True)
class RayState:
    """What Ray needs and has, one read."""

    nodes: tuple[RayNode, ...]
    demand: Demand
    """Pending tasks, actors and placement groups."""
    constraints: Demand
    """``request_resources``: capacity the cluster must have in total, used or not."""
    version: int = 0
    """Ray's ``cluster_resource_state_version`` (echoed in our report)."""


def instance_key(node_id: str, host: int) -> str:
    """The ``RAY_CLOUD_INSTANCE_ID`` of host ``host`` of cloud node ``node_id``."""
    return node_id if host == 0 else f"{node_id}/{host}"


def parse_instance_key(instance_id: str) -> tuple[str, int]:
    """(cloud node id, host) of a ``RAY_CLOUD_INSTANCE_ID``."""
    node_id, _, host = instance_id.rpartition("/")
    if node_id and host.isdigit():
        return node_id, int(host)
    return instance_id, 0


def from_resource_state(state: Any) -> RayState:
    """Our records from a ``ray.rpc.autoscaler.ClusterResourceState`` message."""
    return RayState(
        nodes=tuple(_node(n) for n in state.node_states if _status(n) != DEAD),
        demand=combine(
            Demand(bundles=_by_count(state.pending_resource_requests)),
            Demand(placement_groups=tuple(_gang(g) for g in state.pending_gang_resource_requests)),
        ),
        constraints=combine(
            *(
                Demand(bundles=_by_count(c.resource_requests))
                for c in state.cluster_resource_constraints
            )
        ),
        version=state.cluster_resource_state_version,
    )


def _status(node: Any) -> str:
    field = node.DESCRIPTOR.fields_by_name["status"]
    return field.enum_type.values_by_number[node.status].name


def _node(node: Any) -> RayNode:
    total = dict(node.total_resources)
    return RayNode(
        node_id=node.node_id.hex(),
        instance_id=node.instance_id,
        node_type=node.ray_node_type_name,
        total=total,
        available=dict(node.available_resources),
        status=_status(node),
        idle_s=node.idle_duration_ms / 1000,
        head=HEAD_RESOURCE in total,
    )


def _by_count(requests: Iterable[Any]) -> tuple[BundleDemand, ...]:
    return tuple(
        BundleDemand(dict(r.request.resources_bundle), r.count)
        for r in requests
        if r.count > 0 and r.request.resources_bundle
    )


def _gang(gang: Any) -> PlacementGroupDemand:
    bundles = tuple(dict(r.resources_bundle) for r in gang.requests)
    return PlacementGroupDemand(_strategy(gang), bundles)


def _strategy(gang: Any) -> str:
    """STRICT_SPREAD / STRICT_PACK from the bundles' constraints (as Ray's own scheduler reads
    them); the soft PACK / SPREAD from the group's details (``<id>:<strategy>|<state>``)."""
    constraints = [c for r in gang.requests for c in r.placement_constraints]
    if any(c.HasField("anti_affinity") for c in constraints):
        return STRICT_SPREAD
    if any(c.HasField("affinity") for c in constraints):
        return STRICT_PACK
    named = gang.details.partition(":")[2].partition("|")[0]
    return named if named in STRATEGIES else PACK
