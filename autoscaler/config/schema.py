"""The cluster YAML's shape: Ray's keys, plus ours, as pydantic models.

Ray keys we accept and keep but do not act on are listed in each model's ``RAY_ONLY``.
Defaults follow Ray's (``max_workers`` 2, ``upscaling_speed`` 1.0, ``idle_timeout_minutes`` 5).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    field_validator,
    model_validator,
)

from accel.user_input import brief, did_you_mean
from autoscaler.ray_cluster.address import check_address
from providers import CLOUDS

Commands = list[str]
Market = Literal["spot", "on-demand"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    RAY_ONLY: ClassVar[tuple[str, ...]] = ()
    """Ray keys accepted and kept, not acted on."""

    def ray_only_keys(self) -> list[str]:
        """The Ray keys present with a value that asks for something (not empty or off)."""
        return [
            key
            for key in self.RAY_ONLY
            if key in self.model_fields_set and getattr(self, key) not in (None, False, [], {}, "")
        ]


class ProviderConfig(BaseModel):
    """``provider``: the cloud and where; other keys belong to the cloud's plugin."""

    model_config = ConfigDict(extra="allow", frozen=True)

    type: str
    """A registered cloud (``providers.CLOUDS``)."""
    region: str | None = None
    availability_zone: list[str] | str | None = None
    """Zones in order of preference (a list, or ``"a,b"``)."""
    endpoint_url: str | None = None
    emulator: bool = False
    cache_stopped_nodes: bool | None = None
    agent_package: str | None = None
    """What nodes pip-install to run the agent (default: this version of accel-autoscaler)."""

    @field_validator("type")
    @classmethod
    def _registered_cloud(cls, kind: str) -> str:
        if kind not in CLOUDS:
            raise ValueError(
                f"{brief(kind)} is not allowed (allowed: {', '.join(sorted(CLOUDS))})"
                f"{did_you_mean(kind, CLOUDS)}"
            )
        return kind


class DockerConfig(BaseModel):
    """``docker`` (the cluster's, or a node type's over it): Ray's container keys, typed;
    Ray's other keys are kept and warned about (``node_setup.docker_warnings``)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    image: str | None = None
    head_image: str | None = None
    worker_image: str | None = None
    container_name: str | None = None
    pull_before_run: bool | None = None
    pull: bool | None = None
    """Ray's older name of ``pull_before_run``."""
    run_options: list[str] | None = None
    head_run_options: list[str] | None = None
    worker_run_options: list[str] | None = None
    disable_shm_size_detection: bool | None = None
    disable_automatic_runtime_detection: bool | None = None


class NodeTypeConfig(_Section):
    """One entry of ``available_node_types``."""

    RAY_ONLY = ()

    node_config: dict[str, Any] = Field(default_factory=dict)
    resources: dict[str, NonNegativeFloat] | None = None
    """What one host advertises; catalog values fill the keys not given."""
    min_workers: NonNegativeInt = 0
    max_workers: NonNegativeInt | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    worker_setup_commands: Commands | None = None
    initialization_commands: Commands | None = None
    docker: DockerConfig | None = None
    # Ours.
    cost_per_hour: NonNegativeFloat | None = None
    idle_timeout_minutes: NonNegativeFloat | None = None
    priority: int = 0
    market: Market | None = None
    """None: spot when node_config asks the cloud for spot capacity, else on-demand."""
    region: str | None = None
    """Launch this node type in its own region (else the provider's)."""
    availability_zone: list[str] | str | None = None
    """Its own zones, in order of preference (a list, or ``"a,b"``)."""
    bootstrap_before: Commands | None = None
    """Shell commands run on the node before the agent is installed and started."""
    bootstrap_after: Commands | None = None
    """Shell commands run after the agent has started."""
    ray_start: bool = False
    """Have the agent run `ray start` with the detected resources."""
    lifecycle_timeouts_s: (
        dict[
            Literal["requested", "queued", "allocated", "waiting_for_report", "terminating"],
            NonNegativeFloat,
        ]
        | None
    ) = None
    """Seconds a node of this type may stay in a lifecycle state before it is replaced (or,
    terminating, asked to delete again); the defaults are in ``autoscaler.lifecycle``."""

    @model_validator(mode="after")
    def _min_within_max(self) -> NodeTypeConfig:
        if self.max_workers is not None and self.min_workers > self.max_workers:
            raise ValueError(
                f"min_workers: {self.min_workers} exceeds max_workers ({self.max_workers})"
            )
        return self


