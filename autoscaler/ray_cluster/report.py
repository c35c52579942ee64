"""What we report back to Ray each round, so ``ray status`` shows our launches, the launches
the cloud refused (with its reason) and the demand no node type can host (with ours)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Resources = Mapping[str, float]


@dataclass(frozen=True)
class PendingLaunch:
    """Units asked of the cloud that it does not list yet."""

    node_type: str
    instance_type: str
    count: int
    since: float


@dataclass(frozen=True)
class PendingNode:
    """A node the cloud lists that has not joined Ray yet."""

    instance_id: str
    node_type: str
    instance_type: str
    ip: str
    details: str


@dataclass(frozen=True)
class FailedLaunch:
    node_type: str
    instance_type: str
    count: int
    reason: str
    at: float


@dataclass(frozen=True)
class Infeasible:
    """Demand no node type can host, and why."""

    resources: Resources
    count: int
    reason: str


@dataclass(frozen=True)
class ScalingReport:
    launching: tuple[PendingLaunch, ...] = ()
    booting: tuple[PendingNode, ...] = ()
    failed: tuple[FailedLaunch, ...] = ()
    infeasible: tuple[Infeasible, ...] = ()


def autoscaling_state(report: ScalingReport, messages: Any, seen: int, version: int) -> Any:
    """``report`` as a ``ray.rpc.autoscaler.AutoscalingState`` built from ``messages`` (Ray's
    ``autoscaler_pb2``). Ray's message has no reason field for a plain bundle: each infeasible
    bundle is reported as one, and again as a one-bundle gang whose details carry our reason."""
    state = messages.AutoscalingState(
        last_seen_cluster_resource_state_version=seen, autoscaler_state_version=version
    )
    for launch in report.launching:
        state.pending_instance_requests.add(
            instance_type_name=launch.instance_type,
            ray_node_type_name=launch.node_type,
            count=launch.count,
            request_ts=int(launch.since),
        )
    for node in report.booting:
        state.pending_instances.add(
            instance_type_name=node.instance_type,
            ray_node_type_name=node.node_type,
            instance_id=node.instance_id,
            ip_address=node.ip,
            details=node.details,
        )
    for failure in report.failed:
        state.failed_instance_requests.add(
            instance_type_name=failure.instance_type,
            ray_node_type_name=failure.node_type,
            count=failure.count,
            reason=failure.reason,
            start_ts=int(failure.at),
            failed_ts=int(failure.at),
        )
    for item in report.infeasible:
        state.infeasible_resource_requests.add().resources_bundle.update(item.resources)
        gang = state.infeasible_gang_resource_requests.add(details=f"{item.count} x: {item.reason}")
        gang.requests.add().resources_bundle.update(item.resources)
    return state
