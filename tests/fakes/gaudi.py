"""Fake Intel Gaudi hosts: ``hl-smi`` CSV output and the habanalabs sysfs tree.

Row shape of ``hl-smi -Q index,module_id,bus_id,name,memory.total,uuid,serial -f csv,noheader``:
``0, 2, 0000:19:00.0, HL-225, 98304 MiB, 01P0-HL2080A0-15-TNZ0Y2-03-07-02, AN45003522``.
hl-smi's index follows the PCI bus; the module id (the OAM slot, what HABANA_VISIBLE_MODULES
names) does not, as on an HLS-Gaudi2 board. habanalabs PCI ids: vendor ``0x1da3``, Gaudi
``0x1000``, Gaudi2 ``0x1020``, Gaudi3 ``0x1060``.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.fakes.host import FakeHost
from tests.fakes.pci import add_pci_device, link_pci_device

HABANA_VENDOR = "0x1da3"
BUS_IDS = (
    "0000:19:00.0",
    "0000:1a:00.0",
    "0000:43:00.0",
    "0000:44:00.0",
    "0000:52:00.0",
    "0000:53:00.0",
    "0000:b3:00.0",
    "0000:b4:00.0",
)
MODULE_IDS = (2, 3, 0, 1, 6, 7, 4, 5)
"""Module id of the card at each bus position above (OAM slots are not in bus order)."""


@dataclass(frozen=True)
class GaudiModel:
    product: str
    pci_device_id: str
    memory_mib: int
    device_type: str


MODELS = {
    "gaudi1": GaudiModel("HL-205", "0x1000", 32768, "GAUDI"),
    "gaudi2": GaudiModel("HL-225", "0x1020", 98304, "GAUDI2"),
    "gaudi3": GaudiModel("HL-325L", "0x1060", 131072, "GAUDI3"),
}


def hl_smi_csv(count: int = 8, generation: str = "gaudi2") -> str:
    """What ``hl-smi -Q index,module_id,bus_id,name,memory.total,uuid,serial -f csv,noheader``
    prints for ``count`` cards."""
    model = MODELS[generation]
    rows = [
        f"{index}, {MODULE_IDS[index]}, {BUS_IDS[index]}, {model.product}, "
        f"{model.memory_mib} MiB, {_uuid(index)}, {_serial(index)}"
        for index in range(count)
    ]
    return "\n".join(rows) + "\n"


def install_gaudi(
    fake_host: FakeHost,
    count: int = 8,
    generation: str = "gaudi2",
    hl_smi: bool = True,
    sysfs: bool = True,
) -> None:
    """A Gaudi host: hl-smi (``hl_smi``) and the PCI / accel sysfs tree (``sysfs``)."""
    model = MODELS[generation]
    if hl_smi:
        fake_host.command("hl-smi", hl_smi_csv(count, generation))
    if not sysfs:
        return
    for index in range(count):
        bus_id = BUS_IDS[index]
        pci_dir = add_pci_device(fake_host, bus_id, HABANA_VENDOR, model.pci_device_id)
        fake_host.write_many(
            pci_dir,
            {
                "module_id": MODULE_IDS[index],
                "device_type": model.device_type,
                "serial_number": _serial(index),
                "pci_addr": bus_id,
                "status": "operational",
            },
        )
        link_pci_device(fake_host, f"/sys/class/accel/accel{index}/device", bus_id)
        fake_host.write(f"/dev/accel/accel{index}")


def _uuid(index: int) -> str:
    return f"01P0-HL2080A0-15-TNZ0Y2-03-07-{index:02d}"


def _serial(index: int) -> str:
    return f"AN4500352{index}"
