"""The embedded local cloud: EC2 served by moto's server, Cloud TPU by our fake REST server.

An emulator is a background process on 127.0.0.1 that outlives one command, so `up`,
`status` and `down` in separate shells see the same instances. Its address and process are
recorded in the cluster's state folder; the next command reuses it while it answers, and
``stop_emulator`` (called by `down`) ends it.
"""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import time
from pathlib import Path

from filelock import FileLock

from accel.ledger import ProcessRef
from providers.local_state import cluster_state_dir

logger = logging.getLogger(__name__)

HOST = "127.0.0.1"
START_TIMEOUT_S = 30.0
SERVERS = {
    "aws": ["-m", "moto.server", "-H", HOST, "-p", "{port}"],
    "gcp": ["-m", "providers.gcp_tpu.emulator", "--host", HOST, "--port", "{port}"],
}


class EmulatorError(RuntimeError):
    """The local cloud could not be started."""


def _record_path(kind: str, cluster_name: str) -> Path:
    return cluster_state_dir(cluster_name) / f"emulator-{kind}.json"


def ensure_emulator(kind: str, cluster_name: str) -> str:
    """The URL of this cluster's running ``kind`` emulator, starting one if needed."""
    path = _record_path(kind, cluster_name)
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path.with_suffix(".lock"))):
        record = _live_record(path)
        if record is not None:
            return record["url"]
        return _start(kind, path)


def stop_emulator(kind: str, cluster_name: str) -> bool:
    """Stop the cluster's ``kind`` emulator; True if one was running."""
    path = _record_path(kind, cluster_name)
    if not path.exists():
        return False
    with FileLock(str(path.with_suffix(".lock"))):
        record = _live_record(path)
        path.unlink(missing_ok=True)
        if record is None:
            return False
        import psutil

        try:
            process = psutil.Process(record["pid"])
            process.terminate()
            process.wait(timeout=10)
        except psutil.TimeoutExpired:
            process.kill()
        except psutil.Error:
            pass
        return True


def _live_record(path: Path) -> dict | None:
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    process = ProcessRef(record["pid"], record["create_time"])
    if process.alive() and _answers(record["port"]):
        return record
    return None


def _answers(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.5):
            return True
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def _start(kind: str, path: Path) -> str:
    port = _free_port()
    argv = [sys.executable, *(arg.format(port=port) for arg in SERVERS[kind])]
    log = path.with_suffix(".log").open("ab")
    process = subprocess.Popen(
        argv,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + START_TIMEOUT_S
    while not _answers(port):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise EmulatorError(
                f"the local {kind} emulator did not start; see {path.with_suffix('.log')}"
            )
        time.sleep(0.1)
    url = f"http://{HOST}:{port}"
    record = {
        "kind": kind,
        "url": url,
        "port": port,
        "pid": process.pid,
        "create_time": ProcessRef.of(process.pid).create_time,
    }
    path.write_text(json.dumps(record))
    logger.info("started the local %s cloud at %s (pid %d)", kind, url, process.pid)
    return url
