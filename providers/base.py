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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from providers.errors import CapacityError, ProviderError

if TYPE_CHECKING:
    from instance_catalog.catalog import Offer
    from instance_catalog.live_refresh import RefreshReport, RefreshRequest

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

# A node's state as its cloud reports it, named the same for every cloud (the autoscaler's
# own lifecycle states are in ``autoscaler.lifecycle``).
CLOUD_PENDING = "pending"
CLOUD_RUNNING = "running"
CLOUD_STOPPING = "stopping"
CLOUD_STOPPED = "stopped"
CLOUD_TERMINATING = "terminating"
CLOUD_TERMINATED = "terminated"
LIVE_CLOUD_STATES = frozenset({CLOUD_PENDING, CLOUD_RUNNING, CLOUD_STOPPING, CLOUD_STOPPED})
METADATA_CURL = "curl -fsS --retry 5 --retry-connrefused"
"""How a node's boot script asks its cloud's metadata service: a slow or early-boot failure
is retried (a missing key, 404, is not), so a slice host never falls back to host 0."""


@dataclass(frozen=True)
class Offering:
    """What runs out: an instance type in a zone in a market."""

    instance_type: str
    zone: str | None = None
    market: str = ON_DEMAND

    def __str__(self) -> str:
        return f"{self.instance_type}/{self.zone or 'any zone'}/{self.market}"


@dataclass(frozen=True)
class NodeTypeOffering:
    """What a node type launches: one instance type in one market, in ``zones`` tried in
    order (empty: the cloud or the node config picks the zone)."""

    instance_type: str
    market: str = ON_DEMAND
    zones: tuple[str, ...] = ()
    region: str | None = None
    notes: tuple[str, ...] = ()
    """What the user should know about it (e.g. a zone the cloud's published list lacks)."""

    def offerings(self) -> tuple[Offering, ...]:
        """The units of availability it draws on: one per zone (one zone-less if none)."""
        zones = self.zones or (None,)
        return tuple(Offering(self.instance_type, zone, self.market) for zone in zones)

    def __str__(self) -> str:
        return f"{self.instance_type}/{','.join(self.zones) or 'any zone'}/{self.market}"


@dataclass(frozen=True)
class AccountResource:
    """Something the cluster needs in the account besides nodes (an IAM role, an instance
    profile, a security group, a service account, a firewall rule), tagged as the cluster's."""

    kind: str
    name: str
    id: str | None = None
    created: bool = False
    """Made by this call (else found and reused)."""


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
    cloud_status: str = ""
    """The cloud's own name for its state (``TERMINATED``, ``PREEMPTED``, ``stopped``...)."""
    status_message: str = ""
    """The cloud's own words on why it is in that state (a state reason, a failure)."""
    waiting_for_capacity: bool = False
    """A request the cloud holds until capacity frees up (a queued resource): pending,
    with no timeout of ours, until the cloud grants or fails it."""
    waiting_until: float | None = None
    """When the cloud gives up waiting (seconds since the epoch), if it says."""

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
    in_progress: int = 0
    """Units whose create the cloud accepted but has not finished (not listed yet): pending
    capacity, found by their launch request tag in later rounds, never created again."""
    operations: tuple[str, ...] = ()
    """Handles of create operations left running (see ``NodeProvider.operation_status``)."""

    @property
    def node_ids(self) -> tuple[str, ...]:
        return tuple(node.id for node in self.nodes)

    @property
    def partial(self) -> bool:
        return 0 < len(self.nodes) < self.requested and not self.in_progress


@dataclass(frozen=True)
class OperationStatus:
    """A cloud operation left running by an earlier call, as the cloud shows it now."""

    done: bool
    error: ProviderError | None = None
    """Why it failed (the cloud's own code and words), once done."""


def split_zones(zones: str | Sequence[str] | None) -> tuple[str, ...]:
    """``"a, b"`` or ``["a", "b"]`` as ``("a", "b")``."""
    if isinstance(zones, str):
        zones = zones.split(",")
    return tuple(str(zone).strip() for zone in zones or () if zone and str(zone).strip())


