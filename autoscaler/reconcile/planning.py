"""The planner's input from one observation, and the plan for it.

The pure planner gets the recorded demand and Ray's, every node (reported or joined ones
with their true free capacity, the rest as pending capacity, launches whose creates the
cloud has not finished included), and the node types as the blocks allow: a node type held
after boot failures, or with every offering blocked (capacity, quota, permission), is
unavailable with the block as its reason; Ray's ``request_resources`` constraints are planned
first against node totals.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from autoscaler.boot_failures import Streak
from autoscaler.config import ClusterConfig
from autoscaler.demand import combine, parse_demand
from autoscaler.lifecycle import STOPPED, TERMINATING
from autoscaler.offerings import UnavailableOfferings
from autoscaler.planner import Demand, ExistingNode, NodeType, Plan, PlanRequest
from autoscaler.planner.aliases import plan_canonical
from autoscaler.ray_cluster.state import DRAINING, RayNode, parse_instance_key
from autoscaler.reconcile.observe import NodeView, Observation
from autoscaler.state import StateStore
from providers.base import NODE_KIND_HEAD

GONE = frozenset({STOPPED, TERMINATING})
"""States whose nodes are no capacity at all."""


@dataclass
class Planning:
    """Plans for one cluster: its config, recorded demand, blocks and holds; ``planner``
    makes each plan (a :class:`~autoscaler.planner.memo.PlanMemo`'s hands back those it made
    before)."""

    config: ClusterConfig
    store: StateStore
    offerings: UnavailableOfferings
    holds: Mapping[str, Streak]
    planner: Callable[[PlanRequest], Plan] = plan_canonical

    @property
    def types(self) -> dict[str, NodeType]:
        return {t.name: t for t in self.config.node_types()}

    def plan(self, observation: Observation, leave_out: frozenset[str] = frozenset()) -> Plan:
        """The plan for the cluster as ``observation`` shows it, without the nodes in
        ``leave_out``. Ray's ``request_resources`` constraints are planned first against
        node totals (used or not), as Ray's own autoscaler does; the units they launch are
        then pending capacity for the pending demand."""
        types = self.types
        request = self.request(observation, types, leave_out)
        constraints = observation.ray.constraints if observation.ray else Demand()
        if not constraints.bundles and not constraints.placement_groups:
            return self.planner(request)
        totals = self.request(observation, types, leave_out, totals=True)
        held = self.planner(replace(totals, demand=constraints))
        extra = [
            node
            for launch in held.launches
            for unit in range(launch.count)
            for node in full(types[launch.node_type], f"held:{launch.node_type}:{unit}")
        ]
        main = self.planner(replace(request, existing=(*request.existing, *extra)))
        return replace(
            main,
            launches=held.launches + main.launches,
            infeasible=held.infeasible + main.infeasible,
            cost_per_hour=held.cost_per_hour + main.cost_per_hour,
            lower_bound_per_hour=held.lower_bound_per_hour + main.lower_bound_per_hour,
            node_lower_bound=held.node_lower_bound + main.node_lower_bound,
            deferred=held.deferred + main.deferred,
            notes=held.notes + main.notes,
        )

    def request(
        self,
        observation: Observation,
        types: Mapping[str, NodeType],
        leave_out: frozenset[str] = frozenset(),
        totals: bool = False,
    ) -> PlanRequest:
        """The planner's input: recorded and Ray's demand, capacity (reported or joined,
        booting, being launched; with ``totals``, each node's whole capacity), the node types
        with what the blocks allow."""
        existing: list[ExistingNode] = []
        for view in observation.views:
            if view.id in leave_out or view.state in GONE or view.node_type not in types:
                continue
            existing.extend(_capacity(view, types[view.node_type], totals))
        for waiting in observation.waiting:
            spec = types.get(waiting.intent.node_type)
            if spec is not None:
                for unit in range(waiting.count):
                    existing.extend(full(spec, f"intent:{waiting.intent.request_id}:{unit}"))
        demand = parse_demand(self.store.demand())
        node_types = [self.available(t) for t in types.values()]
        if observation.ray is not None:
            demand = combine(demand, observation.ray.demand)
            outside_types, outside = _outside(observation, types, totals)
            node_types += outside_types
            existing += outside
        return PlanRequest(
            node_types=tuple(node_types),
            demand=demand,
            existing=tuple(existing),
            limits=self.config.limits(),
        )

    def available(self, node_type: NodeType) -> NodeType:
        """``node_type`` as holds and blocks leave it: unavailable with the reason while
        held or every offering is blocked, else capped by a probe budget."""
        hold = self.holds.get(node_type.name)
        if hold is not None:
            return replace(node_type, available=False, unavailable_reason=hold.reason())
        if node_type.offering is None:
            return node_type
        quota = self.offerings.accelerator_block(node_type.resources, node_type.offering.market)
        if quota is not None:
            return replace(node_type, available=False, unavailable_reason=quota)
        budget = self.offerings.budget(node_type.offering)
        if budget is None:
            return node_type
        if budget == 0:
            reason = self.offerings.blocked_reason(node_type.offering)
            return replace(node_type, available=False, unavailable_reason=reason)
        return replace(node_type, max_workers=min(node_type.max_workers or budget, budget))


def full(
    spec: NodeType, node_id: str, worker: bool = True, pending: bool = True
) -> list[ExistingNode]:
    """A unit's whole capacity (pending: not reporting or not in Ray yet)."""
    return [
        ExistingNode(
            spec.name,
            spec.host_resources(host),
            pending=pending,
            host=host,
            node_id=node_id,
            worker=worker,
        )
        for host in range(spec.hosts)
    ]


def _capacity(view: NodeView, spec: NodeType, totals: bool = False) -> list[ExistingNode]:
    worker = view.kind != NODE_KIND_HEAD
    if totals or not view.reported or (view.joins_ray and not view.joined):
        return full(spec, view.id, worker, pending=not totals)
    if view.joins_ray:
        return [
            _ray_capacity(ray_node, view.node_type, view.id, host, worker)
            for host, ray_node in sorted(view.ray_nodes.items())
        ]
    return [
        ExistingNode(
            view.node_type,
            dict(report.free),
            dict(report.device_free),
            host=host,
            node_id=view.id,
            worker=worker,
        )
        for host, report in sorted(view.reports.items())
    ]


def _ray_capacity(
    ray_node: RayNode, node_type: str, node_id: str, host: int, worker: bool, totals: bool = False
) -> ExistingNode:
    """What Ray says is free on a node (nothing while it drains)."""
    if totals:
        free = dict(ray_node.total)
    else:
        free = {} if ray_node.status == DRAINING else dict(ray_node.available)
    return ExistingNode(node_type, free, host=host, node_id=node_id, worker=worker)


def _outside(
    observation: Observation, types: Mapping[str, NodeType], totals: bool
) -> tuple[list[NodeType], list[ExistingNode]]:
    """Ray nodes that are not ours (the head of a cluster we attached to, workers started by
    hand): capacity the planner uses first, as types of their own that are never launched
    nor counted against max_workers. A node of one of our types that the cloud no longer
    lists is ours and gone, not capacity."""
    ours = {v.id for v in observation.views}
    shapes: dict[tuple, NodeType] = {}
    existing = []
    for node in observation.ray.nodes:
        if parse_instance_key(node.instance_id)[0] in ours or (
            node.instance_id and node.node_type in types
        ):
            continue
        name = f"ray:{node.node_type or 'node'}-{len(shapes)}"
        shape = shapes.setdefault(
            tuple(sorted(node.total.items())), NodeType(name, dict(node.total), 0.0, max_workers=0)
        )
        existing.append(_ray_capacity(node, shape.name, f"ray:{node.node_id}", 0, False, totals))
    return list(shapes.values()), existing
