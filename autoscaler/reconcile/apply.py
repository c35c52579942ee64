"""The one step that acts: deletes (drained through Ray first where asked) and launches
(the head's too: one launch path), each recorded in the node's lifecycle and the event log.

A launch records its intent before the create call, so a crash is resolved from the cloud's
tags; it goes only to the zones no block covers; a create the cloud has not finished stays
pending capacity with its operations, looked at again in later rounds; a failure blocks what
its error covers (``autoscaler.offerings``) and says so in the cloud's words.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autoscaler.boot_failures import CAUSES
from autoscaler.bootstrap import agent_script, node_package
from autoscaler.lifecycle import (
    REQUESTED,
    TERMINATING,
    NodeRecord,
    observed_state,
    reason_for,
)
from autoscaler.offerings import EVERY, UnavailableOfferings
from autoscaler.ray_cluster.client import RayUnavailableError
from autoscaler.reconcile.actions import Delete
from autoscaler.reconcile.context import Context
from autoscaler.reconcile.events import EventLog
from autoscaler.reconcile.holds import BootHolds
from autoscaler.release import package_version
from autoscaler.state import FAILED_INTENT, LAUNCHED_INTENT, PENDING_INTENT, Intent
from providers.base import (
    NODE_KIND_HEAD,
    NODE_KIND_WORKER,
    TAG_LAUNCH_REQUEST,
    TAG_NODE_KIND,
    TAG_NODE_TYPE,
    LaunchResult,
    ProviderNode,
)
from providers.errors import ProviderError

if TYPE_CHECKING:
    pass


@dataclass(frozen=True)
class Launched:
    """What one create call gave: nodes listed now, units still being created, the error
    that stopped it short."""

    nodes: tuple[ProviderNode, ...]
    in_progress: int = 0
    error: ProviderError | None = None


class Actuator:
    """Carries out one cluster's actions through its provider."""

    def __init__(
        self,
        context: Context,
        offerings: UnavailableOfferings,
        holds: BootHolds,
        event: EventLog,
    ) -> None:
        self.context = context
        self.offerings = offerings
        self.holds = holds
        self.event = event

    # Deleting -----------------------------------------------------------------------------
    def delete(self, deletes: Sequence[Delete]) -> dict[str, NodeRecord]:
        """Delete the nodes (a drain Ray refuses keeps the node); their records, moved to
        terminating, by id."""
        wanted = {d.view.id: d for d in deletes if not d.drain or self._drained(d)}
        if not wanted:
            return {}
        acted = self.context.provider.terminate_nodes(sorted(wanted))
        now = self.context.clock()
        records, holds = {}, []
        for node_id in acted:
            action = wanted[node_id]
            view, reason, data = action.view, action.reason, None
            if action.drain and view.ray_nodes:
                reason += " (drained by Ray)"
            failure = action.boot_failure
            if failure is not None:
                then, hold = self.holds.failed(view, failure)
                reason += f" ({CAUSES[failure.cause]}); {then}; {failure.console.describe()}"
                data = {
                    "cause": failure.cause,
                    "stuck_s": failure.stuck_s,
                    "console": list(failure.console.lines),
                    "console_error": failure.console.error,
                }
                holds += [hold] if hold is not None else []
            records[node_id] = view.record.moved(TERMINATING, now, reason)
            self.event(
                "terminated", f"terminated {node_id}: {reason}", view.node_type, node_id, data
            )
        self.context.store.save_node_records(records.values())
        for streak in holds:
            self.holds.say_held(streak)
        return records

    def _drained(self, action: Delete) -> bool:
        """Ray agreed to drain the node's hosts (no Ray: nothing to ask); a rejection or a
        Ray that cannot be asked keeps the node."""
        view = action.view
        if self.context.ray is None:
            return True
        try:
            answers = [
                self.context.ray.drain(ray_node.node_id, f"accel-autoscaler: {action.reason}")
                for ray_node in view.ray_nodes.values()
            ]
        except RayUnavailableError as err:
            self.event("drain-failed", f"kept {view.id}: {err}", view.node_type, view.id)
            return False
        refused = [message or "no reason given" for accepted, message in answers if not accepted]
        if refused:
            self.event(
                "drain-rejected",
                f"kept {view.id}: Ray refused to drain it ({'; '.join(refused)})",
                view.node_type,
                view.id,
            )
            return False
        return True

    # Launching ----------------------------------------------------------------------------
    def launch(
        self, node_type: str, count: int, kind: str = NODE_KIND_WORKER, serves: Any = ()
    ) -> Launched:
        """Launch ``count`` units of ``node_type`` as ``kind`` (head or worker) into the
        zones no block covers: the intent is recorded before the create call, the nodes
        carry the cluster's tags and the launch request, their records and an event are
        stored."""
        request_id = uuid.uuid4().hex
        now = self.context.clock()
        self.context.store.record_intent(Intent(request_id, node_type, count, now, PENDING_INTENT))
        tags = {TAG_NODE_TYPE: node_type, TAG_NODE_KIND: kind, TAG_LAUNCH_REQUEST: request_id}
        try:
            outcome = self.context.provider.create_node(
                self._unblocked(node_type, self.node_config(node_type, kind)),
                tags,
                count,
                request_id,
            )
        except ProviderError as error:
            self.context.store.settle_intent(request_id, FAILED_INTENT, detail=str(error))
            self.failed(node_type, error)
            return Launched((), 0, error)
        status = PENDING_INTENT if outcome.operations else LAUNCHED_INTENT
        self.context.store.settle_intent(
            request_id, status, outcome.node_ids, "", outcome.operations
        )
        self.context.store.save_node_records(
            NodeRecord(
                node.id,
                node_type,
                kind,
                REQUESTED,
                now,
                offering=f"{node.instance_type}/{node.zone or 'any zone'}/{node.market}",
                request=request_id,
            ).moved(
                state := observed_state(node, up=False),
                now,
                f"launched for {_describe(serves, kind)}; {reason_for(node, state)}",
            )
            for node in outcome.nodes
        )
        if outcome.offering is not None and outcome.nodes:
            self.offerings.record_success(outcome.offering)
        self.event(
            "launched",
            self._launched_message(node_type, kind, count, serves, outcome),
            node_type,
            outcome.node_ids[0] if kind == NODE_KIND_HEAD and outcome.node_ids else None,
            data={
                "request_id": request_id,
                "node_ids": list(outcome.node_ids),
                "in_progress": outcome.in_progress,
            },
        )
        for error in outcome.errors:
            self.failed(node_type, error)
        error = outcome.errors[-1] if outcome.errors and not outcome.in_progress else None
        return Launched(outcome.nodes, outcome.in_progress, error)

    @staticmethod
    def _launched_message(
        node_type: str, kind: str, count: int, serves: Any, outcome: LaunchResult
    ) -> str:
        if kind == NODE_KIND_HEAD:
            ids = ", ".join(outcome.node_ids) or "(still being created)"
            return f"launched head {ids} ({node_type})"
        message = f"launched {len(outcome.nodes) + outcome.in_progress} x {node_type}"
        if outcome.partial:
            message += f" (asked {count})"
        message += f" for {_describe(serves, kind)}"
        if outcome.in_progress:
            message += (
                f"; the cloud is still creating {outcome.in_progress} of them (pending "
                "capacity, looked at in later rounds)"
            )
        return message

    def _unblocked(self, node_type: str, node_config: dict[str, Any]) -> dict[str, Any]:
        """``node_config`` launching only into the node type's zones no block covers."""
        offering = next(t.offering for t in self.context.config.node_types() if t.name == node_type)
        if offering is None or len(offering.zones) < 2:
            return node_config
        zones = self.offerings.open_zones(offering)
        if zones and zones != offering.zones:
            return {**node_config, "availability_zone": list(zones)}
        return node_config

    def node_config(self, node_type: str, kind: str = NODE_KIND_WORKER) -> dict[str, Any]:
        """The node type's node_config as launched: its market and the boot script (the
        agent; with ``ray_start``, joining Ray, or on the head starting Ray and the monitor)."""
        context = self.context
        head = kind == NODE_KIND_HEAD
        package = context.config.spec.provider.agent_package or node_package(
            package_version(), head, None if context.report else context.provider.cloud.name
        )
        script = agent_script(
            context.config,
            node_type,
            head,
            context.provider.cloud.node_identity_script,
            package,
            context.ray.address if context.ray else context.config.spec.ray_address,
            report=context.report,
        )
        return self.context.provider.cloud.with_boot_script(
            self.context.config.launch_config(node_type), script
        )

    def failed(self, node_type: str, error: ProviderError) -> None:
        """A create failed: block what the error covers, and say so in the cloud's words."""
        record = self.offerings.record_failure(error)
        hint = ""
        if record is not None:
            where = "every create" if record.instance_type == EVERY else record.key
            hint = f"; {record.kind} blocked ({where}) until {record.until:.0f}"
            hint += f" (needs {record.detail})" if record.detail else ""
        self.event(
            "failed",
            f"launch of {node_type} failed: {error}{hint}",
            node_type,
            data={
                "code": error.code,
                "kind": error.kind,
                "offering": str(error.offering) if error.offering else None,
                "message": error.raw_message,
            },
        )


def _describe(serves: Any, kind: str = NODE_KIND_WORKER) -> str:
    if kind == NODE_KIND_HEAD:
        return "the head"
    if not serves:
        return "min_workers"
    return ", ".join(f"{count} x {dict(resources)}" for resources, count in serves)
