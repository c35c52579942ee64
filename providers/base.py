"""The NodeProvider contract every cloud plugin implements, and what it returns.

Method names follow Ray's NodeProvider so its users feel at home; what an accelerator
autoscaler needs on top is here too: launch request ids (idempotent creation), results that
report partial fills, gang (all-or-nothing) launches, and multi-host nodes (TPU slices).

Ownership is the plugin's job, not the caller's: every instance created carries the cluster
tag, every listing filters on it server-side, and nothing without it is ever listed, tagged,
stopped or terminated, whatever the caller asks.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from providers.errors import ProviderError

# Ownership tags (AWS tags; GCP labels use the same keys, which are valid label keys).
TAG_CLUSTER = "accel-cluster-name"
TAG_NODE_TYPE = "accel-node-type"
TAG_NODE_KIND = "accel-node-kind"
TAG_LAUNCH_REQUEST = "accel-launch-request"
TAG_NODE_STATUS = "accel-node-status"
NODE_KIND_HEAD = "head"
NODE_KIND_WORKER = "worker"

ON_DEMAND = "on-demand"
SPOT = "spot"

# Node states, the same for every cloud.
PENDING = "pending"
RUNNING = "running"
STOPPING = "stopping"
STOPPED = "stopped"
TERMINATING = "terminating"
TERMINATED = "terminated"
NON_TERMINATED_STATES = frozenset({PENDING, RUNNING, STOPPING, STOPPED})


@dataclass(frozen=True)
class Offering:
    """What runs out: an instance type in a zone in a market."""

    instance_type: str
    zone: str | None = None
    market: str = ON_DEMAND

    def __str__(self) -> str:
        return f"{self.instance_type}/{self.zone or 'any zone'}/{self.market}"


@dataclass(frozen=True)
class Host:
    """One VM of a node; a multi-host TPU slice has several, worker 0 first."""

    worker_id: int
    internal_ip: str | None = None
    external_ip: str | None = None


@dataclass(frozen=True)
class ProviderNode:
    """A node as the cloud describes it."""

    id: str
    state: str
    tags: Mapping[str, str]
    instance_type: str
    zone: str | None = None
    market: str = ON_DEMAND
    hosts: tuple[Host, ...] = ()
    launched_at: float | None = None
    """Seconds since the epoch, as the cloud reports the launch."""

    @property
    def internal_ip(self) -> str | None:
        return self.hosts[0].internal_ip if self.hosts else None

    @property
    def external_ip(self) -> str | None:
        return self.hosts[0].external_ip if self.hosts else None


@dataclass(frozen=True)
class LaunchResult:
    """What one ``create_node`` call actually created. A partial fill is never silent."""

    request_id: str
    requested: int
    nodes: tuple[ProviderNode, ...] = ()
    offering: Offering | None = None
    """The offering that launched (after any zone failover)."""
    errors: tuple[ProviderError, ...] = field(default=())
    """Why fewer than ``requested`` were created, per offering tried."""

    @property
    def node_ids(self) -> tuple[str, ...]:
        return tuple(node.id for node in self.nodes)

    @property
    def partial(self) -> bool:
        return 0 < len(self.nodes) < self.requested


class NodeProvider(ABC):
    """One cloud's nodes for one cluster."""

    def __init__(self, provider_config: Mapping[str, Any], cluster_name: str) -> None:
        self.provider_config = dict(provider_config)
        self.cluster_name = cluster_name

    # Listing --------------------------------------------------------------------------
    @abstractmethod
    def nodes(self, tag_filters: Mapping[str, str] | None = None) -> list[ProviderNode]:
        """Every non-terminated node of this cluster matching ``tag_filters``, all pages."""

    def non_terminated_nodes(self, tag_filters: Mapping[str, str] | None = None) -> list[str]:
        return [node.id for node in self.nodes(tag_filters)]

    @abstractmethod
    def node(self, node_id: str) -> ProviderNode | None:
        """The node if this cluster owns it (in any state), else None."""

    def node_tags(self, node_id: str) -> dict[str, str]:
        node = self.node(node_id)
        return dict(node.tags) if node else {}

    def internal_ip(self, node_id: str) -> str | None:
        node = self.node(node_id)
        return node.internal_ip if node else None

    def external_ip(self, node_id: str) -> str | None:
        node = self.node(node_id)
        return node.external_ip if node else None

    def is_running(self, node_id: str) -> bool:
        node = self.node(node_id)
        return node is not None and node.state == RUNNING

    def is_terminated(self, node_id: str) -> bool:
        node = self.node(node_id)
        return node is None or node.state not in NON_TERMINATED_STATES

    # Changing -------------------------------------------------------------------------
    @abstractmethod
    def create_node(
        self,
        node_config: Mapping[str, Any],
        tags: Mapping[str, str],
        count: int,
        launch_request_id: str,
        all_or_nothing: bool = False,
    ) -> LaunchResult:
        """Launch ``count`` nodes tagged ``tags`` plus this cluster's ownership tags.

        Retrying with the same ``launch_request_id`` never launches twice. With
        ``all_or_nothing`` either all ``count`` start or none remain. Raises a
        :class:`ProviderError` only when nothing was created.
        """

    @abstractmethod
    def terminate_nodes(self, node_ids: Sequence[str]) -> list[str]:
        """Terminate the owned ones among ``node_ids``; returns the ids acted on."""

    def terminate_node(self, node_id: str) -> None:
        self.terminate_nodes([node_id])

    @abstractmethod
    def set_tags(self, node_ids: Iterable[str], tags: Mapping[str, str]) -> None:
        """Set ``tags`` on the owned ones among ``node_ids`` (batched)."""

    def set_node_tags(self, node_id: str, tags: Mapping[str, str]) -> None:
        self.set_tags([node_id], tags)

    # Helpers for plugins ------------------------------------------------------------------
    def ownership_tags(self, tags: Mapping[str, str]) -> dict[str, str]:
        """``tags`` with the cluster tag forced to this cluster."""
        return {**tags, TAG_CLUSTER: self.cluster_name}
