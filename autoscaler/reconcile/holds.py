"""Boot-failure streaks and holds as the reconcile loop keeps them: a failure recorded, a
hold started and said, a streak ended when a node of its type comes up (the rules are in
``autoscaler.boot_failures``)."""

from __future__ import annotations

from collections.abc import Callable

from autoscaler.boot_failures import BOOT_LOG, Streak, config_fingerprint, record_failure
from autoscaler.config import ClusterConfig
from autoscaler.offerings import utc
from autoscaler.reconcile.actions import BootFailure
from autoscaler.reconcile.events import EventLog
from autoscaler.reconcile.observe import NodeView
from autoscaler.state import StateStore


class BootHolds:
    """One cluster's streaks of boot failures, per node type."""

    def __init__(
        self,
        config: ClusterConfig,
        store: StateStore,
        clock: Callable[[], float],
        event: EventLog,
    ) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self.event = event
        self.names = {t.name for t in config.node_types()}

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
            if name in self.names and streak.held(now, config_fingerprint(self.config, name))
        }

    def came_up(self, nodes: list[tuple[str, str]]) -> None:
        """Nodes (id, type) came up: their types' streaks end (and holds, saying so)."""
        streaks = self.streaks() if nodes else {}
        for node_id, node_type in nodes:
            streak = streaks.pop(node_type, None)
            if streak is None:
                continue
            self.store.save_boot_failures(node_type, None)
            if streak.held_until is None or streak.held_until <= self.clock():
                continue
            self.event(
                "released",
                f"replacing {node_type} again: {node_id} came up (it was held after {streak.what})",
                node_type,
                node_id,
            )

    def failed(self, view: NodeView, failure: BootFailure) -> tuple[str, Streak | None]:
        """Record that ``view`` never came up: what its deletion event adds, and the streak
        when this failure starts a hold (to be said after the deletion)."""
        streak, starts_hold = record_failure(
            self.streaks().get(view.node_type),
            view.node_type,
            failure.cause,
            view.id,
            failure.stuck_s,
            failure.console,
            config_fingerprint(self.config, view.node_type),
            self.clock(),
        )
        self.store.save_boot_failures(view.node_type, streak.to_json())
        if streak.held_until is None:
            return "replacing", None
        return f"not replacing: {view.node_type} is held ({streak.what})", (
            streak if starts_hold else None
        )

    def say_held(self, streak: Streak) -> None:
        hours = (streak.held_until - self.clock()) / 3600
        self.event(
            "held",
            f"stopped replacing {streak.node_type}: {streak.what}; {streak.console.describe()}; "
            f"held for {hours:g}h (until {utc(streak.held_until)}), or until its config "
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
