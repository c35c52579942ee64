"""PCI functions and numbered device nodes, read through a :class:`HostProbe`.

A PCI directory is ``/sys/bus/pci/devices/<address>`` or the ``device`` link of a class
node (``/sys/class/drm/card1/device``); ids are read as integers.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from accel.families.values import parse_hex, pci_address

if TYPE_CHECKING:
    from accel.probe import HostProbe

PCI_DEVICES = "/sys/bus/pci/devices"


def read_hex(probe: HostProbe, host_path: str) -> int | None:
    """A hex id file such as ``vendor`` (``0x10de``); ``None`` if missing or unreadable."""
    return parse_hex(probe.read_text(host_path))


def pci_device_id(probe: HostProbe, pci_dir: str, vendor_id: int) -> int | None:
    """The function's device id, if its vendor is ``vendor_id``."""
    if read_hex(probe, f"{pci_dir}/vendor") != vendor_id:
        return None
    return read_hex(probe, f"{pci_dir}/device")


def linked_pci_address(probe: HostProbe, link: str) -> str | None:
    """The PCI address a sysfs ``device`` link points at (``0000:01:00.0``)."""
    return pci_address(probe.link_target_name(link))


def numbered_nodes(probe: HostProbe, host_dir: str, prefix: str = "") -> list[tuple[int, str]]:
    """``(N, name)`` of each ``<prefix><N>`` entry of ``host_dir``, by ``N``."""
    pattern = re.compile(rf"{re.escape(prefix)}([0-9]+)")
    found = [
        (int(m.group(1)), name)
        for name in probe.listdir(host_dir)
        if (m := pattern.fullmatch(name))
    ]
    return sorted(found)
