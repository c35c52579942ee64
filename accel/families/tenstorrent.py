"""Tenstorrent accelerators (Grayskull, Wormhole, Blackhole), found through tt-kmd.

tt-kmd creates ``/dev/tenstorrent/<N>`` per PCIe-attached chip, which is what tt-metal opens
and what ``TT_VISIBLE_DEVICES`` numbers. Its sysfs node ``/sys/class/tenstorrent/
tenstorrent!<N>`` carries the board type (``tt_card_type``: ``n150``, ``n300``, ``p150a``...),
the board serial (``tt_serial``) and a ``device`` link to the PCI function, whose device id
names the chip architecture. Everything is read from sysfs: ``tt-smi`` would open the chips,
which disturbs running workloads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accel.families.base import AcceleratorFamily, Device
from accel.families.sysfs import linked_pci_address, numbered_nodes, read_hex
from accel.family_rules import TENSTORRENT
from accel.names import resolve_type

if TYPE_CHECKING:
    from accel.probe import HostProbe

DEV_DIR = "/dev/tenstorrent"
SYSFS_CLASS = "/sys/class/tenstorrent"
TENSTORRENT_VENDOR_ID = 0x1E52
RAY_NOSET_ENV_VAR = "RAY_EXPERIMENTAL_NOSET_TENSTORRENT_VISIBLE_DEVICES"

# PCI device id -> canonical type.
PCI_DEVICE_TYPES: dict[int, str] = {
    0xFACA: "Tenstorrent-Grayskull",
    0x401E: "Tenstorrent-Wormhole",
    0xB140: "Tenstorrent-Blackhole",
}
# Device memory per PCIe-attached chip by board type (GDDR6; n300 is two Wormhole chips behind
# one PCIe function). Board types not listed report no memory.
CARD_MEMORY_MIB: dict[str, int] = {
    "n150": 12 * 1024,
    "n300": 24 * 1024,
    "p100": 28 * 1024,
    "p100a": 28 * 1024,
    "p150a": 32 * 1024,
    "p150b": 32 * 1024,
    "p150c": 32 * 1024,
}
_ARCH_NAMES = {name: name.split("-", 1)[1] for name in PCI_DEVICE_TYPES.values()}


class TenstorrentNpu(AcceleratorFamily, rules=TENSTORRENT):
    @property
    def noset_env_vars(self) -> tuple[str, ...]:
        """Ours, plus the name Ray's Tenstorrent manager actually reads."""
        return (*super().noset_env_vars, RAY_NOSET_ENV_VAR)

    def probe_devices(self, probe: HostProbe) -> list[Device]:
        """One device per ``/dev/tenstorrent/<N>``, described by its sysfs node."""
        numbers = [number for number, _ in numbered_nodes(probe, DEV_DIR)]
        return [_device(probe, position, number) for position, number in enumerate(numbers)]


def _device(probe: HostProbe, position: int, number: int) -> Device:
    node = f"{SYSFS_CLASS}/tenstorrent!{number}"
    card = (probe.read_text(f"{node}/tt_card_type") or "").lower()
    card = "" if card == "unknown" else card
    pci_id = read_hex(probe, f"{node}/device/device")
    vendor = read_hex(probe, f"{node}/device/vendor")
    canonical = PCI_DEVICE_TYPES.get(pci_id) if vendor == TENSTORRENT_VENDOR_ID else None
    if canonical is None and card:
        canonical = resolve_type(card, family="tenstorrent")
    arch = _ARCH_NAMES.get(canonical or "", "")
    details = {
        "device_node": f"{DEV_DIR}/{number}",
        "board_type": card,
        "pci_bus_id": linked_pci_address(probe, f"{node}/device"),
        "pci_device_id": f"0x{pci_id:04x}" if pci_id is not None else None,
        "firmware": probe.read_text(f"{node}/tt_fw_bundle_ver"),
    }
    serial = probe.read_text(f"{node}/tt_serial")
    return Device(
        index=position,
        id=str(number),
        model=" ".join(part for part in ("Tenstorrent", arch, card) if part),
        accelerator_type=canonical,
        uuid=serial or None,
        memory_mib=CARD_MEMORY_MIB.get(card),
        details={key: value for key, value in details.items() if value},
    )
