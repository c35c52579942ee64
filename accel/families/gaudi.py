"""Intel Gaudi accelerators (HPU), found with ``hl-smi``, else the habanalabs sysfs tree.

``HABANA_VISIBLE_MODULES`` lists *module ids* (the OAM slot), not hl-smi's bus-ordered index,
so a device's id is its module id. The generation comes from the PCI device id (Habana vendor
``0x1da3``), else from the product name (HL-225 is a Gaudi2, HL-325L a Gaudi3). Type tokens stay
compatible with Ray's ``Intel-<hpu device name>``: a Gaudi2 advertises ``Intel-GAUDI`` and
``Intel-GAUDI2``.

Without hl-smi, ``/sys/class/accel/accel<N>/device`` (the PCI function of each habanalabs
device) gives the module id (``module_id``), serial (``serial_number``) and model
(``device_type``, e.g. ``GAUDI2``), but not the memory.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from accel.families.base import AcceleratorFamily, Device
from accel.families.sysfs import PCI_DEVICES, linked_pci_address, numbered_nodes, pci_device_id
from accel.families.tools import run_tool
from accel.families.values import parse_int, pci_address
from accel.family_rules import GAUDI
from accel.names import resolve_type

if TYPE_CHECKING:
    from accel.probe import HostProbe

HL_SMI = "hl-smi"
HL_SMI_QUERY = ("index", "module_id", "bus_id", "name", "memory.total", "uuid", "serial")
HABANA_PCI_VENDOR_ID = 0x1DA3
GAUDI_PCI_TYPES = {
    0x1000: "Intel-GAUDI1",
    0x1001: "Intel-GAUDI1",  # HL-2000M
    0x1010: "Intel-GAUDI1",  # secured
    0x1011: "Intel-GAUDI1",
    0x1020: "Intel-GAUDI2",
    0x1021: "Intel-GAUDI2",  # HL-288 PCIe card
    0x1060: "Intel-GAUDI3",
    0x1062: "Intel-GAUDI3",  # single die
    0x1063: "Intel-GAUDI3",  # HL-338 PCIe card
}
"""habanalabs driver PCI ids -> canonical type. Goya (``0x0001``) is an inference chip, not a
Gaudi, and is not an HPU."""

_LEADING_INT = re.compile(r"^\s*(\d+)")
_MISSING = frozenset({"", "N/A", "[N/A]", "NA"})


class IntelGaudi(AcceleratorFamily, rules=GAUDI):
    def probe_devices(self, probe: HostProbe) -> list[Device]:
        devices = _hl_smi_devices(probe) if probe.which(HL_SMI) else _sysfs_devices(probe)
        devices.sort(key=lambda device: int(device.id))
        return devices


def _hl_smi_devices(probe: HostProbe) -> list[Device]:
    """``hl-smi -Q index,module_id,... -f csv,noheader``: one CSV row per device."""
    output = run_tool(probe, HL_SMI, ("-Q", ",".join(HL_SMI_QUERY), "-f", "csv,noheader"))
    devices = []
    for line in (output or "").splitlines():
        row = dict(zip(HL_SMI_QUERY, (cell.strip() for cell in line.split(",")), strict=False))
        if len(row) != len(HL_SMI_QUERY) or parse_int(row["module_id"]) is None:
            continue
        bus_id = pci_address(row["bus_id"])
        memory = _LEADING_INT.match(row["memory.total"])
        devices.append(
            Device(
                index=len(devices),
                id=row["module_id"],
                model=row["name"],
                accelerator_type=_type_name(probe, bus_id, row["name"]),
                uuid=_value(row["uuid"]),
                memory_mib=int(memory.group(1)) if memory else None,
                details=_details(bus_id, _value(row["serial"]), hl_smi_index=row["index"]),
            )
        )
    return devices


def _sysfs_devices(probe: HostProbe) -> list[Device]:
    """habanalabs devices in ``/sys/class/accel`` (kernel 6.2+ compute-accelerator class)."""
    devices = []
    for number, node in numbered_nodes(probe, "/sys/class/accel", "accel"):
        pci_dir = f"/sys/class/accel/{node}/device"
        type_name = GAUDI_PCI_TYPES.get(pci_device_id(probe, pci_dir, HABANA_PCI_VENDOR_ID))
        if not type_name:
            continue
        module_id = probe.read_text(f"{pci_dir}/module_id")
        bus_id = pci_address(probe.read_text(f"{pci_dir}/pci_addr"))
        devices.append(
            Device(
                index=len(devices),
                id=module_id if parse_int(module_id) is not None else str(number),
                model=probe.read_text(f"{pci_dir}/device_type") or type_name,
                accelerator_type=type_name,
                details=_details(
                    bus_id or linked_pci_address(probe, pci_dir),
                    _value(probe.read_text(f"{pci_dir}/serial_number")),
                    device_node=f"/dev/accel/{node}",
                ),
            )
        )
    return devices


def _type_name(probe: HostProbe, bus_id: str | None, model: str) -> str | None:
    """Canonical type from the PCI device id, else from the product name."""
    if bus_id:
        pci_dir = f"{PCI_DEVICES}/{bus_id}"
        found = GAUDI_PCI_TYPES.get(pci_device_id(probe, pci_dir, HABANA_PCI_VENDOR_ID))
        if found:
            return found
    return resolve_type(model, family="gaudi")


def _details(bus_id: str | None, serial: str | None, **extra: str) -> dict[str, str]:
    details = {"pci_bus_id": bus_id, "serial": serial, **extra}
    return {key: value for key, value in details.items() if value}


def _value(cell: str | None) -> str | None:
    return None if cell is None or cell.strip() in _MISSING else cell.strip()
