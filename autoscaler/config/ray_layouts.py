"""The other ways Ray lets a cluster YAML be written, read as ``available_node_types``.

* No node types at all (Ray's minimal examples): the cloud's documented Ray defaults.
* The legacy layout (``head_node`` / ``worker_nodes`` node configs, top-level
  ``min_workers``): Ray's defaults with those node configs in place, as Ray still does.
* ``head_node`` / ``worker_nodes`` beside ``available_node_types``: defaults merged under the
  head's and the workers' own node configs (theirs win).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from providers.base import Cloud

LEGACY_KEYS = ("head_node", "worker_nodes", "min_workers")


def with_node_types(data: Mapping[str, Any], cloud: Cloud, warnings: list[str]) -> dict[str, Any]:
    """``data`` with ``available_node_types`` filled the way Ray fills it."""
    if "available_node_types" in data:
        return _with_shared_node_configs(data)
    defaults = copy.deepcopy(cloud.ray_defaults)
    node_types: dict[str, Any] = defaults["available_node_types"]
    head = defaults["head_node_type"]
    worker = next(name for name in node_types if name != head)
    legacy = {key: data[key] for key in LEGACY_KEYS if data.get(key) not in (None, {})}
    filled = {k: v for k, v in data.items() if k not in LEGACY_KEYS}
    if isinstance(legacy.get("head_node"), Mapping) or isinstance(
        legacy.get("worker_nodes"), Mapping
    ):
        for name, key in ((head, "head_node"), (worker, "worker_nodes")):
            if isinstance(legacy.get(key), Mapping):
                # Ray's defaults under the legacy node config (an InstanceType included).
                node_config = {**node_types[name].get("node_config", {}), **legacy[key]}
                node_types[name] = {**node_types[name], "node_config": node_config}
                node_types[name].pop("resources", None)  # the catalog fills the real ones
        if isinstance(legacy.get("min_workers"), int):
            node_types[worker]["min_workers"] = legacy["min_workers"]
        warnings.append(
            "head_node/worker_nodes is Ray's legacy layout: read as node types "
            f"{head} and {worker} (write available_node_types instead)"
        )
    else:
        filled.update({k: v for k, v in data.items() if k in LEGACY_KEYS})
        warnings.append(
            f"no available_node_types: using Ray's defaults for {cloud.name} ({head} and {worker})"
        )
    filled["available_node_types"] = node_types
    filled.setdefault("head_node_type", head)
    return filled


def _with_shared_node_configs(data: Mapping[str, Any]) -> dict[str, Any]:
    head_defaults, worker_defaults = data.get("head_node"), data.get("worker_nodes")
    node_types = data.get("available_node_types")
    if not isinstance(node_types, Mapping) or not (
        isinstance(head_defaults, Mapping) or isinstance(worker_defaults, Mapping)
    ):
        return dict(data)
    merged = {}
    for name, node_type in node_types.items():
        defaults = head_defaults if name == data.get("head_node_type") else worker_defaults
        if isinstance(node_type, Mapping) and isinstance(defaults, Mapping):
            node_config = node_type.get("node_config")
            own = node_config if isinstance(node_config, Mapping) else {}
            node_type = {**node_type, "node_config": {**defaults, **own}}
        merged[name] = node_type
    return {**data, "available_node_types": merged}
