"""Finding this machine's processes by an environment variable, retitled ones included.

A process that retitles itself (Ray's ``ray::DashboardAgent`` and its other workers, through
setproctitle) zeroes the start of its environment block; psutil's parser stops at the first
empty entry, so ``psutil.Process.environ()`` shows such a process as having no environment.
On Linux the raw block is read and split whole instead.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import psutil


def environ_value(process: psutil.Process, name: str) -> str | None:
    """``name`` in ``process``'s environment (None where unset or unreadable)."""
    raw_path = Path(f"/proc/{process.pid}/environ")
    if not raw_path.parent.is_dir():
        try:
            return process.environ().get(name)
        except psutil.Error:
            return None
    try:
        raw = raw_path.read_bytes()
    except OSError:
        return None
    prefix = f"{name}=".encode()
    for entry in raw.split(b"\0"):
        if entry.startswith(prefix):
            return entry[len(prefix) :].decode(errors="replace")
    return None


def processes_with(name: str, matches: Callable[[str], bool]) -> list[psutil.Process]:
    """Every other process whose ``name`` is set to a value ``matches`` accepts."""
    found = []
    for process in psutil.process_iter(["pid"]):
        if process.pid == os.getpid():
            continue
        value = environ_value(process, name)
        if value is not None and matches(value):
            found.append(process)
    return found
