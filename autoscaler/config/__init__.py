"""The cluster YAML: Ray's format (an existing Ray cluster YAML loads unchanged) plus
per-node-type ``cost_per_hour``, ``idle_timeout_minutes``, ``priority`` and ``market``.

``load_cluster_config(path)`` validates everything offline and fills each node type's
resources and price from the instance catalog; any problem raises one :class:`ConfigError`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from accel.user_input import brief
from autoscaler.config.errors import (
    TOP_LEVEL,
    ConfigError,
    ConfigProblem,
    from_validation_error,
)
from autoscaler.config.file_mounts import head_mounts
from autoscaler.config.node_setup import docker_warnings, node_setup, with_ray_start
from autoscaler.config.node_types import build_node_type, launch_config
from autoscaler.config.ray_layouts import with_node_types
from autoscaler.config.schema import ClusterSpec
from autoscaler.config.yaml_input import YamlInputError, dump_yaml, load_yaml
from autoscaler.planner.model import ExistingNode, Limits, NodeType
from providers import CLOUDS, cloud_for
from providers.base import Cloud

INLINE_PUBLIC_KEY = "ssh_public_key_text"
"""Ours, in the head's YAML: ``auth``'s public key itself (its file stays on the laptop)."""


@dataclass(frozen=True)
class ClusterConfig:
    """A validated cluster YAML with its node types filled."""

    spec: ClusterSpec
    """Everything the YAML said, Ray-only keys included."""
    filled: tuple[NodeType, ...]
    warnings: tuple[str, ...] = ()

    @property
    def cloud(self) -> Cloud:
        """The cloud's offline surface (node_config keys, boot script, tag limits)."""
        return cloud_for(self.spec.provider.type)

    def provider_settings(self) -> dict[str, Any]:
        """The ``provider`` section as the cloud's plugin takes it, with ``offerings``: where
        each node type launches (instance type, market, region, zones), so the plugin knows
        every region and zone the cluster's nodes may be in."""
        offerings = [
            {
                "node_type": node_type.name,
                "instance_type": node_type.offering.instance_type,
                "market": node_type.offering.market,
                "region": node_type.offering.region,
                "zones": list(node_type.offering.zones),
            }
            for node_type in self.filled
            if node_type.offering is not None
        ]
        return {**self.spec.provider.model_dump(exclude_none=True), "offerings": offerings}

    def launch_config(self, node_type: str) -> dict[str, Any]:
        """The node_config a launch of ``node_type`` sends its plugin (market included, and
        ``auth``'s SSH key where the cloud takes it from us)."""
        config = launch_config(self.spec.available_node_types[node_type])
        user, key = (self.spec.auth or {}).get("ssh_user"), self.ssh_public_key()
        return self.cloud.with_ssh_key(config, str(user), key) if user and key else config

    def ssh_public_key(self) -> str | None:
        """``auth``'s public key: ``ssh_public_key`` (a file), else the ``.pub`` beside
        ``ssh_private_key`` (the head's own YAML carries the text)."""
        auth = self.spec.auth or {}
        if auth.get(INLINE_PUBLIC_KEY):
            return str(auth[INLINE_PUBLIC_KEY])
        paths = [auth.get("ssh_public_key")]
        if auth.get("ssh_private_key"):
            paths.append(f"{auth['ssh_private_key']}.pub")
        for path in filter(None, paths):
            try:
                return Path(str(path)).expanduser().read_text().strip()
            except OSError:
                continue
        return None

    @property
    def head_node_type(self) -> str | None:
        return self.spec.head_node_type

    def node_types(self) -> tuple[NodeType, ...]:
        """Every node type, the head's included, in YAML order."""
        return self.filled

    def node_type(self, name: str) -> NodeType:
        return next(t for t in self.filled if t.name == name)

    def limits(self) -> Limits:
        return Limits(
            max_workers=self.spec.max_workers,
            upscaling_speed=self.spec.upscaling_speed,
            accelerator_conservation=self.spec.accelerator_conservation,
        )

    def idle_timeout_minutes(self, node_type: str) -> float:
        own = self.spec.available_node_types[node_type].idle_timeout_minutes
        return self.spec.idle_timeout_minutes if own is None else own

    def head_existing_nodes(self) -> tuple[ExistingNode, ...]:
        """The head node as running capacity, fully free (one record per host)."""
        if self.head_node_type is None:
            return ()
        head = self.node_type(self.head_node_type)
        return tuple(
            ExistingNode(
                node_type=head.name,
                free={**head.resources, **(head.head_resources if host == 0 else {})},
                device_free={
                    name: (head.resources[name] / count,) * count
                    for name, count in head.devices.items()
                },
                host=host,
                node_id="head" if head.hosts == 1 else f"head/{host}",
                worker=False,
            )
            for host in range(head.hosts)
        )

    def ignored_keys(self) -> tuple[str, ...]:
        """Dotted paths of the Ray keys present that we keep but do not act on."""
        return tuple(self.spec.ignored_keys())

    def not_acted_on(self) -> tuple[str, ...]:
        """One warning line per Ray key present that we do not act on, naming it and why."""
        reasons = self.spec.NOT_ACTED_ON
        lines = [
            f"{key}: Ray key not acted on ({reasons.get(key.rsplit('.', 1)[-1], 'kept only')})"
            for key in self.ignored_keys()
        ]
        lines += docker_warnings(self.spec)
        if self.spec.auth:
            key = self.ssh_public_key()
            for name in self.spec.available_node_types:
                lines += self.cloud.auth_notes(name, self.launch_config(name), key)
        if self.spec.provider.cache_stopped_nodes and not self.cloud.caches_stopped_nodes:
            lines.append(
                f"provider.cache_stopped_nodes: not supported on {self.cloud.name}: idle nodes "
                "are deleted, not stopped"
            )
        mounts = list(self.spec.file_mounts or {})
        for path in self.spec.cluster_synced_files or ():
            if not any(path == m or path.startswith(m.rstrip("/") + "/") for m in mounts):
                lines.append(
                    f"cluster_synced_files: {path!r} not acted on (only paths under file_mounts "
                    "reach the workers: add it to file_mounts)"
                )
        return tuple(lines)

    def to_yaml(self) -> str:
        """The cluster YAML as given (keys set)."""
        return dump_yaml(self.spec.model_dump(mode="json", exclude_unset=True))

    def head_yaml(self) -> str:
        """The cluster YAML the head's own monitor runs with: each file mount read from its
        remote path on the head, where the head's boot data put it (as Ray's launcher does)."""
        data = self.spec.model_dump(mode="json", exclude_unset=True)
        if data.get("file_mounts"):
            data["file_mounts"] = head_mounts(data["file_mounts"])
        key = self.ssh_public_key()
        if key:
            data["auth"] = {**data.get("auth", {}), INLINE_PUBLIC_KEY: key}
        return dump_yaml(data)


