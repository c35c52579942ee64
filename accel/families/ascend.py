"""Huawei Ascend NPUs, read from ``npu-smi info`` the way the CANN runtime numbers them.

``npu-smi info`` prints one block per card (NPU id, chip name, health) followed by one row per
chip on it (chip id, PCI bus id, usage; HBM or memory as ``used / total`` MB). The runtime's
device ids, which ``ASCEND_RT_VISIBLE_DEVICES`` takes, are the chip logic ids: compute chips
numbered from 0 in that order (a 910C card carries two, an Atlas 300I Duo two 310P3 chips;
the 310P table also prints the id itself in a ``Chip Device`` column). Without the tool, every
``/dev/davinci<N>`` node is one chip of unknown model (management nodes such as
``davinci_manager`` are not chips).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from accel.families.base import AcceleratorFamily, Device
from accel.families.sysfs import numbered_nodes
from accel.families.tools import run_tool
from accel.families.values import pci_address
from accel.family_rules import ASCEND
from accel.names import resolve_type

if TYPE_CHECKING:
    from accel.probe import HostProbe

NPU_SMI = "npu-smi"
NPU_SMI_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/local/Ascend/driver/tools")
DEVICE_NODE_PREFIX = "davinci"
_CARD = re.compile(r"^(\d+)\s+(\S+)$")
_CHIP = re.compile(r"^(\d+)(?:\s+(\d+))?$")
_USED_TOTAL = re.compile(r"(\d+)\s*/\s*(\d+)")


@dataclass(frozen=True)
class _Chip:
    chip_id: int
    device_id: int | None
    """The id printed in a ``Chip Device`` column (310P); ``None`` where the table has none."""
    bus_id: str
    memory_mib: int | None


@dataclass
class _Card:
    npu_id: int
    name: str
    health: str
    chips: list[_Chip] = field(default_factory=list)


class HuaweiAscend(AcceleratorFamily, rules=ASCEND):
    def probe_devices(self, probe: HostProbe) -> list[Device]:
        """Chips from ``npu-smi info``; without the tool, ``/dev/davinci<N>`` nodes."""
        return _from_npu_smi(probe) or _from_device_nodes(probe)


def _from_npu_smi(probe: HostProbe) -> list[Device]:
    output = run_tool(probe, NPU_SMI, ("info",), NPU_SMI_DIRS)
    return _devices_from_table(_parse_npu_smi_info(output)) if output else []


def _parse_npu_smi_info(text: str) -> list[_Card]:
    """Cards and their chips from the ``npu-smi info`` table; the process table is ignored."""
    cards: list[_Card] = []
    for line in text.splitlines():
        if "Process id" in line or "Process name" in line:
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.lstrip().startswith("|") or len(cells) < 3:
            continue
        bus_id = pci_address(cells[1])
        if bus_id and cards and (chip := _CHIP.match(cells[0])):
            cards[-1].chips.append(_chip_row(chip, bus_id, cells[2]))
        elif card := _CARD.match(cells[0]):
            cards.append(_Card(int(card.group(1)), card.group(2), cells[1]))
    return cards


def _chip_row(chip: re.Match[str], bus_id: str, usage: str) -> _Chip:
    pairs = _USED_TOTAL.findall(usage)
    total_mb = int(pairs[-1][1]) if pairs else 0  # HBM is the last pair where there is HBM
    device_id = chip.group(2)
    return _Chip(
        chip_id=int(chip.group(1)),
        device_id=int(device_id) if device_id else None,
        bus_id=bus_id,
        memory_mib=total_mb or None,
    )


def _devices_from_table(cards: list[_Card]) -> list[Device]:
    devices: list[Device] = []
    for card in cards:
        accelerator_type = resolve_type(card.name, family="ascend")
        for chip in card.chips:
            logic_id = chip.device_id if chip.device_id is not None else len(devices)
            devices.append(
                Device(
                    index=len(devices),
                    id=str(logic_id),
                    model=f"Ascend{card.name}",
                    accelerator_type=accelerator_type,
                    memory_mib=chip.memory_mib,
                    details={
                        "npu_id": card.npu_id,
                        "chip_id": chip.chip_id,
                        "pci_bus_id": chip.bus_id,
                        "health": card.health,
                    },
                )
            )
    devices.sort(key=lambda device: int(device.id))
    return [replace(device, index=position) for position, device in enumerate(devices)]


def _from_device_nodes(probe: HostProbe) -> list[Device]:
    """One chip per ``/dev/davinci<N>``; the runtime numbers the chips it sees from 0."""
    nodes = [name for _, name in numbered_nodes(probe, "/dev", DEVICE_NODE_PREFIX)]
    return [
        Device(
            index=position,
            id=str(position),
            model="Ascend",
            accelerator_type=None,
            details={"device_node": f"/dev/{name}"},
        )
        for position, name in enumerate(nodes)
    ]
