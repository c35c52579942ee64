"""This machine's processes: found by an environment variable (retitled ones included) or
by session, and ended for good.

A process that retitles itself (Ray's ``ray::DashboardAgent`` and its other workers, through
setproctitle) zeroes the start of its environment block; psutil's parser stops at the first
empty entry, so ``psutil.Process.environ()`` shows such a process as having no environment.
On Linux the raw block is read and split whole instead.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from contextlib import suppress
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


def session_members(leader: int) -> list[psutil.Process]:
    """Every other process in the session ``leader`` began (one started with
    ``start_new_session``): what it started, even once reparented or retitled."""
    found = []
    for process in psutil.process_iter(["pid"]):
        with suppress(OSError):
            if process.pid != os.getpid() and os.getsid(process.pid) == leader:
                found.append(process)
    return found


def end_processes(processes: Iterable[psutil.Process], timeout_s: float) -> None:
    """SIGTERM, then SIGKILL what is still running after ``timeout_s``, and wait for that too:
    none is running when this returns."""
    processes = list(dict.fromkeys(processes))
    for process in processes:
        with suppress(psutil.Error):
            process.terminate()
    _, alive = psutil.wait_procs(processes, timeout=timeout_s)
    for process in alive:
        with suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(alive, timeout=timeout_s)
