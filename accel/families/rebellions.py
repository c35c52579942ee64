"""Rebellions NPUs (ATOM, ATOM+, ATOM-Max, REBEL), read from ``rbln-smi --json``.

``rbln-smi`` (``rbln-stat`` before driver 3.x, same JSON) lists every die the driver exposes as
``/dev/rbln<N>``: its card code (``RBLN-CA22``), UUID, board serial (``sid``, shared by the four
dies of an ATOM-Max card), PCI address and memory in bytes. The runtime's ``RBLN_DEVICES`` takes
the ``N`` of ``rbln<N>``; the JSON ``npu`` field is not that (it repeats per RSD group). Without
the tool, each ``/dev/rbln<N>`` node is one NPU of unknown model.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from accel.families.base import AcceleratorFamily, Device
from accel.families.sysfs import numbered_nodes
from accel.families.tools import run_json
from accel.families.values import bytes_to_mib, parse_int, pci_address
from accel.family_rules import REBELLIONS
from accel.names import resolve_type

if TYPE_CHECKING:
    from accel.probe import HostProbe

TOOLS = ("rbln-smi", "rbln-stat")
TOOL_DIRS = ("/usr/local/bin", "/usr/bin")
DEVICE_NODE_PREFIX = "rbln"
_DEVICE_NODE = re.compile(rf"^{DEVICE_NODE_PREFIX}(\d+)$")
RAY_NOSET_ENV_VAR = "RAY_EXPERIMENTAL_NOSET_RBLN_RT_VISIBLE_DEVICES"


class RebellionsNpu(AcceleratorFamily, rules=REBELLIONS):
    @property
    def noset_env_vars(self) -> tuple[str, ...]:
        """Ours, plus the name Ray's Rebellions manager actually reads."""
        return (*super().noset_env_vars, RAY_NOSET_ENV_VAR)

    def probe_devices(self, probe: HostProbe) -> list[Device]:
        """Dies listed by ``rbln-smi --json``; without the tool, ``/dev/rbln<N>`` nodes."""
        return _from_tool(probe) or _from_device_nodes(probe)


def _from_tool(probe: HostProbe) -> list[Device]:
    for tool in TOOLS:
        report = run_json(probe, tool, ("--json",), TOOL_DIRS)
        entries = report.get("devices") if isinstance(report, dict) else None
        if isinstance(entries, list):
            devices = [d for e in entries if isinstance(e, dict) and (d := _device(e))]
            devices.sort(key=lambda device: int(device.id))
            return [replace(device, index=i) for i, device in enumerate(devices)]
    return []


def _device(entry: Mapping[str, Any]) -> Device | None:
    number = _device_number(entry)
    if number is None:
        return None
    model = str(entry.get("name") or "Rebellions NPU")
    pci = entry.get("pci") if isinstance(entry.get("pci"), dict) else {}
    details = {
        "device_node": f"/dev/rbln{number}",
        "serial": entry.get("sid"),
        "pci_bus_id": pci_address(pci.get("bus_id")),
        "pci_device_id": pci.get("dev"),
        "numa_node": pci.get("numa_node"),
        "firmware": entry.get("fw_ver"),
        "status": entry.get("status"),
    }
    return Device(
        index=0,
        id=str(number),
        model=model,
        accelerator_type=resolve_type(model, family="rebellions"),
        uuid=str(entry["uuid"]) if entry.get("uuid") else None,
        memory_mib=_memory_mib(entry.get("memory")),
        details={key: value for key, value in details.items() if value not in (None, "")},
    )


def _device_number(entry: Mapping[str, Any]) -> int | None:
    """``N`` of the ``rbln<N>`` node the die is; ``None`` for an entry without one."""
    match = _DEVICE_NODE.match(str(entry.get("device", "")))
    return int(match.group(1)) if match else None


def _memory_mib(memory: object) -> int | None:
    """Total device memory; ``rbln-smi`` prints bytes as a decimal string."""
    if not isinstance(memory, dict):
        return None
    return bytes_to_mib(parse_int(memory.get("total")))


def _from_device_nodes(probe: HostProbe) -> list[Device]:
    numbers = [number for number, _ in numbered_nodes(probe, "/dev", DEVICE_NODE_PREFIX)]
    return [
        Device(
            index=position,
            id=str(number),
            model="Rebellions NPU",
            accelerator_type=None,
            details={"device_node": f"/dev/rbln{number}"},
        )
        for position, number in enumerate(numbers)
    ]
