"""Observing the cluster (read-only): one immutable :class:`Observation` per round.

The cloud's tags are the truth. Owned nodes are listed; launch intents recorded before a
create call are matched with the instances carrying their request id, and the create
operations left running are looked at; each node's lifecycle record is moved along its
declared transitions (``autoscaler.lifecycle``) to what the cloud and the node's reports
show; the agents' reports are read; with a Ray cluster attached, Ray's pending work, nodes
and idle times too (a node whose type runs ``ray start`` is pending capacity until it
joins Ray). Nothing here writes: ``sync`` records what an observation found.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from autoscaler.lifecycle import (
    BOOTING,
    QUEUED,
    REQUESTED,
    RUNNING,
    TERMINATING,
    NodeRecord,
    observed_state,
    reason_for,
    timeout_s,
)
from autoscaler.planner.items import is_accelerator_type
from autoscaler.ray_cluster.client import RayUnavailableError
from autoscaler.ray_cluster.state import RayNode, RayState, parse_instance_key
from autoscaler.reconcile.context import Context
from autoscaler.report import NodeReport, decode
from autoscaler.state import PENDING_INTENT, Intent
from providers.base import (
    NODE_KIND_WORKER,
    TAG_LAUNCH_REQUEST,
    TAG_NODE_KIND,
    TAG_NODE_TYPE,
    OperationStatus,
    ProviderNode,
)
from providers.errors import ProviderError

logger = logging.getLogger(__name__)

OPERATIONS_PER_ROUND = 20
"""Create operations left running that one round looks at (one cloud read each)."""
BOOT_CLOCK = frozenset(BOOTING - {QUEUED})
"""States timed together from the launch (waiting in a queue restarts the clock)."""


@dataclass(frozen=True)
class NodeView:
    """One owned node as this round sees it, with its lifecycle record."""

    node: ProviderNode
    record: NodeRecord
    reports: dict[int, NodeReport] = field(default_factory=dict)
    joins_ray: bool = False
    """Its type runs ``ray start`` and a Ray cluster is attached: it must join to count."""
    ray_nodes: dict[int, RayNode] = field(default_factory=dict)
    """Its hosts' Ray nodes, by host."""
    ray_idle_since: float | None = None
    """When Ray last saw work on any of its hosts; None while Ray sees work."""

    @property
    def id(self) -> str:
        return self.node.id

    @property
    def node_type(self) -> str:
        return self.record.node_type

    @property
    def kind(self) -> str:
        return self.record.kind

    @property
    def state(self) -> str:
        return self.record.state

    @property
    def since(self) -> float:
        return self.record.since

    @property
    def hosts(self) -> int:
        return max(1, len(self.node.hosts))

    @property
    def reported(self) -> bool:
        return len(self.reports) >= self.hosts

    @property
    def joined(self) -> bool:
        """Every host has joined Ray."""
        return len(self.ray_nodes) >= self.hosts

    @property
    def up(self) -> bool:
        """Reported, and joined Ray where its type must."""
        return self.reported and (self.joined or not self.joins_ray)

    @property
    def idle_since(self) -> float | None:
        """When every host became idle (no lease, and for Ray nodes, Ray sees no work);
        None while any host is busy, unreported or not yet in Ray."""
        if not self.reported or any(r.idle_since is None for r in self.reports.values()):
            return None
        leased = max(r.idle_since for r in self.reports.values())
        if not self.joins_ray:
            return leased
        if not self.joined or self.ray_idle_since is None:
            return None
        return max(leased, self.ray_idle_since)


@dataclass(frozen=True)
class Transition:
    """A node's record moved (``before`` None: first seen)."""

    before: NodeRecord | None
    after: NodeRecord


@dataclass(frozen=True)
class Waiting:
    """A launch whose create the cloud has not finished: ``count`` units not listed yet are
    pending capacity (never created a second time)."""

    intent: Intent
    count: int


@dataclass(frozen=True)
class FailedOperation:
    """A create operation left running by an earlier round that has since failed."""

    intent: Intent
    error: ProviderError


