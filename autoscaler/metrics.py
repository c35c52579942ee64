"""Prometheus metrics of the reconcile loop, served by ``autoscale monitor --metrics-port``."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from autoscaler.config import ClusterConfig
    from autoscaler.reconciler import TickResult
    from autoscaler.state import Event


class Metrics:
    """The loop's metrics in their own registry (several can live in one process)."""

    def __init__(self, config: ClusterConfig, registry: CollectorRegistry | None = None) -> None:
        self.config = config
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.pending_demand = Gauge(
            "autoscaler_pending_demand",
            "Demand waiting for new nodes or infeasible, by resource",
            ["resource"],
            registry=r,
        )
        self.nodes = Gauge(
            "autoscaler_nodes",
            "Owned nodes by type and lifecycle state",
            ["node_type", "state"],
            registry=r,
        )
        self.launches = Counter(
            "autoscaler_launches", "Units launched", ["node_type", "offering"], registry=r
        )
        self.failures = Counter(
            "autoscaler_launch_failures",
            "Failed launches by offering and reason",
            ["offering", "reason", "code"],
            registry=r,
        )
        self.tick_seconds = Histogram(
            "autoscaler_tick_seconds", "Duration of one reconcile round", registry=r
        )
        self.plan_cost = Gauge(
            "autoscaler_plan_cost_per_hour", "Hourly cost of the launches last planned", registry=r
        )
        self.plans = Counter(
            "autoscaler_plans",
            "Plans made, and plans handed back for a request planned before",
            ["outcome"],
            registry=r,
        )

    def observe(self, result: TickResult, events: Iterable[Event]) -> None:
        """Record one round and the events it logged."""
        self.tick_seconds.observe(result.seconds)
        self.plan_cost.set(result.plan.cost_per_hour)
        self.plans.labels("made").inc(result.plans_made)
        self.plans.labels("reused").inc(result.plans_reused)
        self.nodes.clear()
        for (node_type, state), count in Tally(
            (v.node_type, v.state) for v in result.nodes
        ).items():
            self.nodes.labels(node_type, state).set(count)
        pending: dict[str, float] = {}
        shapes = [s for launch in result.plan.launches for s in launch.serves]
        shapes += [(i.resources, i.count) for i in result.plan.infeasible]
        for resources, count in shapes:
            for name, quantity in resources.items():
                pending[name] = pending.get(name, 0.0) + quantity * count
        self.pending_demand.clear()
        for name, quantity in pending.items():
            self.pending_demand.labels(name).set(quantity)
        for node_type, count in result.launched.items():
            self.launches.labels(node_type, self._offering(node_type)).inc(count)
        for event in events:
            if event.kind == "failed":
                data = event.data or {}
                self.failures.labels(
                    data.get("offering") or self._offering(event.node_type or ""),
                    data.get("kind") or "error",
                    data.get("code") or "",
                ).inc()

    def serve(self, port: int, host: str = "127.0.0.1") -> WSGIServer:
        """Serve ``/metrics`` on a daemon thread; the server is returned to be shut down."""
        server, _ = start_http_server(port, addr=host, registry=self.registry)
        return server

    def _offering(self, node_type: str) -> str:
        """The type's offering as a label: instance type, zones, market."""
        known = {t.name: t for t in self.config.node_types()}
        offering = known[node_type].offering if node_type in known else None
        return str(offering) if offering else "unknown"