class ClusterSpec(_Section):
    """The whole cluster YAML."""

    RAY_ONLY = (
        "file_mounts_sync_continuously",
        "rsync_exclude",
        "rsync_filter",
        "metadata",
        "no_restart",
        # Deprecated in Ray.
        "min_workers",
        "initial_workers",
        "autoscaling_mode",
        "target_utilization_fraction",
        "worker_default_node_type",
    )
    NOT_ACTED_ON: ClassVar[dict[str, str]] = {
        "metadata": "Ray's launcher metadata",
        "file_mounts_sync_continuously": "file_mounts reach each node once, at its boot",
        "rsync_exclude": "file_mounts are packed whole into the boot data, no rsync",
        "rsync_filter": "file_mounts are packed whole into the boot data, no rsync",
        "no_restart": "nodes are set up once, at boot",
        "min_workers": "Ray's legacy key: set min_workers per node type",
        "initial_workers": "Ray's legacy key: set min_workers per node type",
        "autoscaling_mode": "Ray's legacy key",
        "target_utilization_fraction": "Ray's legacy key: use upscaling_speed",
        "worker_default_node_type": "Ray's legacy key",
    }
    """Why each Ray key is not acted on, for its warning line."""

    cluster_name: str = "default"
    max_workers: NonNegativeInt = 2
    """Worker units across the cluster, the head not counted."""
    upscaling_speed: NonNegativeFloat = 1.0
    idle_timeout_minutes: NonNegativeFloat = 5
    accelerator_conservation: Literal["spare", "strict"] = "spare"
    """May CPU-only work use room on accelerator nodes? ``spare``: yes, on nodes that exist or
    are launched for accelerator work, but none is launched for it while a plain type fits;
    ``strict``: never while a plain type fits it."""
    provider: ProviderConfig
    available_node_types: dict[str, NodeTypeConfig] = Field(min_length=1)
    head_node_type: str | None = None
    """Optional: without one, the autoscaler runs outside the cluster and launches no head."""
    ray_address: str | None = None
    """Ours: the Ray cluster's GCS address (``host:port``) whose pending work drives this
    cluster and which ``ray_start`` workers join (``monitor --ray-address`` and
    ``$RAY_ADDRESS`` win over it)."""
    auth: dict[str, Any] | None = None
    docker: DockerConfig | None = None
    file_mounts: dict[str, str] | None = None
    file_mounts_sync_continuously: bool | None = None
    cluster_synced_files: list[str] | None = None
    rsync_exclude: list[str] | None = None
    rsync_filter: list[str] | None = None
    initialization_commands: Commands | None = None
    setup_commands: Commands | None = None
    head_setup_commands: Commands | None = None
    worker_setup_commands: Commands | None = None
    head_start_ray_commands: Commands | None = None
    worker_start_ray_commands: Commands | None = None
    metadata: dict[str, Any] | None = None
    no_restart: Any = None
    min_workers: Any = None
    initial_workers: Any = None
    autoscaling_mode: Any = None
    target_utilization_fraction: Any = None
    worker_default_node_type: Any = None
    head_node: Any = None
    worker_nodes: Any = None

    @field_validator("ray_address")
    @classmethod
    def _host_and_port(cls, address: str | None) -> str | None:
        return None if address is None else check_address(address)

    @model_validator(mode="after")
    def _head_is_a_node_type(self) -> ClusterSpec:
        names = list(self.available_node_types)
        if self.head_node_type is not None and self.head_node_type not in names:
            raise ValueError(
                f"head_node_type: {brief(self.head_node_type)} is not in available_node_types"
                f"{did_you_mean(self.head_node_type, names)}"
            )
        return self

    def ignored_keys(self) -> list[str]:
        """Dotted paths of the Ray keys present that we keep but do not act on."""
        keys = self.ray_only_keys()
        for name, node_type in self.available_node_types.items():
            keys += [f"available_node_types.{name}.{key}" for key in node_type.ray_only_keys()]
        return keys


def model_at(loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model whose keys live at ``loc`` (for unknown-key suggestions)."""
    if not loc:
        return ClusterSpec
    if len(loc) == 2 and loc[0] == "available_node_types":
        return NodeTypeConfig
    return None
