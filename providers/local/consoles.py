"""Where a simulated host's console lives, for the simulator that writes it and the local
cloud's console APIs (EC2 ``GetConsoleOutput``, the Compute Engine serial port) that read it:
``CONSOLES/<node id>/host-<n>/console.log``."""

from __future__ import annotations

from pathlib import Path


def console_file(consoles: Path, node_id: str, host: int = 0) -> Path:
    return consoles / node_id / f"host-{host}" / "console.log"


def read_console(consoles: Path | None, node_id: str) -> str | None:
    """Host 0's console so far; None before it boots (or without a consoles folder)."""
    if consoles is None:
        return None
    try:
        return console_file(consoles, node_id).read_text(errors="replace")
    except OSError:
        return None
