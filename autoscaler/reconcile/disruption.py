"""Disruption: nodes idle past their type's idle timeout are retired (drained through Ray
first), never the head, never below ``min_workers``, and never one the pending demand would
have launched again."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping

from autoscaler.config import ClusterConfig
from autoscaler.lifecycle import STOPPED, TERMINATING
from autoscaler.planner import NodeType, Plan
from autoscaler.reconcile.actions import Delete
from autoscaler.reconcile.observe import Observation
from providers.base import NODE_KIND_HEAD


def disruption(
    observation: Observation,
    config: ClusterConfig,
    types: Mapping[str, NodeType],
    taken: frozenset[str],
    plan: Callable[[frozenset[str]], Plan],
) -> list[Delete]:
    """Deletes (with a Ray drain) for idle nodes not in ``taken``; ``plan(leave_out)`` is
    the plan without the nodes left out."""
    now = observation.now
    views = observation.views
    alive: dict[str, int] = defaultdict(int)
    for view in views:
        if view.state not in (STOPPED, TERMINATING) and view.id not in taken:
            alive[view.node_type] += 1
    idle = sorted(
        (
            v
            for v in views
            if v.kind != NODE_KIND_HEAD
            and v.id not in taken
            and v.node_type in types
            and v.idle_since is not None
            and now - v.idle_since >= 60 * config.idle_timeout_minutes(v.node_type)
        ),
        key=lambda v: (v.idle_since, v.id),
    )
    chosen = {}
    for view in idle:
        if alive[view.node_type] <= types[view.node_type].min_workers:
            continue
        alive[view.node_type] -= 1
        chosen[view.id] = view
    if chosen:  # keep idle nodes that pending demand would otherwise relaunch
        without = plan(frozenset(chosen)).launch_counts()
        with_all = plan(frozenset()).launch_counts()
        for node_type, extra in without.items():
            keep = extra - with_all.get(node_type, 0)
            for node_id in [i for i, v in chosen.items() if v.node_type == node_type][:keep]:
                del chosen[node_id]
    return [
        Delete(view, f"idle for {(now - view.idle_since) / 60:.1f} min", drain=True)
        for view in chosen.values()
    ]
