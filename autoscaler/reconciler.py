"""The reconcile loop: observe the cloud, settle, plan, act. One call to ``tick`` is one round.

* **Observe** (read-only): the cloud's tags are the truth. Owned nodes are listed, launch
  intents recorded before a create call are matched with the instances carrying their
  request id, each node's lifecycle state is worked out, and the agents' reports are read.
  Read commands (``status``, ``plan``, every ``--json``) stop here.
* **Sync**: what observing found is written down: intents settled, node states recorded,
  vanished nodes forgotten, adoptions and under-reporting logged.
* **Plan**: the pure planner gets the recorded demand, every node (reported ones with their
  true free capacity, the rest as pending capacity), and the offerings known to be out.
* **Act**: launches go out in batches under a per-tick budget through one launch path (the
  head's too), each recorded as an intent first; capacity failures mark the offering and the
  round re-plans around it; idle, timed-out and orphaned nodes are terminated. Every
  decision lands in the event log.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from accel.allocation import SHARE_UNITS
from autoscaler.agent import package_version
from autoscaler.bootstrap import agent_script
from autoscaler.config import ClusterConfig
from autoscaler.demand import parse_demand
from autoscaler.lifecycle import (
    ALLOCATED,
    REQUESTED,
    RUNNING,
    TERMINATING,
    WAITING_FOR_REPORT,
    timeout_s,
)
from autoscaler.offerings import UnavailableOfferings
from autoscaler.planner import ExistingNode, NodeType, Plan, PlanRequest, plan
from autoscaler.planner.items import is_accelerator_type
from autoscaler.report import NodeReport, decode
from autoscaler.state import (
    FAILED_INTENT,
    LAUNCHED_INTENT,
    PENDING_INTENT,
    Event,
    Intent,
    StateStore,
)
from providers.base import (
    CLOUD_PENDING,
    CLOUD_RUNNING,
    NODE_KIND_HEAD,
    NODE_KIND_WORKER,
    TAG_LAUNCH_REQUEST,
    TAG_NODE_KIND,
    TAG_NODE_TYPE,
    NodeProvider,
    ProviderNode,
)
from providers.errors import CapacityError, ProviderError

logger = logging.getLogger(__name__)

LAUNCH_BATCH = 50
"""Units per create call."""
LAUNCHES_PER_TICK = 500
"""Units launched per round at most (the global rate limit)."""
REPLAN_ROUNDS = 3
"""Re-plans within one round after capacity failures."""
BOOTING = frozenset({ALLOCATED, WAITING_FOR_REPORT})


@dataclass
class NodeView:
    """One owned node as this round sees it."""

    node: ProviderNode
    node_type: str
    kind: str
    state: str
    since: float
    reports: dict[int, NodeReport] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.node.id

    @property
    def hosts(self) -> int:
        return max(1, len(self.node.hosts))

    @property
    def reported(self) -> bool:
        return len(self.reports) >= self.hosts

    @property
    def idle_since(self) -> float | None:
        """When every host became idle; None while any host is busy or unreported."""
        if not self.reported or any(r.idle_since is None for r in self.reports.values()):
            return None
        return max(r.idle_since for r in self.reports.values())


@dataclass(frozen=True)
class NodeStateChange:
    node_id: str
    node_type: str
    state: str
    since: float


@dataclass(frozen=True)
class Observation:
    """The cluster as the cloud's tags and the state file show it now, and what ``sync``
    would write down about it. Building one writes nothing."""

    views: list[NodeView]
    waiting_intents: tuple[Intent, ...] = ()
    """Pending launches whose instances the cloud does not list yet (pending capacity)."""
    found_intents: tuple[tuple[Intent, tuple[str, ...]], ...] = ()
    """Pending launches whose instances the cloud lists (e.g. after a crash)."""
    expired_intents: tuple[Intent, ...] = ()
    state_changes: tuple[NodeStateChange, ...] = ()
    adopted: tuple[NodeView, ...] = ()
    """Owned nodes no launch of ours explains."""
    newly_running: tuple[NodeView, ...] = ()
    forgotten: tuple[str, ...] = ()
    """Recorded nodes the cloud no longer lists."""


@dataclass
class TickResult:
    plan: Plan
    nodes: list[NodeView]
    launched: dict[str, int] = field(default_factory=dict)
    terminated: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0


class Reconciler:
    """Keeps one cluster's nodes matched to its demand."""

    def __init__(
        self,
        config: ClusterConfig,
        provider: NodeProvider,
        store: StateStore,
        clock: Callable[[], float] = time.time,
        launches_per_tick: int = LAUNCHES_PER_TICK,
    ) -> None:
        self.config = config
        self.provider = provider
        self.store = store
        self.clock = clock
        self.launches_per_tick = launches_per_tick
        self.offerings = UnavailableOfferings(clock, store.offerings(), store.save_offering)
        self.types = {t.name: t for t in config.node_types()}

    # One round ----------------------------------------------------------------------------
    def tick(self) -> TickResult:
        started = time.perf_counter()
        observation = self.sync()
        result = TickResult(plan=Plan((), (), 0.0, 0.0), nodes=observation.views)
        self._retire(observation, result)
        result.plan = self.current_plan(observation)
        budget = self.launches_per_tick
        for _ in range(REPLAN_ROUNDS):
            budget, capacity_failed = self._launch_plan(result.plan, budget, result)
            if not capacity_failed or budget <= 0:
                break
            observation = self.sync()
            result.plan = self.current_plan(observation)
            result.nodes = observation.views
        result.seconds = time.perf_counter() - started
        return result

    # Observe (read-only) ----------------------------------------------------------------
    def observe(self) -> Observation:
        """Owned nodes with their lifecycle state and reports, intents matched; no writes."""
        now = self.clock()
        nodes = self.provider.nodes()
        intents = self.store.intents()
        by_request: dict[str, list[str]] = defaultdict(list)
        for node in nodes:
            if TAG_LAUNCH_REQUEST in node.tags:
                by_request[node.tags[TAG_LAUNCH_REQUEST]].append(node.id)
        waiting, found, expired = [], [], []
        for intent in intents:
            if intent.status != PENDING_INTENT:
                continue
            ids = tuple(sorted(by_request.get(intent.request_id, ())))
            if ids:
                found.append((intent, ids))
            elif now - intent.created_at > timeout_s(REQUESTED, True):
                expired.append(intent)
            else:
                waiting.append(intent)
        known = self.store.node_states()
        recorded = {intent.request_id for intent in intents}
        views, changes, adopted, newly_running = [], [], [], []
        for node in nodes:
            view = self._view(node, now)
            previous = known.get(node.id)
            if previous is not None and (
                previous[1] == view.state or {previous[1], view.state} <= BOOTING
            ):
                view.since = previous[2]  # booting is timed from the launch, across its states
                if previous[1] != view.state:
                    changes.append(NodeStateChange(node.id, view.node_type, view.state, view.since))
            else:
                changes.append(NodeStateChange(node.id, view.node_type, view.state, now))
                if previous is None and node.tags.get(TAG_LAUNCH_REQUEST) not in recorded:
                    adopted.append(view)
            if view.state == RUNNING and previous is not None and previous[1] != RUNNING:
                newly_running.append(view)
            views.append(view)
        listed = {node.id for node in nodes}
        return Observation(
            views=views,
            waiting_intents=tuple(waiting),
            found_intents=tuple(found),
            expired_intents=tuple(expired),
            state_changes=tuple(changes),
            adopted=tuple(adopted),
            newly_running=tuple(newly_running),
            forgotten=tuple(sorted(set(known) - listed)),
        )

    def _view(self, node: ProviderNode, now: float) -> NodeView:
        reports = {
            host: report
            for host in range(max(1, len(node.hosts)))
            if (report := decode(node.tags, host)) is not None
        }
        view = NodeView(
            node,
            node.tags.get(TAG_NODE_TYPE, ""),
            node.tags.get(TAG_NODE_KIND, NODE_KIND_WORKER),
            ALLOCATED,
            now,
            reports,
        )
        view.state = _state_of(view)
        return view

    # Sync (writes what observing found) -------------------------------------------------
    def sync(self) -> Observation:
        """Observe, then record it: intents settled, node states, events."""
        observation = self.observe()
        for intent, ids in observation.found_intents:
            self.store.settle_intent(intent.request_id, LAUNCHED_INTENT, ids)
            self._event(
                "resolved",
                f"launch {intent.request_id} found in the cloud after a "
                f"restart: {len(ids)} x {intent.node_type}",
                intent.node_type,
            )
        for intent in observation.expired_intents:
            self.store.settle_intent(intent.request_id, FAILED_INTENT, detail="never appeared")
        for change in observation.state_changes:
            self.store.set_node_state(change.node_id, change.node_type, change.state, change.since)
        for view in observation.adopted:
            self._event(
                "adopted",
                f"adopted {view.id} ({view.node_type}) found in the cloud",
                view.node_type,
                view.id,
            )
        for view in observation.newly_running:
            self._check_reported_capacity(view)
        for node_id in observation.forgotten:
            self.store.forget_node(node_id)
        return observation

    def _check_reported_capacity(self, view: NodeView) -> None:
        spec = self.types.get(view.node_type)
        if spec is None:
            return
        for host, report in view.reports.items():
            promised = spec.host_resources(host)
            for name in spec.devices:
                have = report.resources.get(name, 0.0)
                if round(have * SHARE_UNITS) < round(promised.get(name, 0.0) * SHARE_UNITS):
                    self._event(
                        "under-reported",
                        f"{view.id} host {host} reports {name} {have:g} but {view.node_type} "
                        f"promised {promised[name]:g}; planning with what it reports",
                        view.node_type,
                        view.id,
                    )

    # Plan ---------------------------------------------------------------------------------
    def current_plan(self, observation: Observation | None = None) -> Plan:
        """The plan for the cluster as ``observation`` shows it (observed now if None)."""
        return plan(self.request(observation or self.observe()))

    def request(
        self, observation: Observation, leave_out: frozenset[str] = frozenset()
    ) -> PlanRequest:
        """The planner's input: demand, capacity (reported, booting, being launched), the
        node types with what the unavailable offerings allow."""
        existing: list[ExistingNode] = []
        for view in observation.views:
            if (
                view.id in leave_out
                or view.state == TERMINATING
                or view.node_type not in self.types
            ):
                continue
            existing.extend(self._capacity(view))
        for intent in observation.waiting_intents:
            spec = self.types.get(intent.node_type)
            if spec is not None:
                for unit in range(intent.count):
                    existing.extend(_full(spec, f"intent:{intent.request_id}:{unit}"))
        return PlanRequest(
            node_types=tuple(self._available(t) for t in self.types.values()),
            demand=parse_demand(self.store.demand()),
            existing=tuple(existing),
            limits=self.config.limits(),
        )

    def _capacity(self, view: NodeView) -> list[ExistingNode]:
        spec = self.types[view.node_type]
        worker = view.kind != NODE_KIND_HEAD
        if not view.reported:
            return _full(spec, view.id, worker)
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

    def _available(self, node_type: NodeType) -> NodeType:
        if node_type.offering is None:
            return node_type
        budget = self.offerings.budget(node_type.offering)
        if budget is None:
            return node_type
        if budget == 0:
            return replace(node_type, available=False)
        return replace(node_type, max_workers=min(node_type.max_workers or budget, budget))

    # Act ----------------------------------------------------------------------------------
    def _launch_plan(self, result_plan: Plan, budget: int, result: TickResult) -> tuple[int, bool]:
        capacity_failed = False
        for launch in result_plan.launches:
            remaining = min(launch.count, budget)
            while remaining > 0:
                batch = min(remaining, LAUNCH_BATCH)
                nodes, error = self.launch(launch.node_type, batch, serves=launch.serves)
                if nodes:
                    result.launched[launch.node_type] = result.launched.get(
                        launch.node_type, 0
                    ) + len(nodes)
                budget -= len(nodes)
                remaining -= batch
                if error is not None:
                    result.failures.append(str(error))
                    capacity_failed |= isinstance(error, CapacityError)
                    break
        return budget, capacity_failed

    def launch(
        self, node_type: str, count: int, kind: str = NODE_KIND_WORKER, serves: Any = ()
    ) -> tuple[tuple[ProviderNode, ...], ProviderError | None]:
        """Launch ``count`` units of ``node_type`` as ``kind`` (head or worker): the intent
        is recorded before the create call, the nodes carry the cluster's tags and the
        launch request, their states and an event are recorded. Returns the nodes created
        and the error that stopped short of ``count`` (None when all were created)."""
        request_id = uuid.uuid4().hex
        now = self.clock()
        self.store.record_intent(Intent(request_id, node_type, count, now, PENDING_INTENT))
        tags = {TAG_NODE_TYPE: node_type, TAG_NODE_KIND: kind, TAG_LAUNCH_REQUEST: request_id}
        try:
            outcome = self.provider.create_node(
                self.node_config(node_type), tags, count, request_id
            )
        except ProviderError as error:
            self.store.settle_intent(request_id, FAILED_INTENT, detail=str(error))
            self._failed(node_type, error)
            return (), error
        self.store.settle_intent(request_id, LAUNCHED_INTENT, outcome.node_ids)
        for node_id in outcome.node_ids:
            self.store.set_node_state(node_id, node_type, ALLOCATED, now)
        if outcome.offering is not None:
            self.offerings.record_success(outcome.offering)
        head = kind == NODE_KIND_HEAD
        self._event(
            "launched",
            f"launched head {', '.join(outcome.node_ids)} ({node_type})"
            if head
            else f"launched {len(outcome.node_ids)} x {node_type}"
            + (f" (asked {count})" if outcome.partial else "")
            + f" for {_describe(serves)}",
            node_type,
            outcome.node_ids[0] if head and outcome.node_ids else None,
            data={"request_id": request_id, "node_ids": list(outcome.node_ids)},
        )
        for error in outcome.errors:
            self._failed(node_type, error)
        return outcome.nodes, (outcome.errors[-1] if outcome.errors else None)

    def node_config(self, node_type: str) -> dict[str, Any]:
        """The node type's node_config as launched: its market and the agent's boot script."""
        spec = self.config.spec.available_node_types[node_type]
        provider = self.config.spec.provider
        script = agent_script(
            self.config.spec.cluster_name,
            provider.model_dump(),
            self.provider.cloud.node_identity_script,
            provider.agent_package or f"accel-autoscaler=={package_version()}",
            spec.bootstrap_before or (),
            spec.bootstrap_after or (),
            spec.ray_start,
        )
        return self.provider.cloud.with_boot_script(self.config.launch_config(node_type), script)

    def _failed(self, node_type: str, error: ProviderError) -> None:
        record = self.offerings.record_failure(error)
        hint = f"; {record.kind} blocked until {record.until:.0f}" if record else ""
        if record and record.detail:
            hint += f" (needs {record.detail})"
        self._event(
            "failed",
            f"launch of {node_type} failed: {error}{hint}",
            node_type,
            data={
                "code": error.code,
                "kind": error.kind,
                "offering": str(error.offering) if error.offering else None,
            },
        )

    def _retire(self, observation: Observation, result: TickResult) -> None:
        """Terminate orphaned, timed-out and idle nodes (never the head, never below
        min_workers, never one the current demand would need relaunched)."""
        views = observation.views
        now = self.clock()
        reasons: dict[str, str] = {}
        for view in views:
            if view.kind == NODE_KIND_HEAD:
                continue
            if view.node_type not in self.types:
                reasons[view.id] = f"its node type {view.node_type!r} is no longer configured"
                continue
            accelerated = is_accelerator_type(self.types[view.node_type])
            if view.state != RUNNING and now - view.since > timeout_s(view.state, accelerated):
                reasons[view.id] = f"stuck in {view.state} for {now - view.since:.0f}s; replacing"
        reasons.update(self._idle(observation, now, reasons))
        if not reasons:
            return
        acted = self.provider.terminate_nodes(sorted(reasons))
        for node_id in acted:
            view = next(v for v in views if v.id == node_id)
            self.store.set_node_state(node_id, view.node_type, TERMINATING, now)
            view.state = TERMINATING
            self._event(
                "terminated", f"terminated {node_id}: {reasons[node_id]}", view.node_type, node_id
            )
        result.terminated.extend(acted)

    def _idle(
        self, observation: Observation, now: float, taken: Mapping[str, str]
    ) -> dict[str, str]:
        views = observation.views
        alive = defaultdict(int)
        for view in views:
            if view.state != TERMINATING and view.id not in taken:
                alive[view.node_type] += 1
        idle = sorted(
            (
                v
                for v in views
                if v.kind != NODE_KIND_HEAD
                and v.id not in taken
                and v.node_type in self.types
                and v.idle_since is not None
                and now - v.idle_since >= 60 * self.config.idle_timeout_minutes(v.node_type)
            ),
            key=lambda v: (v.idle_since, v.id),
        )
        chosen: dict[str, str] = {}
        for view in idle:
            if alive[view.node_type] <= self.types[view.node_type].min_workers:
                continue
            alive[view.node_type] -= 1
            chosen[view.id] = f"idle for {(now - view.idle_since) / 60:.1f} min"
        if chosen:  # keep idle nodes that pending demand would otherwise relaunch
            without = plan(self.request(observation, frozenset(chosen))).launch_counts()
            with_all = plan(self.request(observation)).launch_counts()
            types_of = {v.id: v.node_type for v in views}
            for node_type, extra in without.items():
                keep = extra - with_all.get(node_type, 0)
                for node_id in [i for i in chosen if types_of[i] == node_type][:keep]:
                    del chosen[node_id]
        return chosen

    # Events -------------------------------------------------------------------------------
    def _event(
        self,
        kind: str,
        message: str,
        node_type: str | None = None,
        node_id: str | None = None,
        data: dict | None = None,
    ) -> None:
        logger.info("%s: %s", kind, message)
        self.store.add_event(Event(self.clock(), kind, message, node_type, node_id, data))


def _state_of(view: NodeView) -> str:
    if view.node.state == CLOUD_PENDING:
        return ALLOCATED
    if view.node.state == CLOUD_RUNNING:
        return RUNNING if view.reported else WAITING_FOR_REPORT
    return TERMINATING


def _full(spec: NodeType, node_id: str, worker: bool = True) -> list[ExistingNode]:
    """A unit not reporting yet: all its capacity, pending."""
    return [
        ExistingNode(
            spec.name,
            spec.host_resources(host),
            pending=True,
            host=host,
            node_id=node_id,
            worker=worker,
        )
        for host in range(spec.hosts)
    ]


def _describe(serves: Any) -> str:
    if not serves:
        return "min_workers"
    return ", ".join(f"{count} x {dict(resources)}" for resources, count in serves)
