"""`status`: the cluster as its cloud lists it and the planner sees it, built without writing
anything (nodes, pending and infeasible demand, recent failures, blocked offerings, held node
types, cost). A node waiting to come up for minutes gets a reason, with the last lines of its
console for the few longest-waiting ones (read-only cloud calls)."""

from __future__ import annotations

from typing import Any

from autoscaler.boot_failures import (
    BOOT_STATES,
    STATUS_CONSOLE_NODES,
    STATUS_REASON_AFTER_S,
    Console,
    read_console,
)
from autoscaler.cluster import Cluster
from autoscaler.lifecycle import ALLOCATED, BOOTING, QUEUED, STOPPED, TERMINATING
from autoscaler.offerings import EVERY, UnavailableOfferings, utc
from autoscaler.planner import Plan
from autoscaler.ray_cluster.client import RayUnavailableError
from autoscaler.ray_cluster.endpoints import ray_endpoints
from autoscaler.reconciler import NodeView, Observation, Reconciler
from autoscaler.state import Event
from providers.base import CLOUD_RUNNING, NODE_KIND_HEAD

RECENT_FAILURES = 20


def build_status(cluster: Cluster, events: bool = False) -> dict[str, Any]:
    """Nodes from the cloud, pending and infeasible demand (Ray's too, with a Ray cluster),
    what is launching for it, failures, blocked offerings, cost."""
    reconciler = cluster.reconciler()
    ray_address = cluster.ray.address if cluster.ray else None
    ray_error = None
    try:
        observation = reconciler.observe()
    except RayUnavailableError as err:  # the cloud's view is still worth showing
        ray_error = str(err)
        cluster.ray = None
        reconciler = cluster.reconciler()
        observation = reconciler.observe()
    views = observation.views
    fresh = reconciler.current_plan(observation)
    now = cluster.clock()
    prices = {t.name: t.price for t in cluster.config.node_types()}
    blocked = UnavailableOfferings(cluster.clock, cluster.store.offerings()).active()
    log = cluster.store.events(limit=1000)
    holds = reconciler.holds()
    nodes = [_node_dict(view, now) for view in views]
    for node, (reason, console) in zip(nodes, _not_up(reconciler, views, holds, now), strict=True):
        node["reason"] = reason
        node["console"] = list(console.lines) if console and console.lines else None
    status: dict[str, Any] = {
        "cluster": cluster.name,
        "nodes": nodes,
        **_demand_dict(fresh),
        "launching": _launching(observation),
        "failures": [_failure_dict(e) for e in log if e.kind == "failed"][-RECENT_FAILURES:],
        "unavailable_offerings": [
            {
                "offering": "every create" if r.instance_type == EVERY else r.key,
                "kind": r.kind,
                "code": r.code,
                "message": r.message,
                "detail": r.detail,
                "until": r.until,
                "expires_in_seconds": r.until - now,
            }
            for r in blocked
        ],
        "held_node_types": [
            {
                "node_type": name,
                "reason": streak.reason(),
                "cause": streak.cause,
                "failures": streak.count,
                "last_node_id": streak.last_node_id,
                "console": list(streak.console.lines),
                "until": streak.held_until,
                "expires_in_seconds": streak.held_until - now,
            }
            for name, streak in sorted(holds.items())
        ],
        "account": [
            {"kind": r.kind, "name": r.name, "id": r.id}
            for r in cluster.provider.account_resources()
        ],
        "cost_per_hour": sum(
            prices.get(v.node_type) or 0.0 for v in views if v.node.state == CLOUD_RUNNING
        ),
    }
    heads = [v for v in views if v.kind == NODE_KIND_HEAD]
    endpoints = ray_endpoints(
        cluster.config.spec,
        [h.internal_ip for v in heads for h in v.node.hosts if h.internal_ip],
        log,
    )
    demand = _ray_dict(ray_address, observation, ray_error) if ray_address else {}
    if endpoints or demand:
        status["ray"] = {**(endpoints or {}), **demand}
    if events:
        status["events"] = [_event_dict(e) for e in log]
    return status


def _not_up(
    reconciler: Reconciler, views: list[NodeView], holds: dict, now: float
) -> list[tuple[str | None, Console | None]]:
    """Per view: why it is not up yet (None when it is, or has waited only briefly), and its
    console for the :data:`STATUS_CONSOLE_NODES` longest-waiting ones."""
    waiting = {
        view.id: now - min(view.since, view.node.launched_at or view.since)
        for view in views
        if view.state in BOOT_STATES
    }
    slow = sorted((i for i, s in waiting.items() if s >= STATUS_REASON_AFTER_S), key=waiting.get)
    read = set(slow[::-1][:STATUS_CONSOLE_NODES])
    found: list[tuple[str | None, Console | None]] = []
    for view in views:
        if view.state == QUEUED:
            found.append((_queued_reason(view, now), None))
            continue
        if view.state in (STOPPED, TERMINATING):
            found.append((view.record.reason, None))
            continue
        if view.id not in waiting or waiting[view.id] < STATUS_REASON_AFTER_S:
            found.append((None, None))
            continue
        waited = _minutes(waiting[view.id])
        if view.state == ALLOCATED:
            what = f"not started by the cloud after {waited}"
        elif view.reported:
            what = f"reported but not in Ray after {waited}"
        else:
            what = f"no report after {waited}"
        if view.kind == NODE_KIND_HEAD:
            what += "; the head is never replaced"
        elif view.node_type in holds:
            what += f"; its type is held: not replaced ({holds[view.node_type].what})"
        elif view.node_type in reconciler.types:
            limit = reconciler.observer.timeout(view.state, view.node_type)
            what += f"; replaced at {_minutes(limit)}"
        console = read_console(reconciler.provider, view.id) if view.id in read else None
        what += "; " + (
            console.describe()
            if console
            else f"console not read (status reads the {STATUS_CONSOLE_NODES} longest-waiting)"
        )
        found.append((what, console))
    return found


