"""Nodes that never come up: the evidence, and when to stop replacing them.

A node stuck before it reports (the cloud never started it, or it never reported: no
permissions, a broken image, a failing boot script) is replaced after its lifecycle timeout.
Replacing it forever bills for accelerators and never converges, so each such failure is
recorded per node type with its cause and the last lines of the node's console, as a
*streak*: consecutive failures of one node type with the same cause and the same launch
config. A node of the type that comes up ends the streak. At :data:`FAILURE_LIMIT` in a row
the type is *held*: the planner sees it unavailable until :data:`HOLD_S` pass, the launch
config changes, a node of the type comes up, or the cluster's state is cleared (``down``). A
failure after a hold expired holds the type again at once.

Everything here is pure (time comes in as ``now``) except :func:`read_console`, which makes
one read-only provider call.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from autoscaler.config import ClusterConfig
from autoscaler.lifecycle import ALLOCATED, WAITING_FOR_REPORT
from providers.base import NodeProvider
from providers.errors import ProviderError

logger = logging.getLogger(__name__)

FAILURE_LIMIT = 3
"""Consecutive same-cause failures of one node type after which it is no longer replaced."""
HOLD_S = 6 * 3600.0
"""How long a node type stays held after reaching the limit."""
CONSOLE_LINES = 5
"""Last non-empty console lines kept as evidence."""
CONSOLE_LINE_CHARS = 240
"""Characters kept of each console line."""
CONSOLE_READS_PER_ROUND = 5
"""Consoles read per reconcile round (one cloud call each); more stuck nodes go without."""
STATUS_REASON_AFTER_S = 300.0
"""A booting node gets a ``reason`` in ``status`` after waiting this long."""
STATUS_CONSOLE_NODES = 3
"""Consoles ``status`` reads at most (the longest-waiting nodes first)."""
BOOT_LOG = "/var/log/accel-autoscaler-agent.log"
"""Where the boot script logs on every node (see ``autoscaler.bootstrap``)."""

JOINING_RAY = "joining_ray"
"""Waiting for its report, having reported: a node whose type runs ``ray start``."""
CAUSES: Mapping[str, str] = {
    ALLOCATED: "never started",
    WAITING_FOR_REPORT: "never reported",
    JOINING_RAY: "never joined Ray",
}
"""Why a node never came up, by cause, in words."""
BOOT_STATES = frozenset({ALLOCATED, WAITING_FOR_REPORT})
"""Lifecycle states a node can be stuck in before it comes up."""


def cause_of(state: str, reported: bool) -> str:
    """The cause a node stuck in ``state`` (one of :data:`BOOT_STATES`) failed with."""
    return JOINING_RAY if state == WAITING_FOR_REPORT and reported else state


_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]|[\x00-\x08\x0b-\x1f\x7f]")


def console_tail(text: str | None, lines: int = CONSOLE_LINES) -> tuple[str, ...]:
    """The last ``lines`` non-empty lines of console ``text``, terminal escapes and control
    characters removed, each cut to :data:`CONSOLE_LINE_CHARS`."""
    if not text:
        return ()
    kept = []
    for line in reversed(text.replace("\r\n", "\n").replace("\r", "\n").split("\n")):
        clean = _ESCAPES.sub("", line).strip()
        if clean:
            if len(clean) > CONSOLE_LINE_CHARS:
                clean = clean[: CONSOLE_LINE_CHARS - 3] + "..."
            kept.append(clean)
            if len(kept) == lines:
                break
    return tuple(reversed(kept))


@dataclass(frozen=True)
class Console:
    """What a node's console showed: its last lines, or why it could not be read."""

    lines: tuple[str, ...] = ()
    error: str | None = None
    kept: bool = True
    """False where the cloud keeps no console output for the node (e.g. Cloud TPU VMs)."""

    def describe(self) -> str:
        if self.error:
            return f"console not readable ({self.error})"
        if not self.kept:
            return "no console output (the cloud keeps none for this node)"
        if not self.lines:
            return "console empty"
        return "last console: " + " | ".join(self.lines)

    def to_json(self) -> dict[str, Any]:
        return {"lines": list(self.lines), "error": self.error, "kept": self.kept}


