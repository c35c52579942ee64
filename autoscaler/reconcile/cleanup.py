"""Cleanup: capacity the cloud stopped, preempted or failed is deleted in the round it is
seen (holding disks, quota and money otherwise); the planner replaces it if demand remains.
Also nodes of a node type no longer configured, and nodes still listed long after their
delete (asked again)."""

from __future__ import annotations

from collections.abc import Callable, Container

from autoscaler.lifecycle import STOPPED, TERMINATING
from autoscaler.reconcile.actions import Delete
from autoscaler.reconcile.observe import Observation
from providers.base import NODE_KIND_HEAD


def cleanup(
    observation: Observation,
    configured: Container[str],
    timeout: Callable[[str, str], float],
) -> list[Delete]:
    """Deletes for stopped nodes, unconfigured types and stuck deletes (never the head)."""
    deletes = []
    now = observation.now
    for view in observation.views:
        if view.kind == NODE_KIND_HEAD:
            continue
        if view.state == STOPPED:
            deletes.append(Delete(view, f"{view.record.reason}; releasing it now"))
        elif view.node_type not in configured:
            deletes.append(
                Delete(view, f"its node type {view.node_type!r} is no longer configured")
            )
        elif view.state == TERMINATING and now - view.since > timeout(TERMINATING, view.node_type):
            deletes.append(
                Delete(view, f"still listed {now - view.since:.0f}s after its delete; asking again")
            )
    return deletes
