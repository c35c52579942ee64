"""What every part of the reconcile loop works on."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from autoscaler.config import ClusterConfig
from autoscaler.report_channel import ReportTarget
from autoscaler.state import StateStore
from providers.base import NodeProvider

if TYPE_CHECKING:
    from autoscaler.ray_cluster.client import RayCluster


@dataclass(frozen=True)
class Context:
    """One cluster's config, cloud, state file and clock, the Ray cluster it scales (if
    any), and where launched nodes report."""

    config: ClusterConfig
    provider: NodeProvider
    store: StateStore
    clock: Callable[[], float]
    ray: RayCluster | None = None
    report: ReportTarget | None = None