def _queued_reason(view: NodeView, now: float) -> str:
    """A request waiting for capacity: since when, and until when the cloud waits."""
    node = view.node
    since = min(view.since, node.launched_at or view.since)
    what = f"{node.status_message or 'waiting for capacity'} since {utc(since)}"
    what += f" ({_minutes(now - since)})"
    if node.waiting_until is not None:
        what += f", until {utc(node.waiting_until)} (then the cloud fails it; it is replaced)"
    return what


def _launching(observation: Observation) -> list[dict[str, Any]]:
    """Creates the cloud has not finished, and nodes launched but not up yet."""
    launching = [
        {
            "node_type": w.intent.node_type,
            "count": w.count,
            "state": "creating",
            "since": w.intent.created_at,
        }
        for w in observation.waiting
        if w.count
    ]
    booting: dict[tuple[str, str], list[float]] = {}
    for view in observation.views:
        if view.state in BOOTING:
            booting.setdefault((view.node_type, view.state), []).append(view.since)
    launching += [
        {"node_type": node_type, "count": len(since), "state": state, "since": min(since)}
        for (node_type, state), since in sorted(booting.items())
    ]
    return launching


def _ray_dict(address: str, observation: Observation, error: str | None) -> dict[str, Any]:
    """Ray's pending demand as Ray reports it (or why Ray could not be asked)."""
    if error is not None or observation.ray is None:
        return {"address": address, "error": error, "pending": []}
    demand = observation.ray.demand
    pending = [{"resources": dict(b.resources), "count": b.count} for b in demand.bundles]
    pending += [
        {
            "placement_group": g.strategy,
            "bundles": [dict(b) for b in g.bundles],
            "count": g.count,
        }
        for g in demand.placement_groups
    ]
    return {"address": address, "error": None, "pending": pending}


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min"


def _node_dict(view: NodeView, now: float) -> dict[str, Any]:
    accelerators: dict[str, int] = {}
    for report in view.reports.values():
        for name, count in report.devices.items():
            accelerators[name] = accelerators.get(name, 0) + count
    idle_since = view.idle_since
    launched = view.node.launched_at or view.since
    return {
        "id": view.id,
        "node_type": view.node_type,
        "kind": view.kind,
        "state": view.state,
        "since": view.since,
        "state_reason": view.record.reason or None,
        "offering": view.record.offering or None,
        "cloud_state": view.node.state,
        "cloud_status": view.node.cloud_status or None,
        "waiting_for_capacity": (
            {"since": view.since, "until": view.node.waiting_until}
            if view.state == QUEUED
            else None
        ),
        "accelerators": accelerators if view.reports else None,
        "internal_ips": [h.internal_ip for h in view.node.hosts if h.internal_ip],
        "external_ips": [h.external_ip for h in view.node.hosts if h.external_ip],
        "idle_seconds": None if idle_since is None else max(0.0, now - idle_since),
        "age_seconds": max(0.0, now - launched),
    }


def _demand_dict(fresh: Plan) -> dict[str, Any]:
    return {
        "pending": [
            {
                "node_type": launch.node_type,
                "count": launch.count,
                "reason": launch.reason,
                "serves": [{"resources": dict(r), "count": n} for r, n in launch.serves],
            }
            for launch in fresh.launches
        ],
        "deferred": [{"node_type": t, "count": n} for t, n in fresh.deferred],
        "infeasible": [
            {
                "resources": dict(i.resources),
                "count": i.count,
                "reason": i.reason,
                "closest_node_type": i.closest_node_type,
            }
            for i in fresh.infeasible
        ],
    }


def _failure_dict(event: Event) -> dict[str, Any]:
    data = event.data or {}
    return {
        "at": event.at,
        "node_type": event.node_type,
        "offering": data.get("offering"),
        "code": data.get("code"),
        "kind": data.get("kind"),
        "message": event.message,
    }


def _event_dict(event: Event) -> dict[str, Any]:
    return {
        "at": event.at,
        "kind": event.kind,
        "message": event.message,
        "node_type": event.node_type,
        "node_id": event.node_id,
    }
