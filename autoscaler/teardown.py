"""`down`: terminate what the cluster owns, wait until the cloud lists none of it, clear the
local state, and stop an emulated cluster's local cloud and node simulator."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from autoscaler.cluster import Cluster, ClusterError
from providers.base import NODE_KIND_HEAD, TAG_NODE_KIND, NodeProvider, ProviderNode

logger = logging.getLogger(__name__)

DOWN_TIMEOUT_S = 900.0
POLL_S = 5.0


def doomed(provider: NodeProvider, keep_head: bool) -> list[ProviderNode]:
    """The owned nodes `down` terminates."""
    return [
        n
        for n in provider.nodes()
        if not (keep_head and n.tags.get(TAG_NODE_KIND) == NODE_KIND_HEAD)
    ]


def teardown(
    cluster: Cluster,
    keep_head: bool = False,
    purge: bool = False,
    timeout_s: float = DOWN_TIMEOUT_S,
    poll_s: float = POLL_S,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> list[str]:
    """Terminate every owned node (the head too unless kept), wait until the cloud lists none,
    with ``purge`` delete the cluster's account resources (roles, groups...), clear the local
    state and stop the embedded cloud and its node simulator; returns the ids terminated."""
    deadline = monotonic() + timeout_s
    targets = [n.id for n in doomed(cluster.provider, keep_head)]
    if targets:
        cluster.provider.terminate_nodes(targets)
    left = _wait_gone(cluster.provider, targets, deadline, poll_s, sleep, monotonic)
    if left:
        raise ClusterError(
            f"{len(left)} node(s) still listed after {timeout_s:.0f}s: {', '.join(sorted(left))}; "
            "run `down` again"
        )
    if purge and not keep_head:
        for resource in cluster.provider.purge_account():
            logger.info("deleted %s %s", resource.kind, resource.name)
    cluster.store.clear()
    if cluster.config.spec.provider.emulator and not keep_head:
        from providers.local.servers import stop_emulator
        from providers.local.simulator import stop_simulator

        stop_simulator(cluster.name)
        stop_emulator(cluster.config.spec.provider.type, cluster.name)
    logger.info("cluster %s: terminated %d node(s)", cluster.name, len(targets))
    return targets


def _wait_gone(
    provider: NodeProvider,
    targets: Iterable[str],
    deadline: float,
    poll_s: float,
    sleep: Callable[[float], None],
    monotonic: Callable[[], float],
) -> set[str]:
    wanted = set(targets)
    while True:
        left = wanted & {n.id for n in provider.nodes()}
        remaining = deadline - monotonic()
        if not left or remaining <= 0:
            return left
        sleep(min(poll_s, remaining))