NOT_READ = Console(error="not read: too many stuck nodes this round")


def read_console(provider: NodeProvider, node_id: str) -> Console:
    """The node's console tail (read-only); a cloud error is evidence too, never raised."""
    try:
        output = provider.console_output(node_id)
    except ProviderError as err:
        logger.info("could not read the console of %s: %s", node_id, err)
        return Console(error=str(err))
    return Console(console_tail(output), kept=output is not None)


def config_fingerprint(config: ClusterConfig, node_type: str) -> str:
    """A short digest of what a node of ``node_type`` boots with: its YAML entry
    (node_config, bootstrap commands...) and the provider section. A changed config starts a
    new streak (and ends a hold)."""
    spec = config.spec
    body = json.dumps(
        {
            "node_type": spec.available_node_types[node_type].model_dump(mode="json"),
            "provider": spec.provider.model_dump(mode="json"),
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(body.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Streak:
    """Consecutive same-cause boot failures of one node type (and its hold, if any)."""

    node_type: str
    cause: str
    """Why its nodes never came up (a key of :data:`CAUSES`)."""
    count: int
    last_at: float
    last_node_id: str
    stuck_s: float
    """How long the last failed node waited."""
    console: Console
    config: str
    """:func:`config_fingerprint` of the launch config the failures happened with."""
    held_until: float | None = None

    @property
    def what(self) -> str:
        """``3 nodes in a row never reported``."""
        nodes = "node" if self.count == 1 else "nodes in a row"
        return f"{self.count} {nodes} {CAUSES.get(self.cause, f'stuck in {self.cause}')}"

    def held(self, now: float, config: str) -> bool:
        """Held now, for the node type's current launch config."""
        return self.held_until is not None and now < self.held_until and config == self.config

    def reason(self) -> str:
        """Why the node type is held, for the planner and ``status`` (console aside)."""
        return f"held: {self.what}"

    def to_json(self) -> dict[str, Any]:
        return {
            "cause": self.cause,
            "count": self.count,
            "last_at": self.last_at,
            "last_node_id": self.last_node_id,
            "stuck_s": self.stuck_s,
            "console": self.console.to_json(),
            "config": self.config,
            "held_until": self.held_until,
        }

    @classmethod
    def from_json(cls, node_type: str, body: Mapping[str, Any]) -> Streak:
        console = body.get("console") or {}
        return cls(
            node_type,
            str(body["cause"]),
            int(body["count"]),
            float(body["last_at"]),
            str(body.get("last_node_id", "")),
            float(body.get("stuck_s", 0.0)),
            Console(
                tuple(console.get("lines") or ()), console.get("error"), console.get("kept", True)
            ),
            str(body.get("config", "")),
            body.get("held_until"),
        )


def record_failure(
    previous: Streak | None,
    node_type: str,
    cause: str,
    node_id: str,
    stuck_s: float,
    console: Console,
    config: str,
    now: float,
) -> tuple[Streak, bool]:
    """The streak after one more node of ``node_type`` failed with ``cause``, and whether
    this failure starts a hold (reaching the limit, or failing again after one expired)."""
    same = previous is not None and previous.cause == cause and previous.config == config
    count = previous.count + 1 if same else 1
    if same and console == NOT_READ:
        console = previous.console  # the last console of this type that was read
    streak = Streak(node_type, cause, count, now, node_id, stuck_s, console, config)
    if same and previous.held(now, config):
        return replace(streak, held_until=previous.held_until), False
    if count >= FAILURE_LIMIT:
        return replace(streak, held_until=now + HOLD_S), True
    return streak, False
