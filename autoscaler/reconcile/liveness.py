"""Liveness: a node stuck before it comes up (never started, never reported, never joined
Ray) past its state's timeout is replaced, with the last lines of its console as evidence
(read before the delete: a deleted VM's serial port is gone); a request waiting for capacity
past its (overridden) timeout is given up. Whether its node type is then held is the boot
failure streak's call (``autoscaler.boot_failures``)."""

from __future__ import annotations

from collections.abc import Callable, Container

from autoscaler.boot_failures import (
    BOOT_STATES,
    CONSOLE_READS_PER_ROUND,
    NOT_READ,
    cause_of,
    read_console,
)
from autoscaler.lifecycle import QUEUED
from autoscaler.reconcile.actions import BootFailure, Delete
from autoscaler.reconcile.observe import Observation
from providers.base import NODE_KIND_HEAD, NodeProvider


def liveness(
    observation: Observation,
    configured: Container[str],
    timeout: Callable[[str, str], float],
    provider: NodeProvider,
) -> list[Delete]:
    """Deletes for nodes past their booting timeout (consoles read for the longest-stuck
    :data:`CONSOLE_READS_PER_ROUND`); never the head."""
    now = observation.now
    stuck = sorted(
        (
            v
            for v in observation.views
            if v.kind != NODE_KIND_HEAD
            and v.node_type in configured
            and v.state in BOOT_STATES | {QUEUED}
            and now - v.since > timeout(v.state, v.node_type)
        ),
        key=lambda v: (v.since, v.id),
    )
    deletes, reads = [], 0
    for view in stuck:
        waited = now - view.since
        if view.state == QUEUED:
            deletes.append(Delete(view, f"waited {waited:.0f}s for capacity; replacing"))
            continue
        console = read_console(provider, view.id) if reads < CONSOLE_READS_PER_ROUND else NOT_READ
        reads += 1
        failure = BootFailure(cause_of(view.state, view.reported), waited, console)
        deletes.append(Delete(view, f"stuck in {view.state} for {waited:.0f}s", False, failure))
    return deletes