def fill_in_order(
    attempts: Iterable[tuple[Offering, Callable[[], None]]],
    held: Mapping[str, ProviderNode],
    count: int,
    in_progress: Callable[[], bool] = lambda: False,
) -> tuple[Offering | None, list[ProviderError]]:
    """Run each (offering, fill) in turn until ``held`` (which the fills add to) has ``count``
    nodes or ``in_progress()`` (a create left running: trying elsewhere would launch twice):
    a capacity error moves on to the next offering; any other error stops the launch, and is
    raised where nothing is held yet (quota, permission, configuration: no failover).
    Returns the offering the last new node came from and the errors met on the way."""
    errors: list[ProviderError] = []
    launched_with = None
    for offering, fill in attempts:
        before = len(held)
        try:
            fill()
        except CapacityError as error:
            errors.append(error)
        except ProviderError as error:
            if not held:
                raise
            errors.append(error)
            break
        finally:
            launched_with = offering if len(held) > before else launched_with
        if len(held) >= count or in_progress():
            break
    return launched_with, errors


class Cloud(ABC):
    """What the autoscaler knows about one cloud without calling it: how a node config names
    its instance type and offering, how a node boots the agent, how long a tag may be, and
    how the embedded local cloud serves it. Everything here is offline and cheap to import
    (no cloud SDK), so loading a cluster YAML stays fast.
    """

    name: ClassVar[str]
    """``provider.type`` in the cluster YAML, and the instance catalog's cloud name."""
    provider_class: ClassVar[str]
    """``module:Class`` of this cloud's :class:`NodeProvider` (imported on first use)."""
    instance_type_field: ClassVar[str]
    """The node_config key that names the instance type, for messages."""
    tag_value_limit: ClassVar[int]
    """Characters a tag (label) value may hold; reports are chunked to fit."""
    node_identity_script: ClassVar[str]
    """Shell lines, run on a booting node, that set ``NODE_ID`` (the provider's node id) and
    ``HOST`` (the host's index within its slice) from the cloud's metadata service."""
    ray_defaults: ClassVar[Mapping[str, Any]]
    """Ray's documented defaults for this cloud (``available_node_types`` and
    ``head_node_type``), for cluster YAMLs that name no node types."""
    boot_data_limit: ClassVar[int]
    """Bytes of boot script (user data, startup script) the cloud takes for one node."""
    boot_data_name: ClassVar[str]
    """What the cloud calls that boot data, for messages."""
    caches_stopped_nodes: ClassVar[bool] = False
    """Whether the plugin honours ``provider.cache_stopped_nodes`` (stop, then reuse)."""

    @abstractmethod
    def catalog_offer(
        self, node_config: Mapping[str, Any], provider_config: Mapping[str, Any]
    ) -> Offer | None:
        """The catalog entry ``node_config`` launches (GPUs attached where that applies);
        None when it names no instance type. Raises :class:`InvalidConfigError` whose
        ``field`` is the node_config key at fault."""

    @abstractmethod
    def offering(
        self, node_config: Mapping[str, Any], provider_config: Mapping[str, Any]
    ) -> NodeTypeOffering | None:
        """Instance type, market, zones and region ``node_config`` launches on (None without
        an instance type). ``market``, ``region`` and ``availability_zone`` keys in
        ``node_config`` (the node type's own, see ``launch_config``) win over the cloud's own
        keys and over ``provider_config``."""

    def price_region(self, provider_config: Mapping[str, Any]) -> str | None:
        """The region whose catalog prices apply."""
        return provider_config.get("region")

    @abstractmethod
    def with_boot_script(self, node_config: Mapping[str, Any], script: str) -> dict[str, Any]:
        """``node_config`` running ``script`` at first boot, unless the user set their own."""

    def with_ssh_key(
        self, node_config: Mapping[str, Any], ssh_user: str, public_key: str
    ) -> dict[str, Any]:
        """``node_config`` letting ``ssh_user`` log in with ``public_key`` the way Ray's
        launcher sets it up (unchanged where node_config names the key, as EC2's KeyName)."""
        return dict(node_config)

    def auth_notes(
        self, node_type: str, node_config: Mapping[str, Any], public_key: str | None
    ) -> list[str]:
        """What ``auth`` cannot give ``node_type``'s nodes, one line each."""
        return []

    def node_id_of(self, reported: str) -> str:
        """The provider's node id for ``reported``, the ``NODE_ID`` a node's identity script
        gave its agent (which may qualify it, e.g. with its zone)."""
        return reported

    def emulator_settings(self) -> dict[str, Any]:
        """Provider settings the embedded local cloud needs (e.g. throwaway credentials)."""
        return {}

    def refresh_catalog(self, request: RefreshRequest) -> RefreshReport:
        """Rebuild this cloud's catalog (or prices) from its live APIs into the user's
        catalog folder; raises ``CatalogRefreshError`` saying what to fix."""
        from instance_catalog.refresh import CatalogRefreshError

        raise CatalogRefreshError(f"{self.name} has no live catalog refresh")


