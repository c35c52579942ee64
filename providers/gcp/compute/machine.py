"""A Compute Engine node_config read offline: its machine type and the GPUs it attaches."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from accel.user_input import did_you_mean
from instance_catalog.model import Accelerator, InstanceType
from providers.errors import InvalidConfigError

GPU_FIELD = "guestAccelerators[0].acceleratorType"


def machine_type_name(node_config: Mapping[str, Any]) -> str | None:
    """``machineType`` without its URL prefix (``zones/z/machineTypes/n1-standard-8``)."""
    name = node_config.get("machineType")
    return None if name is None else str(name).rsplit("/", 1)[-1]


def guest_entries(guest: Any) -> Any:
    """``guestAccelerators`` as a list (Ray's examples also write its one entry bare)."""
    return [guest] if isinstance(guest, Mapping) else guest


def attached_gpu_name(node_config: Mapping[str, Any]) -> str | None:
    """The GCE accelerator type of ``guestAccelerators`` (``nvidia-tesla-t4``), if any."""
    guest = guest_entries(node_config.get("guestAccelerators"))
    if not guest or not isinstance(guest, list) or not isinstance(guest[0], Mapping):
        return None
    return str(guest[0].get("acceleratorType", "")).rsplit("/", 1)[-1] or None


def attached(entry: InstanceType, guest: Any) -> Accelerator | None:
    """The GPUs attached to an N1 machine; built-in GPUs (A2, G2...) need no attachment."""
    guest = guest_entries(guest)
    if not guest or (entry.accelerator is not None and not entry.attachable_gpus):
        return None
    if not isinstance(guest, list) or len(guest) != 1 or not isinstance(guest[0], Mapping):
        raise InvalidConfigError(
            "expected one entry {acceleratorType, acceleratorCount}", field="guestAccelerators"
        )
    gpu = str(guest[0].get("acceleratorType", "")).rsplit("/", 1)[-1]
    count = guest[0].get("acceleratorCount", 1)
    options = {a.accelerator.cloud_name or a.accelerator.name: a for a in entry.attachable_gpus}
    if gpu not in options:
        raise InvalidConfigError(
            f"{gpu[:60]!r} cannot be attached to {entry.name} "
            f"(allowed: {', '.join(options) or 'none'}){did_you_mean(gpu, options)}",
            field=GPU_FIELD,
        )
    attachment = options[gpu]
    if count not in attachment.counts:
        raise InvalidConfigError(
            f"{count!r} x {gpu} on {entry.name} is not allowed "
            f"(allowed: {', '.join(map(str, attachment.counts))})",
            field="guestAccelerators[0].acceleratorCount",
        )
    return replace(attachment.accelerator, count=count)
