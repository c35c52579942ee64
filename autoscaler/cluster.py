"""One cluster opened: its config, its cloud's provider and its local state file.

The cloud's tags stay the truth: every command lists the cluster's nodes from the provider,
so a deleted state folder loses history, never instances.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from autoscaler.config import ClusterConfig
from autoscaler.ray_cluster.client import RayCluster
from autoscaler.reconciler import Reconciler
from autoscaler.report_channel import ReportTarget
from autoscaler.state import StateStore
from providers.base import NodeProvider
from providers.local_state import cluster_state_dir


class ClusterError(Exception):
    """A cluster command cannot go on; the message says why."""


@dataclass
class Cluster:
    """One cluster's config, cloud and local state, opened together."""

    config: ClusterConfig
    provider: NodeProvider
    store: StateStore
    clock: Callable[[], float] = time.time
    ray: RayCluster | None = None
    """The Ray cluster whose work drives this one (``monitor --ray-address``)."""
    report: ReportTarget | None = None
    """Where launched nodes send their reports (the monitor's endpoint, the secret)."""

    @property
    def name(self) -> str:
        return self.config.spec.cluster_name

    def reconciler(self) -> Reconciler:
        return Reconciler(
            self.config, self.provider, self.store, self.clock, ray=self.ray, report=self.report
        )

    def close(self) -> None:
        self.store.close()


def state_path(cluster_name: str) -> Path:
    """The cluster's SQLite state file."""
    return cluster_state_dir(cluster_name) / "state.db"


def open_cluster(
    config: ClusterConfig, clock: Callable[[], float] = time.time, read_only: bool = False
) -> Cluster:
    """The cluster's provider (starting the embedded cloud if asked) and state store;
    ``read_only`` opens the state file so that nothing can be written to it."""
    from providers import get_provider

    try:
        provider = get_provider(config.provider_settings(), config.spec.cluster_name)
    except ImportError as err:
        from autoscaler.extras import missing_line

        detail = missing_line(err.name) if err.name else str(err)
        raise ClusterError(
            f"the {config.spec.provider.type} provider plugin cannot be loaded: {detail}"
        ) from None
    path = state_path(config.spec.cluster_name)
    store = StateStore.open_read_only(path) if read_only else StateStore(path)
    return Cluster(config, provider, store, clock)
