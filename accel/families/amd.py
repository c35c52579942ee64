"""AMD GPUs, found in the KFD topology the way the ROCm runtime enumerates them.

ROCm lists ``/sys/class/kfd/kfd/topology/nodes/<n>`` in node order and takes every node with
SIMDs (``simd_count > 0``) as a GPU agent; CPU nodes are skipped. Where ``/dev/dri`` is
present, a node whose render device ``/dev/dri/renderD<minor>`` is missing is skipped too,
as ROCm does inside a container that was given only some GPUs.

Two variables restrict devices, in layers. ``ROCR_VISIBLE_DEVICES`` (the ROCr runtime) filters
the physical GPUs first, by index or ``GPU-<unique id>`` UUID; HIP then numbers what is left
from 0, and ``HIP_VISIBLE_DEVICES`` (or ``CUDA_VISIBLE_DEVICES``, which HIP also honours)
indexes into that. So device ids here are HIP ids: relative to ROCR when it is set. A worker
gets only ``HIP_VISIBLE_DEVICES`` (as current Ray sets it; Ray's documentation shows
``ROCR_VISIBLE_DEVICES``, which older Ray set); an inherited ``ROCR_VISIBLE_DEVICES`` is left
as it is, so both layers keep agreeing. The opt-out variables of both are honoured.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from accel.families.base import AcceleratorFamily, Device, parse_id_list
from accel.families.sysfs import numbered_nodes, read_hex
from accel.families.values import bytes_to_mib, parse_int
from accel.family_rules import AMD
from accel.names import resolve_type

if TYPE_CHECKING:
    from accel.probe import HostProbe

KFD_NODES = "/sys/class/kfd/kfd/topology/nodes"
AMD_VENDOR_ID = 0x1002
ROCR_VISIBLE_DEVICES = "ROCR_VISIBLE_DEVICES"
HIP_VISIBLE_DEVICES = AMD.visible_env_var
CUDA_VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"
_FRAME_BUFFER_HEAPS = frozenset({1, 2})  # HSA heap types: frame buffer public / private

# PCI device id -> canonical type (Ray's table, extended from ROCm's GPU operator rules).
AMD_DEVICE_TYPES: dict[int, str] = {
    0x66A1: "AMD-Instinct-MI50",
    0x738C: "AMD-Instinct-MI100",
    0x738E: "AMD-Instinct-MI100",
    0x7408: "AMD-Instinct-MI250X",
    0x740C: "AMD-Instinct-MI250X-MI250",
    0x740F: "AMD-Instinct-MI210",
    0x7410: "AMD-Instinct-MI210",  # virtual function
    0x74A0: "AMD-Instinct-MI300A",
    0x74A1: "AMD-Instinct-MI300X-OAM",
    0x74B5: "AMD-Instinct-MI300X-OAM",  # virtual function (Azure ND MI300X v5)
    0x74A9: "AMD-Instinct-MI300X-HF",
    0x74BD: "AMD-Instinct-MI300X-HF",
    0x74A2: "AMD-Instinct-MI308X-OAM",
    0x74A8: "AMD-Instinct-MI308X",
    0x74B6: "AMD-Instinct-MI308X",
    0x74A5: "AMD-Instinct-MI325X-OAM",
    0x74B9: "AMD-Instinct-MI325X-OAM",  # virtual function
    0x75A0: "AMD-Instinct-MI350X-OAM",
    0x75B0: "AMD-Instinct-MI350X",  # virtual function
    0x75A3: "AMD-Instinct-MI355X-OAM",
    0x75B3: "AMD-Instinct-MI355X",  # virtual function
    0x7362: "AMD-Radeon-Pro-V520",  # AWS g4ad
    0x7460: "AMD-Radeon-Pro-V710",
    0x7461: "AMD-Radeon-Pro-V710",  # MxGPU virtual function (Azure NVv5)
    0x6798: "AMD-Radeon-R9-200-HD-7900",
    0x6799: "AMD-Radeon-HD-7900",
    0x679A: "AMD-Radeon-HD-7900",
    0x679B: "AMD-Radeon-HD-7900",
}


class AmdGpu(AcceleratorFamily, rules=AMD):
    def probe_devices(self, probe: HostProbe) -> list[Device]:
        """GPU agents of the KFD topology, after ``ROCR_VISIBLE_DEVICES``, with HIP ids."""
        devices = [
            device
            for node, _ in numbered_nodes(probe, KFD_NODES)
            if (device := _gpu_node(probe, node)) is not None
        ]
        devices = [replace(device, index=i, id=str(i)) for i, device in enumerate(devices)]
        if ROCR_VISIBLE_DEVICES in probe.env:
            devices = _rocr_filter(devices, parse_id_list(probe.env[ROCR_VISIBLE_DEVICES]))
        return [replace(device, index=i, id=str(i)) for i, device in enumerate(devices)]

    @property
    def noset_env_vars(self) -> tuple[str, ...]:
        """HIP's opt-outs, plus ROCR's for deployments written for Ray's ROCR-setting days."""
        return (
            *super().noset_env_vars,
            f"AUTOSCALE_NOSET_{ROCR_VISIBLE_DEVICES}",
            f"RAY_EXPERIMENTAL_NOSET_{ROCR_VISIBLE_DEVICES}",
        )

    def visible_ids(self, env: Mapping[str, str]) -> list[str] | None:
        """``HIP_VISIBLE_DEVICES``, else ``CUDA_VISIBLE_DEVICES`` (HIP honours both)."""
        for var in (HIP_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES):
            if var in env:
                return parse_id_list(env[var])
        return None


