"""`up`: preflight, the account's identities and network (least privilege, made by the cloud's
plugin), the head node (through the reconciler's one launch path), min_workers and recorded
demand, and the node simulator of an emulated cluster."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from autoscaler.cluster import Cluster, ClusterError
from autoscaler.reconciler import TickResult
from autoscaler.report_channel import REPORT_PORT, ReportTarget, cluster_secret
from providers.base import (
    NODE_KIND_HEAD,
    TAG_NODE_KIND,
    AccountResource,
    NodeProvider,
    ProviderNode,
)


@dataclass
class UpResult:
    head: ProviderNode | None
    head_created: bool
    tick: TickResult
    account: list[AccountResource] = field(default_factory=list)
    """What the cluster has in the account besides nodes (made now or reused)."""


def preflight(cluster: Cluster) -> list[str]:
    """What would make launches fail, found by the cloud's plugin with read-only calls."""
    return cluster.provider.preflight(_node_configs(cluster))


def _node_configs(cluster: Cluster) -> dict[str, dict]:
    names = cluster.config.spec.available_node_types
    return {name: cluster.config.launch_config(name) for name in names}


def find_head(provider: NodeProvider) -> ProviderNode | None:
    heads = provider.nodes({TAG_NODE_KIND: NODE_KIND_HEAD})
    return min(heads, key=lambda n: (n.launched_at or 0.0, n.id)) if heads else None


def ensure_head(cluster: Cluster) -> tuple[ProviderNode | None, bool]:
    """The cluster's head node and whether it was created now (None without a head type)."""
    head_type = cluster.config.head_node_type
    if head_type is None:
        return None, False
    existing = find_head(cluster.provider)
    if existing is not None:
        return existing, False
    nodes, error = cluster.reconciler().launch(head_type, 1, NODE_KIND_HEAD)
    if not nodes:
        raise ClusterError(f"could not launch the head node ({head_type}): {error}")
    return nodes[0], True


def preview(cluster: Cluster) -> dict[str, int]:
    """Units `up` would launch now, per node type (the head included when it is missing);
    read-only."""
    counts = cluster.reconciler().current_plan().launch_counts()
    head_type = cluster.config.head_node_type
    if head_type is not None and find_head(cluster.provider) is None:
        counts[head_type] = counts.get(head_type, 0) + 1
    return counts


def up(
    cluster: Cluster,
    config_path: Path | None = None,
    step: Callable[[str], None] = lambda _: None,
) -> UpResult:
    """Create or reuse the head, then one reconcile round (min_workers and recorded demand).

    An emulated cluster also gets its node simulator (started from ``config_path``)."""
    if cluster.config.spec.provider.emulator and config_path is not None:
        from providers.local.simulator import ensure_simulator

        step("node simulator")
        ensure_simulator(config_path, cluster.name)
    step("account: identities and network")
    account = cluster.provider.prepare_account(
        _node_configs(cluster), cluster.config.head_node_type
    )
    step("head node")
    if cluster.config.head_node_type is not None:  # the head's monitor receives the reports
        cluster.report = ReportTarget(cluster_secret(cluster.name))
    head, created = ensure_head(cluster)
    if cluster.report is not None and head is not None and head.internal_ip:
        cluster.report = replace(cluster.report, url=f"http://{head.internal_ip}:{REPORT_PORT}")
    step("workers")
    return UpResult(head, created, cluster.reconciler().tick(), account)
