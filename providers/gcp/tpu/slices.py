"""Cloud TPU slice types as a node_config names them (``acceleratorType`` or
``acceleratorConfig``); offline, no client library."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from accel.tpu_generations import GENERATIONS, generation
from accel.user_input import did_you_mean
from providers.errors import InvalidConfigError

_CONFIG_GENERATIONS = {"V5LITE_POD": "v5litepod"}


def tpu_slice_type(node_config: Mapping[str, Any]) -> str | None:
    """The TPU slice type (``v4-16``) of ``acceleratorType`` or ``acceleratorConfig``
    {type, topology}; None for a node_config that is not a TPU VM."""
    if node_config.get("acceleratorType"):
        return str(node_config["acceleratorType"])
    config = node_config.get("acceleratorConfig")
    if config is None:
        return None
    if not isinstance(config, Mapping):
        raise InvalidConfigError(
            "expected {type, topology}, e.g. {type: V4, topology: 2x2x2}",
            field="acceleratorConfig",
        )
    kind = str(config.get("type", ""))
    gen = generation(_CONFIG_GENERATIONS.get(kind.upper(), kind.replace("_", "")))
    if gen is None:
        known = [g.name.upper() for g in GENERATIONS]
        raise InvalidConfigError(
            f"unknown TPU type {kind[:40]!r} (known: {', '.join(known)})"
            f"{did_you_mean(kind, known)}",
            field="acceleratorConfig.type",
        )
    topology = str(config.get("topology", ""))
    if not re.fullmatch(r"\d+(x\d+)+", topology):
        raise InvalidConfigError(
            f"{topology[:40]!r} is not like 2x2 or 2x2x2", field="acceleratorConfig.topology"
        )
    chips = math.prod(int(dim) for dim in topology.split("x"))
    return f"{gen.name}-{chips * gen.cores_per_chip}"


def slice_field(node_config: Mapping[str, Any]) -> str:
    """The node_config key that names the slice type."""
    return "acceleratorType" if node_config.get("acceleratorType") else "acceleratorConfig"