def load_cluster_config(path: str | Path) -> ClusterConfig:
    """Read, validate and fill ``path``; raises :class:`ConfigError` listing every problem."""
    source = str(path)
    try:
        data = load_yaml(Path(path).read_text())
    except OSError as err:
        raise ConfigError(source, [f"cannot read: {err.strerror or err}"]) from None
    except (YamlInputError, UnicodeDecodeError) as err:
        raise ConfigError(source, [str(err)]) from None
    return parse_cluster_config(data, source)


def parse_cluster_config(data: Any, source: str = "<config>") -> ClusterConfig:
    """Validate and fill already-parsed YAML."""
    if not isinstance(data, dict):
        raise ConfigError(
            source, [f"{TOP_LEVEL}: expected a mapping of cluster settings, got {brief(data)}"]
        )
    warnings: list[str] = []
    provider = data.get("provider")
    kind = provider.get("type") if isinstance(provider, dict) else None
    if isinstance(kind, str) and kind in CLOUDS:
        data = with_node_types(data, cloud_for(kind), warnings)
        data = with_ray_start(data, warnings)
    try:
        spec = ClusterSpec.model_validate(data)
    except ValidationError as err:
        raise from_validation_error(source, err) from None
    cloud = cloud_for(spec.provider.type)
    settings = spec.provider.model_dump(exclude_none=True)
    if cloud.price_region(settings) is None:
        warnings.append("provider.region is not set: prices are each type's cheapest region's")
    filled, problems = [], []
    for name, node_type in spec.available_node_types.items():
        try:
            built = build_node_type(name, node_type, cloud, settings, warnings)
            if name == spec.head_node_type and node_type.max_workers is None:
                # As in Ray: the head's type launches no workers unless its max_workers says so.
                built = replace(built, max_workers=0)
            filled.append(built)
        except ConfigProblem as problem:
            problems.append(str(problem))
    problems += _setup_problems(spec)
    if problems:
        raise ConfigError(source, problems)
    return ClusterConfig(spec, tuple(filled), tuple(warnings))


def _setup_problems(spec: ClusterSpec) -> list[str]:
    """What would stop a node's setup: a container without an image."""
    problems = []
    for name in spec.available_node_types:
        for head in (True, False):
            try:
                node_setup(spec, name, head)
            except ConfigProblem as problem:
                problems.append(str(problem))
    return problems


__all__ = ["ClusterConfig", "ConfigError", "load_cluster_config", "parse_cluster_config"]
