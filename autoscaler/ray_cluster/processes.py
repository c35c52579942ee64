"""Local ``ray start --block`` processes (a head, one worker per simulated host), each on its
own free ports and ended with every process it started (raylet, agents, workers): nothing
is left behind."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from contextlib import suppress
from pathlib import Path

import psutil

from providers.processes import end_processes, session_members

STOP_TIMEOUT_S = 8.0
PORT_FLAGS = (
    "--node-manager-port",
    "--object-manager-port",
    "--metrics-export-port",
    "--dashboard-agent-listen-port",
    "--dashboard-agent-grpc-port",
    "--runtime-env-agent-port",
)
"""Ports a Ray node binds that would collide between nodes on one machine."""


_HANDED_OUT: set[int] = set()
"""Ports :func:`free_ports` gave before in this process (a head's and its workers' ports must
not meet, and the OS may hand out a port it just freed again)."""


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports on 127.0.0.1 that are free now and were not handed out
    before by this process. Each is held open until all are found: one at a time, the OS
    may give the same port twice, and Ray refuses a node whose components share a port."""
    held: list[socket.socket] = []
    ports: list[int] = []
    try:
        while len(ports) < count:
            sock = socket.socket()
            held.append(sock)
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
            if port not in _HANDED_OUT:
                ports.append(port)
    finally:
        for sock in held:
            sock.close()
    _HANDED_OUT.update(ports)
    return ports


def port_flags(flags: Sequence[str] = PORT_FLAGS) -> list[str]:
    """``--flag=port`` for each of ``flags``, every port its own (:func:`free_ports`)."""
    return [f"{flag}={port}" for flag, port in zip(flags, free_ports(len(flags)), strict=True)]


class RayProcesses:
    """The Ray processes of simulated nodes, by node id."""

    def __init__(self) -> None:
        self._running: dict[str, list[subprocess.Popen]] = {}
        self._temp: list[Path] = []

    def start(self, node_id: str, argv: Sequence[str], env: Mapping[str, str], log: Path) -> None:
        """Run ``argv`` (a ``ray start --block``) as one more Ray node on this machine: on
        127.0.0.1, with its own ports and temporary folder (two raylets starting at once in
        one folder would pick the same socket)."""
        log.parent.mkdir(parents=True, exist_ok=True)
        temp = Path(tempfile.mkdtemp(prefix="accel-ray-"))  # short: socket paths are capped
        self._temp.append(temp)
        local = [
            "--node-ip-address=127.0.0.1",
            f"--temp-dir={temp}",
            *port_flags(),
        ]
        with log.open("ab") as out:
            process = subprocess.Popen(
                [*argv, *local],
                env=dict(env),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self._running.setdefault(node_id, []).append(process)

    def stop(self, *node_ids: str) -> None:
        """End the given nodes' processes and everything they started, all at once (what
        each started is in its session, even once reparented)."""
        ended: list[psutil.Process] = []
        for node_id in node_ids:
            for process in self._running.pop(node_id, []):
                with suppress(psutil.NoSuchProcess):
                    ended.append(psutil.Process(process.pid))
                ended += session_members(process.pid)
        end_processes(ended, STOP_TIMEOUT_S)

    def stop_all(self) -> None:
        self.stop(*self._running)
        for temp in self._temp:
            shutil.rmtree(temp, ignore_errors=True)
