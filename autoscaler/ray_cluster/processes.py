"""Local ``ray start --block`` processes, one per simulated host, each ended with every
process it started (raylet, agents, workers): nothing is left behind."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from contextlib import suppress
from pathlib import Path

import psutil

STOP_TIMEOUT_S = 8.0


class RayProcesses:
    """The Ray processes of simulated nodes, by node id."""

    def __init__(self) -> None:
        self._running: dict[str, list[subprocess.Popen]] = {}

    def start(self, node_id: str, argv: Sequence[str], env: Mapping[str, str], log: Path) -> None:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            process = subprocess.Popen(
                list(argv),
                env=dict(env),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self._running.setdefault(node_id, []).append(process)

    def stop(self, *node_ids: str) -> None:
        """End the given nodes' processes and everything they started, all at once."""
        tree: list[psutil.Process] = []
        for node_id in node_ids:
            for process in self._running.pop(node_id, []):
                try:
                    parent = psutil.Process(process.pid)
                    tree += [parent, *parent.children(recursive=True)]
                except psutil.NoSuchProcess:
                    pass
        for process in tree:
            with suppress(psutil.NoSuchProcess):
                process.terminate()
        _, alive = psutil.wait_procs(tree, timeout=STOP_TIMEOUT_S)
        for process in alive:
            with suppress(psutil.NoSuchProcess):
                process.kill()

    def stop_all(self) -> None:
        self.stop(*self._running)
