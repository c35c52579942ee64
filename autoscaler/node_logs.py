"""A node's console for ``autoscale logs``: what its cloud keeps (EC2 ``GetConsoleOutput``,
the Compute Engine serial port), or in the local cloud the simulated host's boot log (each
boot step with its command and exit status). Nodes this cluster owns only."""

from __future__ import annotations

from pathlib import Path

from autoscaler.bootstrap import BOOT_LOG
from autoscaler.cluster import Cluster
from providers.local_state import cluster_state_dir


class NodeLogError(Exception):
    """The node is not this cluster's, or its console cannot be had; one line."""


def node_console(cluster: Cluster, node_id: str, tail: int | None = None) -> str:
    """The console text of ``node_id`` (its last ``tail`` lines)."""
    node = cluster.provider.node(node_id)
    if node is None:
        owned = ", ".join(sorted(n.id for n in cluster.provider.nodes())[:10]) or "none"
        raise NodeLogError(
            f"{node_id} is not a node of cluster {cluster.name} (its nodes: {owned})"
        )
    text = simulated_boot_log(cluster.name, node.id) if _emulated(cluster) else None
    if text is None:
        text = cluster.provider.console_output(node.id)
    if text is None:
        raise NodeLogError(
            f"{node_id}: the cloud keeps no console output for this node (Cloud TPU VMs keep "
            f"none); its boot log is {BOOT_LOG} on the node"
        )
    return "\n".join(text.splitlines()[-tail:]) + "\n" if tail else text


def _emulated(cluster: Cluster) -> bool:
    return bool(cluster.config.spec.provider.emulator)


def simulated_hosts_dir(cluster_name: str, node_id: str) -> Path:
    """Where the local cloud's node simulator keeps a node's simulated hosts."""
    return cluster_state_dir(cluster_name) / "simulated" / node_id


def simulated_boot_log(cluster_name: str, node_id: str) -> str | None:
    """The boot log each simulated host of the node wrote (a slice's hosts in order, each
    under a heading), or None before any was written."""
    name = BOOT_LOG.rsplit("/", 1)[-1]
    logs = sorted(simulated_hosts_dir(cluster_name, node_id).glob(f"host-*/**/{name}"))
    if not logs:
        return None
    if len(logs) == 1:
        return logs[0].read_text(errors="replace")
    return "".join(
        f"== {log.relative_to(simulated_hosts_dir(cluster_name, node_id)).parts[0]} ==\n"
        + log.read_text(errors="replace")
        for log in logs
    )
