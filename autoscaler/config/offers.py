"""Which catalog offer a node_config launches: AWS InstanceType, GCE machineType (+ N1
guestAccelerators), or a Cloud TPU acceleratorType / acceleratorConfig."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from autoscaler.config.errors import ConfigProblem
from autoscaler.config.suggest import did_you_mean
from instance_catalog.catalog import Offer, UnknownInstanceTypeError, load_catalog
from instance_catalog.model import Accelerator, InstanceType

INSTANCE_KEY = {"aws": "InstanceType", "gcp": "machineType"}
"""The node_config key naming a (non-TPU) instance type, per cloud."""


def catalog_offer(node_config: Mapping[str, Any], cloud: str, path: str) -> Offer | None:
    """The offer ``node_config`` (at ``path``) launches; None when it names no instance type.

    Raises :class:`ConfigProblem` naming the field and the closest valid values.
    """
    if cloud == "gcp":
        tpu = _tpu_type(node_config, path)
        if tpu is not None:
            return Offer(_entry(tpu[0], cloud, tpu[1]))
    key = INSTANCE_KEY[cloud]
    name = node_config.get(key)
    if name is None:
        return None
    entry = _entry(str(name).rsplit("/", 1)[-1], cloud, f"{path}.{key}")
    attached = _attached(entry, node_config.get("guestAccelerators"), f"{path}.guestAccelerators")
    return Offer(entry, attached)


def _entry(name: str, cloud: str, path: str) -> InstanceType:
    try:
        return load_catalog().get(name, cloud)
    except UnknownInstanceTypeError as err:
        hint = f"; closest: {', '.join(err.suggestions)}" if err.suggestions else ""
        raise ConfigProblem(path, f"unknown instance type {name!r} on {cloud}{hint}") from None


def _tpu_type(node_config: Mapping[str, Any], path: str) -> tuple[str, str] | None:
    """(TPU slice type, its field path), or None for a non-TPU node_config."""
    from accel.tpu_generations import GENERATIONS, generation

    if "acceleratorType" in node_config:
        return str(node_config["acceleratorType"]), f"{path}.acceleratorType"
    config = node_config.get("acceleratorConfig")
    if config is None:
        return None
    path = f"{path}.acceleratorConfig"
    if not isinstance(config, Mapping):
        raise ConfigProblem(path, "expected {type, topology}, e.g. {type: V4, topology: 2x2x2}")
    kind = str(config.get("type", ""))
    gen = generation(kind.replace("_", ""))
    if gen is None:
        known = [g.name.upper() for g in GENERATIONS]
        raise ConfigProblem(
            f"{path}.type",
            f"unknown TPU type {kind!r} (known: {', '.join(known)}){did_you_mean(kind, known)}",
        )
    topology = str(config.get("topology", ""))
    try:
        chips = math.prod(int(dim) for dim in topology.split("x"))
    except ValueError:
        raise ConfigProblem(f"{path}.topology", f"{topology!r} is not like 2x2 or 2x2x2") from None
    return f"{gen.name}-{chips * gen.cores_per_chip}", path


def _attached(entry: InstanceType, guest: Any, path: str) -> Accelerator | None:
    """The GPUs attached to a GCE N1 machine; built-in GPUs (A2, G2...) need no attachment."""
    if not guest or (entry.accelerator is not None and not entry.attachable_gpus):
        return None
    if not isinstance(guest, list) or len(guest) != 1 or not isinstance(guest[0], Mapping):
        raise ConfigProblem(path, "expected one entry {acceleratorType, acceleratorCount}")
    gpu = str(guest[0].get("acceleratorType", "")).rsplit("/", 1)[-1]
    count = guest[0].get("acceleratorCount", 1)
    options = {a.accelerator.cloud_name or a.accelerator.name: a for a in entry.attachable_gpus}
    if gpu not in options:
        allowed = ", ".join(options) or "none"
        raise ConfigProblem(
            f"{path}[0].acceleratorType",
            f"{gpu!r} cannot be attached to {entry.name} (allowed: {allowed})"
            f"{did_you_mean(gpu, options)}",
        )
    attachment = options[gpu]
    if count not in attachment.counts:
        raise ConfigProblem(
            f"{path}[0].acceleratorCount",
            f"{count!r} x {gpu} on {entry.name} is not allowed "
            f"(allowed: {', '.join(map(str, attachment.counts))})",
        )
    return replace(attachment.accelerator, count=count)
