"""Numbers and addresses as sysfs files and vendor tools print them; pure, no host access.

Every parser returns ``None`` for anything it cannot read, never raises.
"""

from __future__ import annotations

import re

MIB = 1024 * 1024
_PCI_ADDRESS = re.compile(r"^(?:([0-9a-f]{4,8}):)?([0-9a-f]{2}:[0-9a-f]{2}\.[0-7])$")


def parse_int(value: object) -> int | None:
    """An ``int`` as it is (not a ``bool``), or one written in ASCII digits, e.g. ``" 42"``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.strip()
        return int(text) if text.isascii() and text.isdigit() else None
    return None


def parse_hex(text: str | None) -> int | None:
    """A hex id such as ``0x10de`` or ``10DE``."""
    try:
        return int(text, 16) if text else None
    except ValueError:
        return None


def bytes_to_mib(count: int | None) -> int | None:
    """Whole MiB in ``count`` bytes; ``None`` for no bytes (or less than one MiB)."""
    return (count // MIB or None) if count else None


def pci_address(text: object) -> str | None:
    """``0000:3b:00.0`` from the forms tools print (``3B:00.0``, ``00000000:3b:00.0``)."""
    match = _PCI_ADDRESS.match(text.strip().lower()) if isinstance(text, str) else None
    if match is None:
        return None
    domain, rest = match.groups()
    return f"{int(domain or '0', 16):04x}:{rest}"
