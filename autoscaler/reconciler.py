"""One reconcile round (``tick``): observe, record, decide, act.

1. **Observe** (read-only, ``autoscaler.reconcile.observe``): one immutable observation of
   the cloud's nodes, their lifecycle records, intents, running operations and Ray.
   Read commands (``status``, ``plan``, every ``--json``) stop here.
2. **Sync**: what the observation found is written down: intents settled (a create
   operation that failed blocks what its error covers), node records with their transitions
   (each an event with its reason), vanished nodes forgotten, adoptions logged.
3. **Decide**: sub-reconcilers each read the observation and return actions: ``cleanup``
   (what the cloud stopped, preempted or failed: deleted now), ``liveness`` (nodes that never
   came up), ``disruption`` (idle nodes, drained through Ray), ``launch`` (what the plan
   needs, the plan routed around blocks and holds).
4. **Act** (``autoscaler.reconcile.apply``): deletes, then launches; a capacity failure
   blocks the offering and the round plans again around it. What we do is reported to Ray.

No step waits on the cloud: creates and deletes the cloud has not finished are left running
and looked at in later rounds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from accel.allocation import SHARE_UNITS
from autoscaler.boot_failures import Streak
from autoscaler.config import ClusterConfig
from autoscaler.lifecycle import RUNNING, TERMINATING
from autoscaler.offerings import UnavailableOfferings
from autoscaler.planner import Plan, PlanRequest
from autoscaler.planner.memo import PlanMemo
from autoscaler.ray_cluster.client import RayUnavailableError
from autoscaler.reconcile.apply import Actuator
from autoscaler.reconcile.cleanup import cleanup
from autoscaler.reconcile.context import Context
from autoscaler.reconcile.disruption import disruption
from autoscaler.reconcile.events import EventLog, transition_event, vanished_event
from autoscaler.reconcile.holds import BootHolds
from autoscaler.reconcile.launch import LAUNCHES_PER_TICK, launches
from autoscaler.reconcile.liveness import liveness
from autoscaler.reconcile.observe import NodeView, Observation, Observer
from autoscaler.reconcile.planning import Planning
from autoscaler.reconcile.ray_report import scaling_report
from autoscaler.report_channel import ReportTarget
from autoscaler.state import (
    FAILED_INTENT,
    LAUNCHED_INTENT,
    PENDING_INTENT,
    PREFLIGHT_EVENT,
    Event,
    StateStore,
)
from providers.base import NODE_KIND_HEAD, NODE_KIND_WORKER, NodeProvider, ProviderNode
from providers.errors import AccessDeniedError, CapacityError, ProviderError, QuotaError

if TYPE_CHECKING:
    from autoscaler.ray_cluster.client import RayCluster

logger = logging.getLogger(__name__)

REPLAN_ROUNDS = 3
"""Re-plans within one round after failures that block an offering."""
BLOCKING = (CapacityError, QuotaError, AccessDeniedError)
"""Failures that block what they cover: the same round plans around them."""

__all__ = ["NodeView", "Observation", "Reconciler", "TickResult"]


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
    waiting_for: str | None = None
    """Why nothing was launched this round, when it is the cluster itself (no head)."""
    plans_made: int = 0
    """Plans this round made, and (``plans_reused``) handed back from earlier rounds or
    from itself (:mod:`~autoscaler.planner.memo`)."""
    plans_reused: int = 0


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
        self.provider = provider
        self.store = store
        self.clock = clock
        self.launches_per_tick = launches_per_tick
        self.offerings = UnavailableOfferings(clock, store.offerings(), store.save_offering)
        self.types = {t.name: t for t in config.node_types()}
        self.memo = PlanMemo()
        self.event = EventLog(store, clock)
        self.boot = BootHolds(config, store, clock, self.event)
        context = Context(config, provider, store, clock, ray, report)
        self.observer = Observer(context)
        self.actuator = Actuator(context, self.offerings, self.boot, self.event)

    # One round ----------------------------------------------------------------------------
    def tick(self) -> TickResult:
        """One round. Raises :class:`RayUnavailableError` (after logging it) before acting
        when Ray cannot be read: nothing is launched from stale demand, nothing retired.
        Rounds of monitors sharing this state take turns (:meth:`StateStore.round_lock`)."""
        with self.store.round_lock():
            return self._round()

    def _round(self) -> TickResult:
        started = time.perf_counter()
        made, reused = self.memo.made, self.memo.reused
        observation = self.sync()
        result = TickResult(plan=Plan((), (), 0.0, 0.0), nodes=list(observation.views))
        observation = self._retire(observation, result)
        result.held = list(self.holds().values())
        budget = 0 if self._headless(observation, result) else self.launches_per_tick
        for _ in range(REPLAN_ROUNDS):
            result.plan = self.current_plan(observation)
            budget, blocked = self._launch(result.plan, budget, result)
            if not blocked or budget <= 0:
                break
            observation = self.sync()
            result.nodes = list(observation.views)
        self._report_to_ray(observation, result)
        result.plans_made = self.memo.made - made
        result.plans_reused = self.memo.reused - reused
        result.seconds = time.perf_counter() - started
        return result

    def _headless(self, observation: Observation, result: TickResult) -> bool:
        """``up`` failed its preflight, so the cluster has no head: nothing is launched
        (workers of a cluster with no head would bill and serve nothing)."""
        if self.config.head_node_type is None or self.ray is not None:
            return False
        if any(v.kind == NODE_KIND_HEAD and v.state != TERMINATING for v in observation.views):
            return False
        checked = self.store.last_event(PREFLIGHT_EVENT)
        if checked is None or (checked.data or {}).get("ok", True):
            return False
        result.waiting_for = (
            f"no head node and `up` failed its preflight ({checked.message}): nothing is "
            "launched until `autoscale up` succeeds"
        )
        logger.warning(result.waiting_for)
        return True

    def _retire(self, observation: Observation, result: TickResult) -> Observation:
        """Cleanup, liveness and disruption decide; their deletes are applied; the
        observation with those nodes terminating."""
        timeout = self.observer.timeout
        deletes = cleanup(observation, self.types, timeout)
        deletes += liveness(observation, self.types, timeout, self.provider)
        taken = frozenset(d.view.id for d in deletes)
        deletes += disruption(
            observation,
            self.config,
            self.types,
            taken,
            lambda leave_out: self.current_plan(observation, leave_out),
        )
        records = self.actuator.delete(deletes)
        result.terminated.extend(sorted(records))
        if not records:
            return observation
        views = tuple(
            replace(v, record=records[v.id]) if v.id in records else v for v in observation.views
        )
        result.nodes = list(views)
        return replace(observation, views=views)

    def _launch(self, plan: Plan, budget: int, result: TickResult) -> tuple[int, bool]:
        """The plan's launches (a type's further batches skipped after a failure or a create
        left running); the budget left and whether a failure blocked something."""
        blocked = False
        stopped: set[str] = set()
        for action in launches(plan, budget):
            if action.node_type in stopped:
                continue
            launched = self.actuator.launch(action.node_type, action.count, serves=action.serves)
            units = len(launched.nodes) + launched.in_progress
            if units:
                result.launched[action.node_type] = result.launched.get(action.node_type, 0) + units
            budget -= units
            if launched.error is not None:
                result.failures.append(str(launched.error))
                blocked |= isinstance(launched.error, BLOCKING)
            if launched.error is not None or launched.in_progress:
                stopped.add(action.node_type)
        return budget, blocked

    # Observe and record -------------------------------------------------------------------
    def observe(self) -> Observation:
        """The cluster now (no writes)."""
        return self.observer.observe()

    def sync(self) -> Observation:
        """Observe, then record it: intents settled, node records and their transitions
        (events), vanished nodes forgotten."""
        try:
            observation = self.observe()
        except RayUnavailableError as err:
            self.event("ray-unavailable", f"round skipped, nothing launched or retired: {err}")
            raise
        self._settle(observation)
        events = [transition_event(t.before, t.after) for t in observation.transitions]
        events += [vanished_event(r, observation.now) for r in observation.forgotten]
        events += [
            Event(
                observation.now,
                "adopted",
                f"adopted {view.id} ({view.node_type}) found in the cloud",
                view.node_type,
                view.id,
            )
            for view in observation.adopted
        ]
        self.store.save_node_records(t.after for t in observation.transitions)
        self.event.many([e for e in events if e is not None])
        self.boot.came_up(
            [
                (t.after.node_id, t.after.node_type)
                for t in observation.transitions
                if t.after.state == RUNNING
            ]
        )
        views = {v.id: v for v in observation.views}
        for transition in observation.newly_running:
            self._check_reported_capacity(views[transition.after.node_id])
        self.store.forget_nodes(r.node_id for r in observation.forgotten)
        return observation

    def _settle(self, observation: Observation) -> None:
        for intent, ids in observation.found_intents:
            self.store.settle_intent(intent.request_id, LAUNCHED_INTENT, ids)
            if not intent.operations:  # a crash: the create call's answer was never seen
                self.event(
                    "resolved",
                    f"launch {intent.request_id} found in the cloud after a "
                    f"restart: {len(ids)} x {intent.node_type}",
                    intent.node_type,
                )
        for intent in observation.expired_intents:
            self.store.settle_intent(intent.request_id, FAILED_INTENT, detail="never appeared")
        for failed in observation.failed_operations:
            self.store.settle_intent(
                failed.intent.request_id, FAILED_INTENT, detail=str(failed.error)
            )
            self.actuator.failed(failed.intent.node_type, failed.error)
        for intent in observation.finished_operations:
            self.store.settle_intent(
                intent.request_id, PENDING_INTENT, intent.node_ids, intent.detail
            )

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
                    self.event(
                        "under-reported",
                        f"{view.id} {source} {name} {have:g} but {view.node_type} "
                        f"promised {promised[name]:g}; planning with what it reports",
                        view.node_type,
                        view.id,
                    )

    # Plan ---------------------------------------------------------------------------------
    def planning(self) -> Planning:
        return Planning(self.config, self.store, self.offerings, self.holds(), self.memo.plan)

    def current_plan(
        self, observation: Observation | None = None, leave_out: frozenset[str] = frozenset()
    ) -> Plan:
        """The plan for the cluster as ``observation`` shows it (observed now if None),
        without the nodes in ``leave_out``."""
        return self.planning().plan(observation or self.observe(), leave_out)

    def request(self, observation: Observation, totals: bool = False) -> PlanRequest:
        """The planner's input for ``observation``."""
        return self.planning().request(observation, self.types, totals=totals)

    # Holds --------------------------------------------------------------------------------
    def streaks(self) -> dict[str, Streak]:
        return self.boot.streaks()

    def holds(self) -> dict[str, Streak]:
        return self.boot.holds()

    # Launch (the head's too) -------------------------------------------------------------
    def launch(
        self, node_type: str, count: int, kind: str = NODE_KIND_WORKER, serves: Any = ()
    ) -> tuple[tuple[ProviderNode, ...], ProviderError | None]:
        """Launch ``count`` units of ``node_type`` as ``kind``; the nodes listed now and the
        error that stopped short of ``count``."""
        launched = self.actuator.launch(node_type, count, kind, serves)
        return launched.nodes, launched.error

    def node_config(self, node_type: str, kind: str = NODE_KIND_WORKER) -> dict[str, Any]:
        return self.actuator.node_config(node_type, kind)

    # Report to Ray ------------------------------------------------------------------------
    def _report_to_ray(self, observation: Observation, result: TickResult) -> None:
        """Our launches, boots, failures and infeasible demand, for ``ray status``."""
        if self.ray is None:
            return
        report = scaling_report(
            observation,
            result.nodes,
            result.plan,
            result.launched,
            self.types,
            self.store.events(200),
        )
        try:
            self.ray.report(report)
        except RayUnavailableError as err:
            self.event("ray-unavailable", f"could not report to Ray: {err}")
