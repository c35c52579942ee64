"""The node agent: detect this node, read its device ledger, report to the cluster.

It runs on every launched node (``autoscale node agent``) and in the embedded cloud's node
simulator, with the same code. A report carries the node's true resources, its devices,
what is free right now (per device share too) and since when nothing has been leased. It is
published on change and on a heartbeat, into the node's own tags (labels), within the
cloud's value limit.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from accel.allocation import from_units
from accel.ledger import NodeLedger
from accel.node import apply_overrides, detect_node, overrides_from_env
from accel.probe import HostProbe
from autoscaler.release import package_version
from autoscaler.report import NodeReport, encode
from providers.base import NodeProvider

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PublishPolicy:
    """When an agent sends a report.

    A change that matters to scaling goes out at once, never closer than ``burst_s`` after the
    last report: becoming busy, or a different inventory. Becoming idle goes out once the host
    has stayed idle ``settle_s`` (short tasks back to back do not flap it). Any other change
    (free shares while busy) waits at least ``min_interval_s``; an unchanged report is
    repeated every ``heartbeat_s``. A failed publish is retried after a backoff that doubles up
    to ``max_backoff_s``. On a channel that can lose a report after taking it (tags another
    writer can overwrite), each report is read back ``confirm_after_s`` after it went out and
    sent again if it is gone."""

    heartbeat_s: float
    min_interval_s: float
    burst_s: float = 2.0
    settle_s: float = 15.0
    max_backoff_s: float = 60.0
    confirm_after_s: float = 30.0


TO_THE_MONITOR = PublishPolicy(heartbeat_s=60.0, min_interval_s=30.0)
"""Reports to the monitor's endpoint: no cloud API calls, so kept fresh."""
INTO_TAGS = PublishPolicy(heartbeat_s=900.0, min_interval_s=120.0, burst_s=10.0)
"""Reports into the node's own tags: every one costs a few cloud API calls (a write, and
reads to check it), so they are rarer."""


def tag_publisher(
    provider: NodeProvider, node_id: str, host: int = 0
) -> Callable[[NodeReport], None]:
    """Publish into the node's own tags or labels, within the cloud's value limit (the
    channel for small clusters without a reachable monitor; use :data:`INTO_TAGS`)."""
    limit = provider.cloud.tag_value_limit

    def publish(report: NodeReport) -> None:
        provider.set_tags([node_id], encode(report, limit, host))

    return publish


def tags_hold(provider: NodeProvider, node_id: str, host: int = 0) -> Callable[[NodeReport], bool]:
    """Whether the node's tags still hold a report :func:`tag_publisher` sent: the hosts of a
    TPU slice share one set of labels, which the API replaces whole with no fingerprint, so
    one host's write can undo another's after both were read back."""
    limit = provider.cloud.tag_value_limit

    def holds(report: NodeReport) -> bool:
        tags = provider.node_tags(node_id)
        return all(tags.get(key, "") == value for key, value in encode(report, limit, host).items())

    return holds


class NodeAgent:
    """Builds reports for one host and publishes the ones that say something new."""

    def __init__(
        self,
        publish: Callable[[NodeReport], None],
        probe: HostProbe,
        state_dir: Path,
        clock: Callable[[], float] = time.time,
        policy: PublishPolicy = TO_THE_MONITOR,
        version: str = "",
        confirm: Callable[[NodeReport], bool] | None = None,
    ) -> None:
        self.publish = publish
        self.confirm = confirm
        """Whether the channel still holds a report sent on it (None: it cannot lose one)."""
        self.probe = probe
        self.state_dir = Path(state_dir)
        self.clock = clock
        self.policy = policy
        self.version = version or package_version()
        self._last: NodeReport | None = None
        self._confirmed = True
        self._failures = 0
        self._retry_at = 0.0
        self._idle_file = self.state_dir / "agent-idle.json"

    def report(self) -> NodeReport:
        """What this host has and uses now."""
        inventory = apply_overrides(detect_node(self.probe), overrides_from_env(self.probe.env))
        leases, view = NodeLedger(self.state_dir, inventory).snapshot()
        free = {name: from_units(max(units, 0)) for name, units in view.free_scalars.items()}
        device_free = {}
        for name, allocator in view.allocators.items():
            shares = allocator.free_shares()
            device_free[name] = tuple(shares.values())
            free[name] = sum(shares.values())
        return NodeReport(
            resources=dict(inventory.resources),
            devices={name: len(pool.ids) for name, pool in inventory.pools.items()},
            free=free,
            device_free=device_free,
            idle_since=None if leases else self._idle_since(),
            reported_at=self.clock(),
            agent=self.version,
        )

    def step(self) -> NodeReport | None:
        """Report once if the policy says so; the report sent, if any. A failed publish (or
        read-back) raises, and the next attempt waits for the backoff."""
        report = self.report()
        if report.idle_since is None:
            self._idle_file.unlink(missing_ok=True)
        if report.reported_at < self._retry_at:
            return None
        try:
            if self._lost(report.reported_at):
                self._last = None  # as if never sent: due now
            if not self._due(report):
                return None
            self.publish(report)
        except Exception:
            self._failures += 1
            backoff = min(self.policy.max_backoff_s, 2.0**self._failures)
            self._retry_at = report.reported_at + backoff
            raise
        self._failures = 0
        self._last = report
        self._confirmed = self.confirm is None
        return report

    def _lost(self, now: float) -> bool:
        """Whether the last report, read back once ``confirm_after_s`` after it went out,
        is gone from the channel."""
        last = self._last
        if self._confirmed or last is None or now - last.reported_at < self.policy.confirm_after_s:
            return False
        assert self.confirm is not None
        held = self.confirm(last)
        self._confirmed = True
        if not held:
            logger.warning(
                "the report of %.0f is gone from the channel; sending it again", last.reported_at
            )
        return not held

    def _due(self, report: NodeReport) -> bool:
        last = self._last
        if last is None:
            return True
        since = report.reported_at - last.reported_at
        if replace(last, reported_at=0) == replace(report, reported_at=0):
            return since >= self.policy.heartbeat_s
        inventory = last.resources != report.resources or last.devices != report.devices
        if inventory or (last.idle_since is not None and report.idle_since is None):
            return since >= self.policy.burst_s
        if last.idle_since is None and report.idle_since is not None:
            idle_for = report.reported_at - report.idle_since
            return idle_for >= self.policy.settle_s or since >= self.policy.min_interval_s
        return since >= self.policy.min_interval_s

    def run(self, interval_s: float, stop: Callable[[], bool] = lambda: False) -> None:
        while not stop():
            try:
                self.step()
            except Exception as err:  # never fatal: retried after the backoff
                logger.warning("report failed (%s); retrying in %.0fs", err, self._backoff())
            time.sleep(interval_s)

    def _backoff(self) -> float:
        return max(0.0, self._retry_at - self.clock())

    def _idle_since(self) -> float:
        """When the host became idle; kept on disk so an agent restart does not reset it."""
        try:
            return float(json.loads(self._idle_file.read_text())["since"])
        except (OSError, ValueError, KeyError):
            since = self.clock()
            self.state_dir.mkdir(parents=True, exist_ok=True)
            self._idle_file.write_text(json.dumps({"since": since}))
            return since
