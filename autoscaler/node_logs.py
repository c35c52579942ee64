"""A node's console for ``autoscale logs``, through the provider contract's
``console_output``: EC2 ``GetConsoleOutput``, the Compute Engine serial port, and in the local
cloud (whose EC2 and Compute Engine serve it) the simulated host's boot log, each boot step
with its command and exit status. Nodes this cluster owns only."""

from __future__ import annotations

from autoscaler.bootstrap import BOOT_LOG
from autoscaler.cluster import Cluster


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
    text = cluster.provider.console_output(node.id)
    if text is None:
        raise NodeLogError(
            f"{node_id}: the cloud keeps no console output for this node (Cloud TPU VMs keep "
            f"none); its boot log is {BOOT_LOG} on the node"
        )
    return "\n".join(text.splitlines()[-tail:]) + "\n" if tail else text