def _gpu_node(probe: HostProbe, node: int) -> Device | None:
    """One KFD node as a device (index and id set later), ``None`` for CPU or hidden nodes."""
    base = f"{KFD_NODES}/{node}"
    props = _parse_properties(probe.read_text(f"{base}/properties"))
    if props.get("simd_count", 0) <= 0 or props.get("vendor_id", AMD_VENDOR_ID) != AMD_VENDOR_ID:
        return None
    minor = props.get("drm_render_minor")
    render = f"/sys/class/drm/renderD{minor}/device" if minor else None
    if minor and probe.exists("/dev/dri") and not probe.exists(f"/dev/dri/renderD{minor}"):
        return None
    device_id = props.get("device_id") or (read_hex(probe, f"{render}/device") if render else None)
    product = probe.read_text(f"{render}/product_name") if render else None
    accelerator_type = AMD_DEVICE_TYPES.get(device_id) if device_id else None
    if accelerator_type is None and product:
        accelerator_type = resolve_type(product, family="amd")
    unique_id = props.get("unique_id", 0)
    return Device(
        index=0,
        id="",
        model=product or accelerator_type or _fallback_model(device_id),
        accelerator_type=accelerator_type,
        uuid=f"GPU-{unique_id:016x}" if unique_id else None,
        memory_mib=_memory_mib(probe, base),
        details=_details(node, props, device_id),
    )


def _details(node: int, props: Mapping[str, int], device_id: int | None) -> dict[str, Any]:
    details: dict[str, Any] = {"kfd_node": node}
    if device_id:
        details["pci_device_id"] = f"0x{device_id:04x}"
    if "location_id" in props:
        details["pci_bus_id"] = _bus_id(props.get("domain", 0), props["location_id"])
    if props.get("gfx_target_version"):
        details["gfx_target"] = _gfx_target(props["gfx_target_version"])
    if props.get("simd_per_cu"):
        details["compute_units"] = props["simd_count"] // props["simd_per_cu"]
    for key in ("num_xcc", "drm_render_minor", "hive_id"):
        if props.get(key):
            details[key] = props[key]
    return details


def _parse_properties(text: str | None) -> dict[str, int]:
    """KFD ``properties``: one ``name value`` pair a line, values integers."""
    values: dict[str, int] = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and (value := parse_int(parts[1])) is not None:
            values[parts[0]] = value
    return values


def _memory_mib(probe: HostProbe, node_dir: str) -> int | None:
    """Frame-buffer memory of a node from ``mem_banks/*/properties``."""
    total = 0
    for bank in probe.glob(f"{node_dir}/mem_banks/*/properties"):
        props = _parse_properties(probe.read_text(bank))
        if props.get("heap_type") in _FRAME_BUFFER_HEAPS:
            total += props.get("size_in_bytes", 0)
    return bytes_to_mib(total)


def _bus_id(domain: int, location_id: int) -> str:
    """PCI address from KFD's ``location_id`` (bus << 8 | device << 3 | function)."""
    bus, device, function = location_id >> 8, (location_id >> 3) & 0x1F, location_id & 0x7
    return f"{domain:04x}:{bus:02x}:{device:02x}.{function:x}"


def _gfx_target(version: int) -> str:
    """``90402`` -> ``gfx942``; ``90010`` -> ``gfx90a`` (stepping is one hex digit)."""
    major, minor, stepping = version // 10000, (version // 100) % 100, version % 100
    return f"gfx{major}{minor}{stepping:x}"


def _fallback_model(device_id: int | None) -> str:
    return f"AMD GPU [1002:{device_id:04x}]" if device_id else "AMD GPU"


def _rocr_filter(devices: Sequence[Device], tokens: Sequence[str]) -> list[Device]:
    """Devices ROCr keeps for ``ROCR_VISIBLE_DEVICES``: indices or UUIDs, in list order."""
    by_token: dict[str, Device] = {}
    for device in devices:
        by_token[device.id] = device
        if device.uuid:
            by_token[device.uuid.lower()] = device
    chosen: list[Device] = []
    for token in tokens:
        device = by_token.get(token.lower())
        if device is not None and device not in chosen:
            chosen.append(device)
    return chosen
