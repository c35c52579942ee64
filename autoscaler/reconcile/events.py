"""The event log as the reconcile loop writes it: each event logged and stored."""

from __future__ import annotations

import logging
from collections.abc import Callable

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