@dataclass(frozen=True)
class Observation:
    """The cluster as the cloud's tags and the state file show it now, and what ``sync``
    would write down about it. Building one writes nothing."""

    views: tuple[NodeView, ...]
    ray: RayState | None = None
    """Ray's view this round (None without a Ray cluster)."""
    waiting: tuple[Waiting, ...] = ()
    found_intents: tuple[tuple[Intent, tuple[str, ...]], ...] = ()
    """Pending launches whose instances the cloud now lists in full."""
    expired_intents: tuple[Intent, ...] = ()
    failed_operations: tuple[FailedOperation, ...] = ()
    finished_operations: tuple[Intent, ...] = ()
    """Pending launches whose create operations all finished well (their nodes follow)."""
    transitions: tuple[Transition, ...] = ()
    adopted: tuple[NodeView, ...] = ()
    """Owned nodes no launch of ours explains."""
    forgotten: tuple[NodeRecord, ...] = ()
    """Recorded nodes the cloud no longer lists."""
    now: float = 0.0
    """When it was observed."""

    @property
    def newly_running(self) -> tuple[Transition, ...]:
        return tuple(
            t
            for t in self.transitions
            if t.after.state == RUNNING and t.before is not None and t.before.state != RUNNING
        )


class Observer:
    """Builds observations of one cluster."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self.types = {t.name: t for t in context.config.node_types()}

    def timeout(self, state: str, node_type: str) -> float:
        """How long a node of ``node_type`` may stay in ``state``."""
        spec = self.types.get(node_type)
        yaml = self.context.config.spec.available_node_types.get(node_type)
        return timeout_s(
            state,
            spec is None or is_accelerator_type(spec),
            yaml.lifecycle_timeouts_s if yaml is not None else None,
        )

    def observe(self) -> Observation:
        """Owned nodes with their lifecycle and reports, intents matched; no writes."""
        now = self.context.clock()
        ray_state = self._read_ray()
        nodes = self.context.provider.nodes()
        intents = self.context.store.intents(PENDING_INTENT)
        by_request: dict[str, list[str]] = defaultdict(list)
        for node in nodes:
            if TAG_LAUNCH_REQUEST in node.tags:
                by_request[node.tags[TAG_LAUNCH_REQUEST]].append(node.id)
        waiting, found, expired, failed, finished = [], [], [], [], []
        polled = 0
        for intent in intents:
            ids = tuple(sorted(by_request.get(intent.request_id, ())))
            status = None
            if intent.operations and polled < OPERATIONS_PER_ROUND:
                polled += len(intent.operations)
                status = self._operations(intent)
            if status is not None and status.error is not None:
                failed.append(FailedOperation(intent, status.error))
            elif intent.operations and (status is None or not status.done):
                waiting.append(Waiting(intent, intent.count - len(ids)))
            elif len(ids) >= intent.count:
                found.append((intent, ids))
            elif now - intent.created_at > self.timeout(REQUESTED, intent.node_type):
                expired.append(intent)
            else:
                waiting.append(Waiting(intent, intent.count - len(ids)))
                if status is not None and status.done:
                    finished.append(intent)
        records = self.context.store.node_records()
        recorded = {intent.request_id for intent in self.context.store.intents()}
        views, transitions, adopted = [], [], []
        in_ray = _ray_nodes_by_instance(ray_state)
        sent = self.context.store.reports()  # what agents sent to the monitor's report endpoint
        for node in nodes:
            view = self._view(node, now, in_ray, sent.get(node.id, {}), records.get(node.id))
            before = records.get(node.id)
            if before is None or before.request != view.record.request:
                before = None
                if node.tags.get(TAG_LAUNCH_REQUEST) not in recorded:
                    adopted.append(view)
            if before is None or view.record != before:
                transitions.append(Transition(before, view.record))
            views.append(view)
        listed = {node.id for node in nodes}
        return Observation(
            views=tuple(views),
            now=now,
            ray=ray_state,
            waiting=tuple(waiting),
            found_intents=tuple(found),
            expired_intents=tuple(expired),
            failed_operations=tuple(failed),
            finished_operations=tuple(finished),
            transitions=tuple(transitions),
            adopted=tuple(adopted),
            forgotten=tuple(r for node_id, r in sorted(records.items()) if node_id not in listed),
        )

    def _operations(self, intent: Intent) -> OperationStatus:
        """The intent's create operations as they stand: failed if any failed, done when
        all are (a cloud that cannot be asked leaves them running)."""
        done = True
        for handle in intent.operations:
            try:
                status = self.context.provider.operation_status(handle)
            except ProviderError as err:
                logger.info("could not look at operation %s: %s", handle, err)
                return OperationStatus(done=False)
            if status.error is not None:
                return status
            done &= status.done
        return OperationStatus(done=done)

    def _read_ray(self) -> RayState | None:
        if self.context.ray is None:
            return None
        try:
            return self.context.ray.read()
        except RayUnavailableError as err:
            logger.warning("round failed: %s", err)
            raise

    def _view(
        self,
        node: ProviderNode,
        now: float,
        in_ray: Mapping[tuple[str, int], RayNode],
        sent: Mapping[int, NodeReport],
        before: NodeRecord | None,
    ) -> NodeView:
        hosts = range(max(1, len(node.hosts)))
        reports = {host: report for host in hosts if (report := _newest(node, host, sent))}
        node_type = node.tags.get(TAG_NODE_TYPE, "")
        spec = self.context.config.spec.available_node_types.get(node_type)
        ray_nodes = {host: in_ray[node.id, host] for host in hosts if (node.id, host) in in_ray}
        idle = [n.idle_s for n in ray_nodes.values() if n.idle]
        view = NodeView(
            node,
            NodeRecord(
                node.id,
                node_type,
                node.tags.get(TAG_NODE_KIND, NODE_KIND_WORKER),
                REQUESTED,
                now,
                offering=f"{node.instance_type}/{node.zone or 'any zone'}/{node.market}",
                request=node.tags.get(TAG_LAUNCH_REQUEST, ""),
            ),
            reports,
            joins_ray=self.context.ray is not None and spec is not None and spec.ray_start,
            ray_nodes=ray_nodes,
            ray_idle_since=now - min(idle) if idle and len(idle) == len(ray_nodes) else None,
        )
        if before is not None and before.request == view.record.request:
            return replace(view, record=_moved(before, node, view.up, now))
        state = observed_state(node, view.up)
        return replace(view, record=view.record.moved(state, now, reason_for(node, state)))


def _moved(before: NodeRecord, node: ProviderNode, up: bool, now: float) -> NodeRecord:
    """``before`` moved to what the cloud shows, along the declared transitions only (a
    node we are deleting stays terminating); booting is timed from the launch across its
    states, so the record keeps its ``since`` between them."""
    state = observed_state(node, up)
    if state == before.state or not before.can_become(state):
        if before.state != TERMINATING and state != before.state:
            logger.debug("%s: %s -> %s is not a transition", node.id, before.state, state)
        return before
    moved = before.moved(state, now, reason_for(node, state))
    if {before.state, state} <= BOOT_CLOCK:
        return replace(moved, since=before.since)
    return moved


def _newest(node: ProviderNode, host: int, sent: Mapping[int, NodeReport]) -> NodeReport | None:
    """A host's latest report: sent to the monitor's endpoint, or written into its tags."""
    found = [r for r in (sent.get(host), decode(node.tags, host)) if r is not None]
    return max(found, key=lambda report: report.reported_at, default=None)


def _ray_nodes_by_instance(state: RayState | None) -> dict[tuple[str, int], RayNode]:
    """Ray nodes that name their cloud instance, by (cloud node id, host)."""
    if state is None:
        return {}
    return {parse_instance_key(n.instance_id): n for n in state.nodes if n.instance_id}
