"""The local cloud's API servers: each cloud's (moto's server for EC2, ``gcp/server.py`` for
Compute Engine, Cloud TPU and IAM) as a background process.

An emulator is a background process on 127.0.0.1 that outlives one command, so `up`,
`status` and `down` in separate shells see the same instances. Its address and process are
recorded in the cluster's state folder; the next command reuses it while it answers, and
``stop_emulator`` (called by `down`) ends it.
"""

from __future__ import annotations

import importlib
import socket
import sys
from pathlib import Path
from typing import Any

from providers import background
from providers.local_state import cluster_state_dir

HOST = "127.0.0.1"
SERVERS = {
    "aws": ["-m", "providers.local.aws_server", "-H", "{host}", "-p", "{port}"],
    "gcp": ["-m", "providers.local.gcp.server", "--host", "{host}", "--port", "{port}"],
}
"""``provider.type`` -> the arguments after ``python`` that serve that cloud's APIs; each
also takes ``--consoles DIR``, the simulated hosts' consoles (``consoles.py``)."""
NEEDS = {"aws": ("moto.server",)}
"""What a cloud's server imports that only the ``local`` extra installs."""
CONSOLES = "simulated"
"""The cluster state folder's subfolder holding its simulated hosts."""


def _record_path(kind: str, cluster_name: str) -> Path:
    return cluster_state_dir(cluster_name) / f"emulator-{kind}.json"


def ensure_emulator(kind: str, cluster_name: str) -> str:
    """The URL of this cluster's running emulator of cloud ``kind``, starting one if needed."""
    if kind not in SERVERS:
        raise ValueError(f"the local cloud serves no {kind!r}; it serves {', '.join(SERVERS)}")
    for module in NEEDS.get(kind, ()):
        importlib.import_module(module)  # missing: the CLI names the extra that installs it
    port = _free_port()
    consoles = cluster_state_dir(cluster_name) / CONSOLES
    argv = [sys.executable, *(a.format(host=HOST, port=port) for a in SERVERS[kind])]
    argv += ["--consoles", str(consoles)]
    record = background.ensure(
        _record_path(kind, cluster_name),
        argv,
        _answers,
        extra={"kind": kind, "url": f"http://{HOST}:{port}", "port": port},
    )
    return record["url"]


def stop_emulator(kind: str, cluster_name: str) -> bool:
    """Stop the cluster's ``kind`` emulator; True if one was running."""
    return background.stop(_record_path(kind, cluster_name), _answers)


def _answers(record: dict[str, Any]) -> bool:
    try:
        with socket.create_connection((HOST, record["port"]), timeout=0.5):
            return True
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]
