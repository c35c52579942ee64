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
from dataclasses import replace
from pathlib import Path

from accel.allocation import from_units
from accel.ledger import NodeLedger
from accel.node import apply_overrides, detect_node, overrides_from_env
from accel.probe import HostProbe
from autoscaler.report import NodeReport, encode
from providers.base import NodeProvider

logger = logging.getLogger(__name__)

HEARTBEAT_S = 60.0


def tag_publisher(
    provider: NodeProvider, node_id: str, host: int = 0
) -> Callable[[NodeReport], None]:
    """Publish into the node's own tags or labels, within the cloud's value limit."""
    limit = provider.cloud.tag_value_limit

    def publish(report: NodeReport) -> None:
        provider.set_tags([node_id], encode(report, limit, host))

    return publish


class NodeAgent:
    """Builds reports for one host and publishes the ones that say something new."""

    def __init__(
        self,
        publish: Callable[[NodeReport], None],
        probe: HostProbe,
        state_dir: Path,
        clock: Callable[[], float] = time.time,
        heartbeat_s: float = HEARTBEAT_S,
        version: str = "",
    ) -> None:
        self.publish = publish
        self.probe = probe
        self.state_dir = Path(state_dir)
        self.clock = clock
        self.heartbeat_s = heartbeat_s
        self.version = version or package_version()
        self._last: NodeReport | None = None
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
        """Report once if anything changed or the heartbeat is due; the report sent, if any."""
        report = self.report()
        if report.idle_since is None:
            self._idle_file.unlink(missing_ok=True)
        last = self._last
        unchanged = last is not None and replace(last, reported_at=0) == replace(
            report, reported_at=0
        )
        if unchanged and report.reported_at - last.reported_at < self.heartbeat_s:
            return None
        self.publish(report)
        self._last = report
        return report

    def run(self, interval_s: float, stop: Callable[[], bool] = lambda: False) -> None:
        while not stop():
            try:
                self.step()
            except Exception:  # a failed publish is retried next round
                logger.warning("report failed", exc_info=True)
            time.sleep(interval_s)

    def _idle_since(self) -> float:
        """When the host became idle; kept on disk so an agent restart does not reset it."""
        try:
            return float(json.loads(self._idle_file.read_text())["since"])
        except (OSError, ValueError, KeyError):
            since = self.clock()
            self.state_dir.mkdir(parents=True, exist_ok=True)
            self._idle_file.write_text(json.dumps({"since": since}))
            return since


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("accel-autoscaler")
    except PackageNotFoundError:
        return "dev"
