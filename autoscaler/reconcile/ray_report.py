"""Ray state reporting: what we launch, what boots, what failed and what can never be
served, for ``ray status``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from autoscaler.lifecycle import STOPPED, TERMINATING
from autoscaler.planner import NodeType, Plan
from autoscaler.ray_cluster.report import (
    FailedLaunch,
    Infeasible,
    PendingLaunch,
    PendingNode,
    ScalingReport,
)
from autoscaler.reconcile.observe import NodeView, Observation
from autoscaler.state import Event

RECENT_FAILURES_S = 600.0
"""Launch failures reported to Ray for this long."""


def scaling_report(
    observation: Observation,
    nodes: Sequence[NodeView],
    plan: Plan,
    launched: Mapping[str, int],
    types: Mapping[str, NodeType],
    events: Sequence[Event],
) -> ScalingReport:
    """The round as Ray's autoscaler state shows it."""
    now = observation.now
    instance_type = {
        name: t.offering.instance_type if t.offering else "" for name, t in types.items()
    }
    launching = [
        PendingLaunch(
            w.intent.node_type,
            instance_type.get(w.intent.node_type, ""),
            w.count,
            w.intent.created_at,
        )
        for w in observation.waiting
        if w.count
    ] + [
        PendingLaunch(name, instance_type.get(name, ""), count, now)
        for name, count in launched.items()
    ]
    booting = [
        PendingNode(
            v.id,
            v.node_type,
            v.node.instance_type,
            v.node.internal_ip or "",
            f"{v.state}: launched, not yet in Ray",
        )
        for v in nodes
        if v.joins_ray and not v.joined and v.state not in (STOPPED, TERMINATING)
    ]
    failed = [
        FailedLaunch(
            e.node_type or "", instance_type.get(e.node_type or "", ""), 1, e.message, e.at
        )
        for e in events
        if e.kind == "failed" and now - e.at <= RECENT_FAILURES_S
    ]
    infeasible = [Infeasible(i.resources, i.count, i.reason) for i in plan.infeasible]
    return ScalingReport(tuple(launching), tuple(booting), tuple(failed), tuple(infeasible))
