"""The event log as the reconcile loop writes it: each event logged and stored, and the
events a node's lifecycle transitions make."""

from __future__ import annotations

import logging
from collections.abc import Callable

from autoscaler.lifecycle import TERMINATING, NodeRecord
from autoscaler.state import Event, StateStore

logger = logging.getLogger("autoscaler.reconciler")


class EventLog:
    """Appends events to the cluster's log (and the process log), stamped by ``clock``."""

    def __init__(self, store: StateStore, clock: Callable[[], float]) -> None:
        self.store = store
        self.clock = clock

    def __call__(
        self,
        kind: str,
        message: str,
        node_type: str | None = None,
        node_id: str | None = None,
        data: dict | None = None,
    ) -> None:
        logger.info("%s: %s", kind, message)
        self.store.add_event(Event(self.clock(), kind, message, node_type, node_id, data))

    def many(self, events: list[Event]) -> None:
        """Append ``events`` in one write."""
        for event in events:
            logger.info("%s: %s", event.kind, event.message)
        if events:
            self.store.add_events(events)


def transition_event(before: NodeRecord | None, after: NodeRecord) -> Event | None:
    """A node's transition as an event with its reason."""
    was = before.state if before is not None else "new"
    if before is not None and before.state == after.state:
        return None
    return Event(
        after.history[-1][1] if after.history else after.since,
        "state",
        f"{after.node_id} ({after.node_type}): {was} -> {after.state}: {after.reason}",
        after.node_type,
        after.node_id,
        {"from": was, "to": after.state, "reason": after.reason},
    )


def vanished_event(record: NodeRecord, now: float) -> Event:
    """A recorded node the cloud no longer lists: deleted as asked, or gone on its own."""
    if record.state == TERMINATING:
        return Event(
            now,
            "state",
            f"{record.node_id} ({record.node_type}): deleted",
            record.node_type,
            record.node_id,
            {"from": TERMINATING, "to": "gone", "reason": "deleted"},
        )
    reason = (
        "the cloud no longer lists it (terminated by the cloud, e.g. a failed launch, or "
        "outside the autoscaler)"
    )
    return Event(
        now,
        "vanished",
        f"{record.node_id} ({record.node_type}): {record.state} -> gone: {reason}",
        record.node_type,
        record.node_id,
        {"from": record.state, "to": "gone", "reason": reason},
    )
