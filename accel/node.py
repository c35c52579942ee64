"""A node's inventory: detected devices per family, logical resources and overrides.

``detect_node`` runs every family in priority order; ``apply_overrides`` layers the user's
logical quantities on top (Ray's ``--num-gpus`` / ``--resources``), which may exceed the
physical ones. The result names, per accelerator resource, the pool of device ids a worker
can be given and the family whose visible-device variable carries them.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from accel.families import FAMILIES, AcceleratorFamily, FamilyDetection, families_for_resource
from accel.families.base import parse_id_ranges
from accel.probe import HostProbe
from accel.resource_rules import name_error, quantity_error
from accel.user_input import BadJsonError, brief, parse_json

logger = logging.getLogger(__name__)

NODE_RESOURCES_ENV_VAR = "AUTOSCALE_NODE_RESOURCES"
ACCELERATOR_TYPE_PREFIX = "accelerator_type:"
MAX_DEVICES_PER_RESOURCE = 1024
"""Ceiling on a node's logical device count for one accelerator resource (each gets an id)."""


class InvalidOverrideError(ValueError):
    """A resource override or request that cannot be honoured (bad JSON or quantity)."""


@dataclass(frozen=True)
class DevicePool:
    """The device ids behind one accelerator resource on this node."""

    resource: str
    family: str
    ids: tuple[str, ...]
    physical_count: int
    """How many of ``ids`` are real detected devices (overrides may add logical ones)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "resource": self.resource,
            "family": self.family,
            "ids": list(self.ids),
            "physical_count": self.physical_count,
        }


@dataclass(frozen=True)
class NodeInventory:
    """Everything a node advertises, and where each accelerator resource's devices are."""

    resources: Mapping[str, float]
    detections: tuple[FamilyDetection, ...] = ()
    pools: Mapping[str, DevicePool] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def family_for(self, resource: str) -> AcceleratorFamily | None:
        pool = self.pools.get(resource)
        if pool is None:
            return None
        return next(f for f in FAMILIES if f.name == pool.family)

    def to_dict(self) -> dict[str, Any]:
        return {
            "resources": dict(self.resources),
            "accelerators": [d.to_dict() for d in self.detections],
            "device_pools": {name: pool.to_dict() for name, pool in self.pools.items()},
            "warnings": list(self.warnings),
        }


def detect_node(probe: HostProbe | None = None) -> NodeInventory:
    """Detect CPU, memory and every accelerator family on this host."""
    probe = probe or HostProbe.from_host()
    resources: dict[str, float] = {
        "CPU": float(host_cpus(probe)),
        "memory": float(host_memory_bytes(probe)),
    }
    detections: list[FamilyDetection] = []
    pools: dict[str, DevicePool] = {}
    warnings: list[str] = []
    for family in FAMILIES:
        detection = _detect_safely(family, probe)
        if detection is None:
            continue
        if family.resource_name in pools:
            owner = pools[family.resource_name].family
            warnings.append(
                f"{family.display_name} found {detection.count} device(s) but {owner} already "
                f"provides {family.resource_name} on this node; ignoring {family.display_name}"
            )
            continue
        detections.append(detection)
        warnings.extend(detection.warnings)
        ids = tuple(device.id for device in detection.devices)
        pools[family.resource_name] = DevicePool(
            family.resource_name, family.name, ids, physical_count=len(ids)
        )
        resources[family.resource_name] = float(sum(d.share for d in detection.devices))
        for token in detection.tokens:
            resources[f"{ACCELERATOR_TYPE_PREFIX}{token}"] = 1.0
        resources.update(detection.extra_resources)
    return NodeInventory(resources, tuple(detections), pools, tuple(warnings))


def _detect_safely(family: AcceleratorFamily, probe: HostProbe) -> FamilyDetection | None:
    try:
        return family.detect(probe)
    except Exception:  # one broken family must never hide the others
        logger.warning("detection of %s failed", family.display_name, exc_info=True)
        return None


def apply_overrides(
    inventory: NodeInventory,
    resources: Mapping[str, float] | None = None,
    num_gpus: float | None = None,
) -> NodeInventory:
    """Layer logical quantities over detection; larger than physical is allowed, as in Ray.

    An accelerator resource that only an override provides belongs to the first family of
    that resource (``GPU`` goes to NVIDIA, whose variable is ``CUDA_VISIBLE_DEVICES``).
    """
    overrides = dict(resources or {})
    if num_gpus is not None:
        overrides["GPU"] = num_gpus
    if not overrides:
        return inventory
    merged = dict(inventory.resources)
    pools = dict(inventory.pools)
    for name, quantity in overrides.items():
        _check_override(name, quantity)
        families = families_for_resource(name)
        if families:
            count = int(quantity)
            pools[name] = _resized_pool(pools.get(name), name, families[0].name, count)
        if quantity == 0:
            merged.pop(name, None)
        else:
            merged[name] = float(quantity)
    return replace(inventory, resources=merged, pools=pools)


