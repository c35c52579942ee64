"""The reconcile loop: observe the cloud, settle, plan, act. One call to ``tick`` is one round.

* **Observe** (read-only): the cloud's tags are the truth. Owned nodes are listed, launch
  intents recorded before a create call are matched with the instances carrying their
  request id, each node's lifecycle state is worked out, and the agents' reports are read.
  With a Ray cluster attached, Ray's pending work, nodes and idle times are read too (a node
  whose type runs ``ray start`` is pending capacity until it joins Ray). Read commands
  (``status``, ``plan``, every ``--json``) stop here.
* **Sync**: what observing found is written down: intents settled, node states recorded,
  vanished nodes forgotten, adoptions and under-reporting logged.
* **Plan**: the pure planner gets the recorded demand and Ray's, every node (reported or
  joined ones with their true free capacity, the rest as pending capacity), and the
  offerings known to be out; Ray's ``request_resources`` constraints are planned first
  against node totals.
* **Act**: launches go out in batches under a per-tick budget through one launch path (the
  head's too), each recorded as an intent first; capacity failures mark the offering and the
  round re-plans around it; idle, timed-out and orphaned nodes are terminated (idle Ray
  nodes drained through Ray first). A node that timed out before coming up is terminated
  with the last lines of its console as evidence, and a node type whose nodes keep failing
  the same way is held, no longer replaced (``autoscaler.boot_failures``). Every decision
  lands in the event log, and what we do is reported back to Ray.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from accel.allocation import SHARE_UNITS
from autoscaler.agent import package_version
from autoscaler.boot_failures import (
    BOOT_LOG,
    BOOT_STATES,
    CAUSES,
    CONSOLE_READS_PER_ROUND,
    NOT_READ,
    Console,
    Streak,
    cause_of,
    config_fingerprint,
    read_console,
    record_failure,
)
from autoscaler.bootstrap import agent_script, node_package
from autoscaler.config import ClusterConfig
from autoscaler.demand import combine, parse_demand
from autoscaler.lifecycle import (
    ALLOCATED,
    REQUESTED,
    RUNNING,
    TERMINATING,
    WAITING_FOR_REPORT,
    timeout_s,
)
from autoscaler.offerings import UnavailableOfferings
from autoscaler.planner import Demand, ExistingNode, NodeType, Plan, PlanRequest
from autoscaler.planner.aliases import plan_canonical
from autoscaler.planner.items import is_accelerator_type
from autoscaler.ray_cluster.client import RayUnavailableError
from autoscaler.ray_cluster.report import (
    FailedLaunch,
    Infeasible,
    PendingLaunch,
    PendingNode,
    ScalingReport,
)
from autoscaler.ray_cluster.state import DRAINING, RayNode, RayState, parse_instance_key
from autoscaler.report import NodeReport, decode
from autoscaler.report_channel import ReportTarget
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

if TYPE_CHECKING:
    from autoscaler.ray_cluster.client import RayCluster

logger = logging.getLogger(__name__)

LAUNCH_BATCH = 50
"""Units per create call."""
LAUNCHES_PER_TICK = 500
"""Units launched per round at most (the global rate limit)."""
REPLAN_ROUNDS = 3
"""Re-plans within one round after capacity failures."""
BOOTING = frozenset({ALLOCATED, WAITING_FOR_REPORT})
RECENT_FAILURES_S = 600.0
"""Launch failures reported to Ray for this long."""


@dataclass
class NodeView:
    """One owned node as this round sees it."""

    node: ProviderNode
    node_type: str
    kind: str
    state: str
    since: float
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
    ray: RayState | None = None
    """Ray's view this round (None without a Ray cluster)."""
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
    held: list[Streak] = field(default_factory=list)
    """Node types held after their nodes repeatedly failed to come up (not replaced)."""
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
        ray: RayCluster | None = None,
        report: ReportTarget | None = None,
    ) -> None:
        self.config = config
        self.ray = ray
        self.report = report
        """Where launched nodes report (the monitor's endpoint and the cluster's secret)."""
        self.provider = provider
        self.store = store
        self.clock = clock
        self.launches_per_tick = launches_per_tick
        self.offerings = UnavailableOfferings(clock, store.offerings(), store.save_offering)
        self.types = {t.name: t for t in config.node_types()}

    # One round ----------------------------------------------------------------------------
    def tick(self) -> TickResult:
        """One round. Raises :class:`RayUnavailableError` (after logging it) before acting
        when Ray cannot be read: nothing is launched from stale demand, nothing retired."""
        started = time.perf_counter()
        observation = self.sync()
        result = TickResult(plan=Plan((), (), 0.0, 0.0), nodes=observation.views)
        self._retire(observation, result)
        result.held = list(self.holds().values())
        result.plan = self.current_plan(observation)
        budget = self.launches_per_tick
        for _ in range(REPLAN_ROUNDS):
            budget, capacity_failed = self._launch_plan(result.plan, budget, result)
            if not capacity_failed or budget <= 0:
                break
            observation = self.sync()
            result.plan = self.current_plan(observation)
            result.nodes = observation.views
        self._report_to_ray(observation, result)
        result.seconds = time.perf_counter() - started
        return result

    # Observe (read-only) ----------------------------------------------------------------
    def observe(self) -> Observation:
        """Owned nodes with their lifecycle state and reports, intents matched; no writes."""
        now = self.clock()
        ray_state = self._read_ray()
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
        in_ray = _ray_nodes_by_instance(ray_state)
        sent = self.store.reports()  # what agents sent to the monitor's report endpoint
        for node in nodes:
            view = self._view(node, now, in_ray, sent.get(node.id, {}))
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
            ray=ray_state,
            waiting_intents=tuple(waiting),
            found_intents=tuple(found),
            expired_intents=tuple(expired),
            state_changes=tuple(changes),
            adopted=tuple(adopted),
            newly_running=tuple(newly_running),
            forgotten=tuple(sorted(set(known) - listed)),
        )

    def _read_ray(self) -> RayState | None:
        if self.ray is None:
            return None
        try:
            return self.ray.read()
        except RayUnavailableError as err:
            logger.warning("round failed: %s", err)
            raise

    def _view(
        self,
        node: ProviderNode,
        now: float,
        in_ray: Mapping[tuple[str, int], RayNode],
        sent: Mapping[int, NodeReport],
    ) -> NodeView:
        hosts = range(max(1, len(node.hosts)))
        reports = {host: report for host in hosts if (report := _newest(node, host, sent))}
        node_type = node.tags.get(TAG_NODE_TYPE, "")
        spec = self.config.spec.available_node_types.get(node_type)
        ray_nodes = {host: in_ray[node.id, host] for host in hosts if (node.id, host) in in_ray}
        idle = [n.idle_s for n in ray_nodes.values() if n.idle]
        view = NodeView(
            node,
            node_type,
            node.tags.get(TAG_NODE_KIND, NODE_KIND_WORKER),
            ALLOCATED,
            now,
            reports,
            joins_ray=self.ray is not None and spec is not None and spec.ray_start,
            ray_nodes=ray_nodes,
            ray_idle_since=now - min(idle) if idle and len(idle) == len(ray_nodes) else None,
        )
        view.state = _state_of(view)
        return view

    # Sync (writes what observing found) -------------------------------------------------
    def sync(self) -> Observation:
        """Observe, then record it: intents settled, node states, events."""
        try:
            observation = self.observe()
        except RayUnavailableError as err:
            self._event("ray-unavailable", f"round skipped, nothing launched or retired: {err}")
            raise
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
        self._came_up([c for c in observation.state_changes if c.state == RUNNING])
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
        seen = [(f"host {h} reports", r.resources, h) for h, r in view.reports.items()]
        seen += [(f"host {h} joined Ray with", n.total, h) for h, n in view.ray_nodes.items()]
        for source, resources, host in seen:
            promised = spec.host_resources(host)
            for name in spec.devices:
                have = resources.get(name, 0.0)
                if round(have * SHARE_UNITS) < round(promised.get(name, 0.0) * SHARE_UNITS):
                    self._event(
                        "under-reported",
                        f"{view.id} {source} {name} {have:g} but {view.node_type} "
                        f"promised {promised[name]:g}; planning with what it reports",
                        view.node_type,
                        view.id,
                    )

    # Plan ---------------------------------------------------------------------------------
    def current_plan(
        self, observation: Observation | None = None, leave_out: frozenset[str] = frozenset()
    ) -> Plan:
        """The plan for the cluster as ``observation`` shows it (observed now if None),
        without the nodes in ``leave_out``. Ray's ``request_resources`` constraints are
        planned first against node totals (used or not), as Ray's own autoscaler does; the
        units they launch are then pending capacity for the pending demand."""
        observation = observation or self.observe()
        request = self.request(observation, leave_out)
        constraints = observation.ray.constraints if observation.ray else Demand()
        if not constraints.bundles and not constraints.placement_groups:
            return plan_canonical(request)
        totals = self.request(observation, leave_out, totals=True)
        held = plan_canonical(replace(totals, demand=constraints))
        extra = [
            node
            for launch in held.launches
            for unit in range(launch.count)
            for node in _full(self.types[launch.node_type], f"held:{launch.node_type}:{unit}")
        ]
        main = plan_canonical(replace(request, existing=(*request.existing, *extra)))
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
        leave_out: frozenset[str] = frozenset(),
        totals: bool = False,
    ) -> PlanRequest:
        """The planner's input: recorded and Ray's demand, capacity (reported or joined,
        booting, being launched; with ``totals``, each node's whole capacity), the node types
        with what the unavailable offerings allow."""
        existing: list[ExistingNode] = []
        for view in observation.views:
            if (
                view.id in leave_out
                or view.state == TERMINATING
                or view.node_type not in self.types
            ):
                continue
            existing.extend(self._capacity(view, totals))
        for intent in observation.waiting_intents:
            spec = self.types.get(intent.node_type)
            if spec is not None:
                for unit in range(intent.count):
                    existing.extend(_full(spec, f"intent:{intent.request_id}:{unit}"))
        demand = parse_demand(self.store.demand())
        node_types = [self._available(t) for t in self.types.values()]
        if observation.ray is not None:
            demand = combine(demand, observation.ray.demand)
            outside_types, outside = _outside(observation, self.types, totals)
            node_types += outside_types
            existing += outside
        return PlanRequest(
            node_types=tuple(node_types),
            demand=demand,
            existing=tuple(existing),
            limits=self.config.limits(),
        )

    def _capacity(self, view: NodeView, totals: bool = False) -> list[ExistingNode]:
        spec = self.types[view.node_type]
        worker = view.kind != NODE_KIND_HEAD
        if totals or not view.reported or (view.joins_ray and not view.joined):
            return _full(spec, view.id, worker, pending=not totals)
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

    def _available(self, node_type: NodeType) -> NodeType:
        hold = self.holds().get(node_type.name)
        if hold is not None:
            return replace(node_type, available=False, unavailable_reason=hold.reason())
        if node_type.offering is None:
            return node_type
        budget = self.offerings.budget(node_type.offering)
        if budget is None:
            return node_type
        if budget == 0:
            return replace(node_type, available=False)
        return replace(node_type, max_workers=min(node_type.max_workers or budget, budget))

    # Boot failures ------------------------------------------------------------------------
    def streaks(self) -> dict[str, Streak]:
        """Each node type's current streak of boot failures (held or not)."""
        return {
            name: Streak.from_json(name, body) for name, body in self.store.boot_failures().items()
        }

    def holds(self) -> dict[str, Streak]:
        """The node types held now (not launched, not replaced), for their current config."""
        now = self.clock()
        return {
            name: streak
            for name, streak in self.streaks().items()
            if name in self.types and streak.held(now, self._fingerprint(name))
        }

    def _fingerprint(self, node_type: str) -> str:
        return config_fingerprint(self.config, node_type)

    def _came_up(self, changes: list[NodeStateChange]) -> None:
        """Nodes came up: their types' streaks end (and holds, saying so)."""
        streaks = self.streaks() if changes else {}
        for change in changes:
            streak = streaks.pop(change.node_type, None)
            if streak is None:
                continue
            self.store.save_boot_failures(change.node_type, None)
            if streak.held_until is None or streak.held_until <= self.clock():
                continue
            self._event(
                "released",
                f"replacing {change.node_type} again: {change.node_id} came up "
                f"(it was held after {streak.what})",
                change.node_type,
                change.node_id,
            )

    def _boot_failed(
        self, view: NodeView, cause: str, stuck_s: float, console: Console
    ) -> tuple[str, Streak | None]:
        """Record that ``view`` never came up: what its termination event adds, and the
        streak when this failure starts a hold (to be said after the termination)."""
        streak, starts_hold = record_failure(
            self.streaks().get(view.node_type),
            view.node_type,
            cause,
            view.id,
            stuck_s,
            console,
            self._fingerprint(view.node_type),
            self.clock(),
        )
        self.store.save_boot_failures(view.node_type, streak.to_json())
        if streak.held_until is None:
            return "replacing", None
        return f"not replacing: {view.node_type} is held ({streak.what})", (
            streak if starts_hold else None
        )

    def _held(self, streak: Streak) -> None:
        hours = (streak.held_until - self.clock()) / 3600
        self._event(
            "held",
            f"stopped replacing {streak.node_type}: {streak.what}; {streak.console.describe()}; "
            f"held for {hours:g}h (until {_utc(streak.held_until)}), or until its config "
            "changes or `down`; check the node's permissions (instance profile or service "
            f"account), its image, and the boot script's log {BOOT_LOG}",
            streak.node_type,
            streak.last_node_id,
            data={
                "cause": streak.cause,
                "failures": streak.count,
                "held_until": streak.held_until,
                "console": list(streak.console.lines),
            },
        )

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
                self.node_config(node_type, kind), tags, count, request_id
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

    def node_config(self, node_type: str, kind: str = NODE_KIND_WORKER) -> dict[str, Any]:
        """The node type's node_config as launched: its market and the boot script (the
        agent; with ``ray_start``, joining Ray, or on the head starting Ray and the monitor)."""
        spec = self.config.spec.available_node_types[node_type]
        provider = self.config.spec.provider
        head = kind == NODE_KIND_HEAD
        package = provider.agent_package or node_package(
            package_version(), head, None if self.report else self.provider.cloud.name
        )
        script = agent_script(
            self.config.spec.cluster_name,
            provider.model_dump(),
            self.provider.cloud.node_identity_script,
            package,
            spec.bootstrap_before or (),
            spec.bootstrap_after or (),
            spec.ray_start,
            node_type,
            self.ray.address if self.ray else self.config.spec.ray_address,
            head_config=self.config.to_yaml() if head else None,
            report=self.report,
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
        never_up: dict[str, NodeView] = {}
        for view in views:
            if view.kind == NODE_KIND_HEAD:
                continue
            if view.node_type not in self.types:
                reasons[view.id] = f"its node type {view.node_type!r} is no longer configured"
                continue
            accelerated = is_accelerator_type(self.types[view.node_type])
            if view.state != RUNNING and now - view.since > timeout_s(view.state, accelerated):
                reasons[view.id] = f"stuck in {view.state} for {now - view.since:.0f}s"
                if view.state in BOOT_STATES:
                    never_up[view.id] = view
                else:
                    reasons[view.id] += "; replacing"
        reasons.update(self._drained(observation, self._idle(observation, now, reasons)))
        if not reasons:
            return
        consoles = {  # read before terminating: a deleted VM's serial port is gone
            node_id: read_console(self.provider, node_id)
            if n < CONSOLE_READS_PER_ROUND
            else NOT_READ
            for n, node_id in enumerate(sorted(never_up, key=lambda i: (never_up[i].since, i)))
        }
        acted = self.provider.terminate_nodes(sorted(reasons))
        for node_id in acted:
            view = next(v for v in views if v.id == node_id)
            self.store.set_node_state(node_id, view.node_type, TERMINATING, now)
            data, hold = None, None
            if node_id in never_up:
                stuck_s, console = now - view.since, consoles[node_id]
                cause = cause_of(view.state, view.reported)
                then, hold = self._boot_failed(view, cause, stuck_s, console)
                reasons[node_id] += f" ({CAUSES[cause]}); {then}; {console.describe()}"
                data = {
                    "cause": cause,
                    "stuck_s": stuck_s,
                    "console": list(console.lines),
                    "console_error": console.error,
                }
            view.state = TERMINATING
            self._event(
                "terminated",
                f"terminated {node_id}: {reasons[node_id]}",
                view.node_type,
                node_id,
                data=data,
            )
            if hold is not None:
                self._held(hold)
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
            without = self.current_plan(observation, frozenset(chosen)).launch_counts()
            with_all = self.current_plan(observation).launch_counts()
            types_of = {v.id: v.node_type for v in views}
            for node_type, extra in without.items():
                keep = extra - with_all.get(node_type, 0)
                for node_id in [i for i in chosen if types_of[i] == node_type][:keep]:
                    del chosen[node_id]
        return chosen

    def _drained(self, observation: Observation, idle: dict[str, str]) -> dict[str, str]:
        """The idle nodes Ray agreed to drain (all of them without Ray): a rejection keeps
        the node, and so does a Ray that cannot be asked."""
        views = {v.id: v for v in observation.views}
        drained = {}
        for node_id, reason in idle.items():
            view = views[node_id]
            try:
                answers = [
                    self.ray.drain(ray_node.node_id, f"accel-autoscaler: {reason}")
                    for ray_node in view.ray_nodes.values()
                ]
            except RayUnavailableError as err:
                self._event("drain-failed", f"kept {node_id}: {err}", view.node_type, node_id)
                continue
            refused = [
                message or "no reason given" for accepted, message in answers if not accepted
            ]
            if refused:
                self._event(
                    "drain-rejected",
                    f"kept {node_id}: Ray refused to drain it ({'; '.join(refused)})",
                    view.node_type,
                    node_id,
                )
                continue
            drained[node_id] = reason + (" (drained by Ray)" if answers else "")
        return drained

    # Report to Ray ------------------------------------------------------------------------
    def _report_to_ray(self, observation: Observation, result: TickResult) -> None:
        """Our launches, boots, failures and infeasible demand, for ``ray status``."""
        if self.ray is None:
            return
        now = self.clock()
        instance_type = {
            name: t.offering.instance_type if t.offering else "" for name, t in self.types.items()
        }
        launching = [
            PendingLaunch(i.node_type, instance_type.get(i.node_type, ""), i.count, i.created_at)
            for i in observation.waiting_intents
        ] + [
            PendingLaunch(name, instance_type.get(name, ""), count, now)
            for name, count in result.launched.items()
        ]
        booting = [
            PendingNode(
                v.id,
                v.node_type,
                v.node.instance_type,
                v.node.internal_ip or "",
                f"{v.state}: launched, not yet in Ray",
            )
            for v in result.nodes
            if v.joins_ray and not v.joined and v.state != TERMINATING
        ]
        failed = [
            FailedLaunch(
                e.node_type or "", instance_type.get(e.node_type or "", ""), 1, e.message, e.at
            )
            for e in self.store.events(200)
            if e.kind == "failed" and now - e.at <= RECENT_FAILURES_S
        ]
        infeasible = [Infeasible(i.resources, i.count, i.reason) for i in result.plan.infeasible]
        try:
            self.ray.report(
                ScalingReport(tuple(launching), tuple(booting), tuple(failed), tuple(infeasible))
            )
        except RayUnavailableError as err:
            self._event("ray-unavailable", f"could not report to Ray: {err}")

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


def _newest(node: ProviderNode, host: int, sent: Mapping[int, NodeReport]) -> NodeReport | None:
    """A host's latest report: sent to the monitor's endpoint, or written into its tags."""
    found = [r for r in (sent.get(host), decode(node.tags, host)) if r is not None]
    return max(found, key=lambda report: report.reported_at, default=None)


def _utc(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(at))


def _state_of(view: NodeView) -> str:
    if view.node.state == CLOUD_PENDING:
        return ALLOCATED
    if view.node.state == CLOUD_RUNNING:
        joined = view.joined or not view.joins_ray
        return RUNNING if view.reported and joined else WAITING_FOR_REPORT
    return TERMINATING


def _full(
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


def _ray_nodes_by_instance(state: RayState | None) -> dict[tuple[str, int], RayNode]:
    """Ray nodes that name their cloud instance, by (cloud node id, host)."""
    if state is None:
        return {}
    return {parse_instance_key(n.instance_id): n for n in state.nodes if n.instance_id}


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


def _describe(serves: Any) -> str:
    if not serves:
        return "min_workers"
    return ", ".join(f"{count} x {dict(resources)}" for resources, count in serves)
