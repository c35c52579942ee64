"""The cluster YAML: Ray's format (an existing Ray cluster YAML loads unchanged) plus
per-node-type ``cost_per_hour``, ``idle_timeout_minutes``, ``priority`` and ``market``.

``load_cluster_config(path)`` validates everything offline and fills each node type's
resources and price from the instance catalog; any problem raises one :class:`ConfigError`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from accel.user_input import brief
from autoscaler.config.errors import (
    TOP_LEVEL,
    ConfigError,
    ConfigProblem,
    from_validation_error,
)
from autoscaler.config.node_types import build_node_type, launch_config
from autoscaler.config.ray_layouts import with_node_types
from autoscaler.config.schema import ClusterSpec
from autoscaler.config.yaml_input import YamlInputError, load_yaml
from autoscaler.planner.model import ExistingNode, Limits, NodeType
from providers import CLOUDS, cloud_for
from providers.base import Cloud


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
        """The node_config a launch of ``node_type`` sends its plugin (market included)."""
        return launch_config(self.spec.available_node_types[node_type])

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

    def to_yaml(self) -> str:
        """The cluster YAML as given (keys set), e.g. for the head node's own monitor."""
        return yaml.safe_dump(self.spec.model_dump(mode="json", exclude_unset=True))


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
    if problems:
        raise ConfigError(source, problems)
    return ClusterConfig(spec, tuple(filled), tuple(warnings))


__all__ = ["ClusterConfig", "ConfigError", "load_cluster_config", "parse_cluster_config"]