def overrides_from_env(env: Mapping[str, str]) -> dict[str, float]:
    """The ``AUTOSCALE_NODE_RESOURCES`` JSON object, validated."""
    raw = env.get(NODE_RESOURCES_ENV_VAR, "").strip()
    return parse_resources_json(raw, source=NODE_RESOURCES_ENV_VAR) if raw else {}


def parse_resources_json(raw: str, source: str) -> dict[str, float]:
    """Parse ``{"name": quantity, ...}`` with a message that names ``source`` on error."""
    try:
        data = parse_json(raw)
    except BadJsonError as err:
        raise InvalidOverrideError(f"{source}: {err}") from None
    if not isinstance(data, dict):
        raise InvalidOverrideError(f'{source}: expected a JSON object like {{"GPU": 2}}')
    parsed: dict[str, float] = {}
    for name, quantity in data.items():
        error = name_error(name) or _named(name, quantity_error(quantity))
        if error:
            raise InvalidOverrideError(f"{source}: {error}")
        parsed[name] = float(quantity)
    return parsed


def _named(name: str, error: str | None) -> str | None:
    return f"{brief(name)} {error}" if error else None


def _check_override(name: str, quantity: float) -> None:
    error = _named(name, quantity_error(quantity))
    if error:
        raise InvalidOverrideError(f"resource {error}")
    if families_for_resource(name):
        if not float(quantity).is_integer():
            raise InvalidOverrideError(
                f"a node's {name} must be a whole number of devices, got {quantity:g}"
            )
        if quantity > MAX_DEVICES_PER_RESOURCE:
            raise InvalidOverrideError(
                f"a node's {name} must be at most {MAX_DEVICES_PER_RESOURCE} devices, "
                f"got {quantity:g}"
            )


def _resized_pool(pool: DevicePool | None, resource: str, family: str, count: int) -> DevicePool:
    """First ``count`` detected ids, padded with the lowest unused integer ids."""
    detected = pool.ids if pool else ()
    ids = list(detected[:count])
    taken = set(detected)
    candidate = 0
    while len(ids) < count:
        if str(candidate) not in taken:
            ids.append(str(candidate))
        candidate += 1
    return DevicePool(
        resource,
        pool.family if pool else family,
        tuple(ids),
        physical_count=min(count, pool.physical_count if pool else 0),
    )


# CPU and memory ------------------------------------------------------------------------
def host_cpus(probe: HostProbe) -> int:
    """Online CPUs, capped by a cgroup CPU quota (containers), at least 1."""
    online = probe.read_text("/sys/devices/system/cpu/online")
    cpus = len(parse_id_ranges(online)) if online else (os.cpu_count() or 1)
    quota = _cgroup_cpu_quota(probe)
    if quota is not None:
        cpus = min(cpus, max(1, int(quota)))
    return max(1, cpus)


def _cgroup_cpu_quota(probe: HostProbe) -> float | None:
    v2 = probe.read_text("/sys/fs/cgroup/cpu.max")
    if v2:
        quota, _, period = v2.partition(" ")
        if quota != "max" and period:
            return int(quota) / int(period)
        return None
    quota_v1 = probe.read_text("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
    period_v1 = probe.read_text("/sys/fs/cgroup/cpu/cpu.cfs_period_us")
    if quota_v1 and period_v1 and int(quota_v1) > 0:
        return int(quota_v1) / int(period_v1)
    return None


def host_memory_bytes(probe: HostProbe) -> int:
    """Physical memory (``/proc/meminfo``), capped by a cgroup memory limit."""
    total = _meminfo_total(probe)
    if total is None:
        import psutil

        total = int(psutil.virtual_memory().total)
    for limit_path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        limit = probe.read_text(limit_path)
        if limit and limit.isdigit():
            total = min(total, int(limit))
            break
    return total


def _meminfo_total(probe: HostProbe) -> int | None:
    meminfo = probe.read_text("/proc/meminfo") or ""
    for line in meminfo.splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return None


def ray_start_args(inventory: NodeInventory) -> list[str]:
    """``ray start`` flags that advertise exactly this inventory."""
    resources = dict(inventory.resources)
    args = [f"--num-cpus={int(resources.pop('CPU', 0))}"]
    if "GPU" in resources:
        args.append(f"--num-gpus={int(resources.pop('GPU'))}")
    if "memory" in resources:
        args.append(f"--memory={int(resources.pop('memory'))}")
    if resources:
        args.append(f"--resources={json.dumps(resources, sort_keys=True)}")
    return args


__all__ = [
    "DevicePool",
    "InvalidOverrideError",
    "NodeInventory",
    "apply_overrides",
    "detect_node",
    "overrides_from_env",
    "parse_resources_json",
    "ray_start_args",
]
