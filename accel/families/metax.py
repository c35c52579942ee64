"""MetaX GPUs (C500, C550, N260), found on the PCI bus and named by ``mx-smi``.

A MetaX GPU is a PCI function of vendor ``0x9999`` (MetaX Integrated Circuits) bound to the
``metax`` kernel driver. An SR-IOV physical function that has virtual functions enabled is
skipped, as MetaX's management library does: its VFs are the usable GPUs. Devices are
numbered in PCI address order, which is how the MACA runtime and ``mx-smi`` number them.

``mx-smi`` (from ``/opt/mxdriver`` or ``/opt/maca``), when present, supplies the model name and
memory size of each GPU, matched by PCI address. MACA honours ``CUDA_VISIBLE_DEVICES``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from accel.families.base import AcceleratorFamily, Device
from accel.families.sysfs import PCI_DEVICES, read_hex
from accel.families.tools import run_tool
from accel.families.values import pci_address
from accel.family_rules import METAX
from accel.names import resolve_type

if TYPE_CHECKING:
    from accel.probe import HostProbe

METAX_DRIVER = "/sys/bus/pci/drivers/metax"
METAX_VENDOR_ID = 0x9999
DISPLAY_CLASS = 0x03
MX_SMI = "mx-smi"
MX_SMI_DIRS = ("/opt/mxdriver/bin", "/opt/maca/bin")

# "| 0       MetaX C500             Off | 0000:0e:00.0        | 0%            Native |"
_SMI_GPU_ROW = re.compile(
    r"^\|\s*(?P<index>\d+)\s+(?P<name>MetaX\b.*?)\s+(?:On|Off)\s*\|"
    r"\s*(?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s*\|"
)
# "| 35C     59W / 350W              P0 | 858/65536 MiB       | Available            |"
_SMI_MEMORY = re.compile(r"\|\s*\d+\s*/\s*(?P<total>\d+)\s*MiB\s*\|")


class MetaxGpu(AcceleratorFamily, rules=METAX):
    def probe_devices(self, probe: HostProbe) -> list[Device]:
        addresses = _metax_functions(probe)
        if not addresses:
            return []
        smi = _mx_smi_gpus(probe)
        return [_device(probe, i, address, smi.get(address)) for i, address in enumerate(addresses)]


def _metax_functions(probe: HostProbe) -> list[str]:
    """PCI addresses of usable MetaX GPUs, in address order."""
    found = []
    for address in probe.listdir(PCI_DEVICES):
        base = f"{PCI_DEVICES}/{address}"
        if read_hex(probe, f"{base}/vendor") != METAX_VENDOR_ID:
            continue
        if (read_hex(probe, f"{base}/class") or 0) >> 16 != DISPLAY_CLASS:
            continue
        if not probe.exists(f"{METAX_DRIVER}/{address}"):
            continue
        if (probe.read_text(f"{base}/sriov_numvfs") or "0") not in ("", "0"):
            continue
        found.append(address.lower())
    return sorted(found)


def _mx_smi_gpus(probe: HostProbe) -> dict[str, tuple[str, int | None]]:
    """Model name and memory (MiB) per PCI address from ``mx-smi``; empty if unavailable."""
    lines = (run_tool(probe, MX_SMI, (), MX_SMI_DIRS) or "").splitlines()
    gpus: dict[str, tuple[str, int | None]] = {}
    for position, line in enumerate(lines):
        row = _SMI_GPU_ROW.match(line.strip())
        if row is None or (address := pci_address(row["bus"])) is None:
            continue
        following = lines[position + 1] if position + 1 < len(lines) else ""
        memory = _SMI_MEMORY.search(following)
        gpus[address] = (row["name"], int(memory["total"]) if memory else None)
    return gpus


def _device(
    probe: HostProbe, index: int, address: str, smi: tuple[str, int | None] | None
) -> Device:
    base = f"{PCI_DEVICES}/{address}"
    device_id = read_hex(probe, f"{base}/device")
    device_hex = f"{device_id:04x}" if device_id is not None else ""
    model, memory_mib = smi or (f"MetaX GPU [9999:{device_hex}]", None)
    details: dict[str, Any] = {"pci_bus_id": address}
    if device_hex:
        details["pci_device_id"] = f"0x{device_hex}"
    if probe.exists(f"{base}/physfn"):
        details["virtual_function"] = True
    return Device(
        index=index,
        id=str(index),
        model=model,
        accelerator_type=resolve_type(model, family="metax"),
        memory_mib=memory_mib,
        details=details,
    )
