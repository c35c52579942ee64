"""FuriosaAI NPUs (WARBOY, RNGD), read the way ``furiosa-smi`` and the device API find them.

``furiosa-smi info`` prints a JSON list with ``--format json`` (RNGD releases; ``--output json``
on WARBOY-era releases): architecture, ``npu<N>`` device name, UUID, serial and PCI address.
Without the tool, the device API's own scan is repeated: device files ``/dev/rngd/npu<N>...``
(RNGD) or ``/dev/npu<N>pe<cores>`` (WARBOY), each confirmed by its management node's
``platform_type`` (``/sys/class/rngd_mgmt/rngd!npu<N>mgmt`` or
``/sys/class/npu_mgmt/npu<N>_mgmt``) reading ``FuriosaAI``.

``FURIOSA_DEVICES`` is the runtime's own variable and takes ``npu:<N>`` tokens (the form
``furiosa-llm --devices`` takes too); ``npu:<N>:<cores>`` names cores of one device, and an
architecture count such as ``warboy(2)*1`` names no particular device.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from accel.families.base import AcceleratorFamily, Device, parse_id_list
from accel.families.tools import run_json
from accel.families.values import parse_int, pci_address
from accel.family_rules import FURIOSA
from accel.names import resolve_type

if TYPE_CHECKING:
    from accel.probe import HostProbe

FURIOSA_SMI = "furiosa-smi"
TOOL_DIRS = ("/usr/bin", "/usr/local/bin")
DEVICE_PREFIX = "npu:"
FURIOSA_PLATFORMS = frozenset({"FuriosaAI", "VITIS"})
_DEVICE_TOKEN = re.compile(r"^(?:npu:?)?(\d+)(?:(?::|pe)[\d-]+)?$", re.IGNORECASE)
_DEV_NAME = re.compile(r"^npu(\d+)")


@dataclass(frozen=True)
class _Layout:
    """Where one architecture's device files and management nodes live."""

    arch: str
    dev_dir: str
    dev_file: re.Pattern[str]
    mgmt_dir: str


LAYOUTS = (
    _Layout("rngd", "/dev/rngd", re.compile(r"^npu(\d+)(pe[\d-]+)?$"), "rngd_mgmt/rngd!npu{}mgmt"),
    _Layout("warboy", "/dev", re.compile(r"^npu(\d+)(pe[\d-]+)?$"), "npu_mgmt/npu{}_mgmt"),
)

# Canonical type per architecture as furiosa-smi names it (normalised like Ray: "+" -> "PLUS",
# other non-alphanumerics dropped), and the memory each part carries.
ARCH_TYPES: dict[str, str] = {
    "WARBOY": "Furiosa-WARBOY",
    "RNGD": "Furiosa-RNGD",
    "RNGDS": "Furiosa-RNGD-S",
    "RNGDMAX": "Furiosa-RNGD-Max",
    "RNGDPLUS": "Furiosa-RNGD-Plus",
}
ARCH_MEMORY_MIB: dict[str, int] = {"WARBOY": 16 * 1024, "RNGD": 48 * 1024}


class FuriosaNpu(AcceleratorFamily, rules=FURIOSA):
    def probe_devices(self, probe: HostProbe) -> list[Device]:
        """Devices from ``furiosa-smi info``; without it, device files confirmed in sysfs."""
        devices = _from_furiosa_smi(probe) or _from_device_files(probe)
        devices.sort(key=lambda device: int(device.id))
        return [replace(device, index=position) for position, device in enumerate(devices)]

    def visible_ids(self, env: Mapping[str, str]) -> list[str] | None:
        """Device indices named by ``FURIOSA_DEVICES`` (``npu:1,npu:3`` or ``1,3``).

        A value naming no particular device (only architecture counts such as ``rngd*2``)
        restricts nothing, so it reads as unset.
        """
        if self.visible_env_var not in env:
            return None
        tokens = parse_id_list(env[self.visible_env_var])
        ids = [m.group(1) for token in tokens if (m := _DEVICE_TOKEN.match(token))]
        return None if tokens and not ids else list(dict.fromkeys(ids))

    def visible_devices_env(
        self, ids: Sequence[str], node_device_count: int
    ) -> dict[str, str | None]:
        """``FURIOSA_DEVICES=npu:0,npu:3``, as the runtime and ``furiosa-llm`` read it."""
        return {self.visible_env_var: ",".join(f"{DEVICE_PREFIX}{i}" for i in ids)}


def normalise_arch(arch: str) -> str:
    """``rngd+`` -> ``RNGDPLUS``, ``rngd-max`` -> ``RNGDMAX``, ``Arch.Warboy`` -> ``WARBOY``."""
    raw = arch.split(".")[-1].replace("+", "plus")
    return "".join(ch for ch in raw if ch.isalnum()).upper()


def _device(index: int, arch: str, info: Mapping[str, Any]) -> Device:
    key = normalise_arch(arch)
    canonical = ARCH_TYPES.get(key) or resolve_type(arch, family="furiosa")
    details = {
        "device_node": info.get("device_node"),
        "serial": info.get("serial"),
        "pci_bus_id": pci_address(info.get("pci_bus_id")),
        "firmware": info.get("firmware"),
    }
    return Device(
        index=index,
        id=str(index),
        model=f"Furiosa {key or 'NPU'}",
        accelerator_type=canonical,
        uuid=info.get("uuid") or None,
        memory_mib=ARCH_MEMORY_MIB.get(key),
        details={name: value for name, value in details.items() if value},
    )


def _from_furiosa_smi(probe: HostProbe) -> list[Device]:
    for flag in ("--format", "--output"):
        entries = run_json(probe, FURIOSA_SMI, ("info", flag, "json"), TOOL_DIRS)
        if isinstance(entries, list):
            return [d for e in entries if isinstance(e, dict) and (d := _smi_device(e))]
    return []


def _smi_device(entry: Mapping[str, Any]) -> Device | None:
    match = _DEV_NAME.match(str(entry.get("dev_name", "")))
    index = parse_int(match.group(1) if match else entry.get("index"))
    if index is None:
        return None
    info = {
        "device_node": entry.get("dev_name"),
        "uuid": entry.get("device_uuid"),
        "serial": entry.get("device_sn"),
        "pci_bus_id": entry.get("pci_bdf"),
        "firmware": entry.get("firmware"),
    }
    return _device(index, str(entry.get("arch", "")), info)


def _from_device_files(probe: HostProbe) -> list[Device]:
    devices: dict[int, Device] = {}
    for layout in LAYOUTS:
        indices = {
            int(m.group(1))
            for name in probe.listdir(layout.dev_dir)
            if (m := layout.dev_file.match(name))
        }
        for index in sorted(indices - devices.keys()):
            mgmt = f"/sys/class/{layout.mgmt_dir.format(index)}"
            if probe.read_text(f"{mgmt}/platform_type") not in FURIOSA_PLATFORMS:
                continue
            info = {
                "device_node": f"{layout.dev_dir}/npu{index}",
                "uuid": probe.read_text(f"{mgmt}/device_uuid"),
                "serial": probe.read_text(f"{mgmt}/device_sn"),
                "pci_bus_id": probe.read_text(f"{mgmt}/busname"),
                "firmware": probe.read_text(f"{mgmt}/fw_version"),
            }
            devices[index] = _device(index, layout.arch, info)
    return list(devices.values())
