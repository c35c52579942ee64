"""The per-node lifecycle, declared as data: its states, the transitions allowed between
them, how long each state may last, and one record per node.

::

    requested ─► queued ─► allocated ─► waiting_for_report ─► running
        │           │          │               │                 │
        └───────────┴──────────┴───────┬───────┴─────────────────┘
                                       ▼
                  stopped (the cloud stopped, preempted or failed it)
                                       ▼
                     terminating (we asked the cloud to delete it) ─► gone

A node counts as pending capacity until it reports its accelerators (and joins Ray where
its type runs ``ray start``), so demand it will serve never launches a second node.
``queued`` is a request the cloud holds until capacity frees up (a queued resource): it has
no timeout of ours, the cloud's own deadline ends it. ``stopped`` lasts no time at all: the
round that sees it deletes the node. ``terminating`` is final: a node we asked to delete
never comes back, whatever the cloud lists meanwhile, except as a new launch (a stopped
node reused under a new launch request starts a new record).

Accelerator nodes get longer timeouts: GPU and TPU nodes take minutes to boot and load
drivers. Each node type may override them in the cluster YAML
(``available_node_types.<name>.lifecycle_timeouts_s``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from providers.base import (
    CLOUD_PENDING,
    CLOUD_RUNNING,
    CLOUD_STOPPED,
    CLOUD_STOPPING,
    CLOUD_TERMINATED,
    CLOUD_TERMINATING,
    ProviderNode,
)

REQUESTED = "requested"
QUEUED = "queued"
ALLOCATED = "allocated"
WAITING_FOR_REPORT = "waiting_for_report"
RUNNING = "running"
STOPPED = "stopped"
TERMINATING = "terminating"

STATES = (REQUESTED, QUEUED, ALLOCATED, WAITING_FOR_REPORT, RUNNING, STOPPED, TERMINATING)
_UP = (QUEUED, ALLOCATED, WAITING_FOR_REPORT, RUNNING)
TRANSITIONS: Mapping[str, frozenset[str]] = {
    REQUESTED: frozenset({*_UP, STOPPED, TERMINATING}),
    QUEUED: frozenset({ALLOCATED, WAITING_FOR_REPORT, RUNNING, STOPPED, TERMINATING}),
    ALLOCATED: frozenset({QUEUED, WAITING_FOR_REPORT, RUNNING, STOPPED, TERMINATING}),
    WAITING_FOR_REPORT: frozenset({ALLOCATED, RUNNING, STOPPED, TERMINATING}),
    RUNNING: frozenset({ALLOCATED, WAITING_FOR_REPORT, STOPPED, TERMINATING}),
    STOPPED: frozenset({TERMINATING}),
    TERMINATING: frozenset(),
}
"""Where each state may go next; a state not listed for it is never entered from it."""
BOOTING = frozenset({REQUESTED, QUEUED, ALLOCATED, WAITING_FOR_REPORT})
"""Not up yet: pending capacity, timed from the launch across these states."""

TIMEOUTS_S: Mapping[str, Mapping[str, float]] = {
    "cpu": {
        REQUESTED: 300,
        QUEUED: math.inf,
        ALLOCATED: 600,
        WAITING_FOR_REPORT: 600,
        STOPPED: 0,
        TERMINATING: 600,
    },
    "accelerator": {
        REQUESTED: 600,
        QUEUED: math.inf,
        ALLOCATED: 1200,
        WAITING_FOR_REPORT: 1800,
        STOPPED: 0,
        TERMINATING: 900,
    },
}
"""Seconds a node may stay in a state (running has no limit): a booting node past it is
replaced, a stopped one deleted at once, a terminating one asked to delete again."""

CLOUD_TO_LIFECYCLE: Mapping[str, str] = {
    CLOUD_PENDING: ALLOCATED,
    CLOUD_RUNNING: WAITING_FOR_REPORT,  # running once it reports (and joins Ray)
    CLOUD_STOPPING: STOPPED,
    CLOUD_STOPPED: STOPPED,
    CLOUD_TERMINATING: TERMINATING,
    CLOUD_TERMINATED: TERMINATING,
}
"""The provider contract's cloud states (each plugin maps its cloud's own onto them) as
lifecycle states."""
HISTORY = 20
"""Transitions kept per node record."""


def timeout_s(state: str, accelerated: bool, overrides: Mapping[str, float] | None = None) -> float:
    """How long ``state`` may last; ``overrides`` (the node type's, from the YAML) win."""
    if overrides and state in overrides:
        return float(overrides[state])
    limits = TIMEOUTS_S["accelerator" if accelerated else "cpu"]
    return float(limits.get(state, math.inf))


def observed_state(node: ProviderNode, up: bool) -> str:
    """The lifecycle state the cloud's view shows (``up``: it reported and joined)."""
    if node.waiting_for_capacity:
        return QUEUED
    state = CLOUD_TO_LIFECYCLE.get(node.state, ALLOCATED)
    return RUNNING if state == WAITING_FOR_REPORT and up else state


def reason_for(node: ProviderNode, state: str) -> str:
    """Why a node entered ``state``, in the cloud's words where it has some."""
    status = node.cloud_status or node.state
    words = f": {node.status_message}" if node.status_message else ""
    if state == STOPPED:
        return f"the cloud stopped it ({status}){words}"
    if state == QUEUED:
        return node.status_message or "waiting for capacity"
    if state == TERMINATING:
        return f"the cloud is deleting it ({node.cloud_status or node.state})"
    return {
        ALLOCATED: "the cloud is starting it",
        WAITING_FOR_REPORT: "up; waiting for its report",
        RUNNING: "reported its accelerators",
    }.get(state, "")


@dataclass(frozen=True)
class NodeRecord:
    """One node's lifecycle: what it is, its state since when and why, and its history of
    ``(state, at, reason)`` transitions (newest last, :data:`HISTORY` kept)."""

    node_id: str
    node_type: str
    kind: str
    state: str
    since: float
    reason: str = ""
    offering: str = ""
    """Instance type, zone and market it runs on."""
    request: str = ""
    """The launch request it came from (a reused node starts a new record)."""
    history: tuple[tuple[str, float, str], ...] = field(default=())

    def can_become(self, state: str) -> bool:
        return state == self.state or state in TRANSITIONS[self.state]

    def moved(self, state: str, at: float, reason: str) -> NodeRecord:
        """This record after a transition to ``state`` (raises if it is not allowed)."""
        if not self.can_become(state):
            raise ValueError(f"{self.node_id}: {self.state} -> {state} is not a transition")
        history = (*self.history, (state, at, reason))[-HISTORY:]
        return replace(self, state=state, since=at, reason=reason, history=history)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "reason": self.reason,
            "offering": self.offering,
            "request": self.request,
            "history": [list(entry) for entry in self.history],
        }

    @classmethod
    def from_row(
        cls, node_id: str, node_type: str, state: str, since: float, body: Mapping[str, Any]
    ) -> NodeRecord:
        return cls(
            node_id,
            node_type,
            str(body.get("kind", "")),
            state if state in TRANSITIONS else ALLOCATED,
            since,
            str(body.get("reason", "")),
            str(body.get("offering", "")),
            str(body.get("request", "")),
            tuple((str(s), float(a), str(r)) for s, a, r in body.get("history", ())),
        )