class NodeProvider(ABC):
    """One cloud's nodes for one cluster."""

    cloud: ClassVar[Cloud]
    """The cloud's offline surface (see :class:`Cloud`)."""

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
        return node is not None and node.state == CLOUD_RUNNING

    def is_terminated(self, node_id: str) -> bool:
        node = self.node(node_id)
        return node is None or node.state not in LIVE_CLOUD_STATES

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

    def operation_status(self, handle: str) -> OperationStatus:
        """How a create left running (``LaunchResult.operations``) stands now (read-only)."""
        return OperationStatus(done=True)

    @abstractmethod
    def terminate_nodes(self, node_ids: Sequence[str]) -> list[str]:
        """Start terminating the owned ones among ``node_ids`` (never waiting for the cloud
        to finish); returns the ids acted on."""

    def terminate_node(self, node_id: str) -> None:
        self.terminate_nodes([node_id])

    @abstractmethod
    def set_tags(self, node_ids: Iterable[str], tags: Mapping[str, str]) -> None:
        """Set ``tags`` on the owned ones among ``node_ids`` (batched)."""

    def set_node_tags(self, node_id: str, tags: Mapping[str, str]) -> None:
        self.set_tags([node_id], tags)

    # Diagnosing -----------------------------------------------------------------------
    def console_output(self, node_id: str) -> str | None:
        """The latest part of the node's console (serial port) output, read-only, if this
        cluster owns the node and the cloud keeps such output (None otherwise: someone
        else's instance is never read). For a node that never reports, its last lines are
        the evidence of why."""
        return None

    # Before launching ------------------------------------------------------------------
    def preflight(self, node_configs: Mapping[str, Mapping[str, Any]]) -> list[str]:
        """Problems that would make launches of these node types (by name) fail, found with
        read-only or dry-run calls: region, zones, network, image, offered types,
        permissions. Empty when nothing is wrong."""
        return []

    def prepare_account(
        self, node_configs: Mapping[str, Mapping[str, Any]], head_type: str | None
    ) -> list[AccountResource]:
        """Make or reuse, idempotently, what the node types need in the account (least
        privilege identities for the head and workers, network rules within the cluster);
        what exists under our names without the cluster tag is left alone."""
        return []

    def account_resources(self) -> list[AccountResource]:
        """The cluster's account resources that exist now (read-only)."""
        return []

    def purge_account(self) -> list[AccountResource]:
        """Delete the cluster's account resources (ours only); what was deleted."""
        return []

    # Helpers for plugins ------------------------------------------------------------------
    def ownership_tags(self, tags: Mapping[str, str]) -> dict[str, str]:
        """``tags`` with the cluster tag forced to this cluster."""
        return {**tags, TAG_CLUSTER: self.cluster_name}
