"""Background processes that outlive one command (the local cloud, the node simulator).

Each is recorded in a JSON file (pid, start time, and whatever the caller adds); the next
command reuses it while it is alive and answers, and ``stop`` ends it.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from filelock import FileLock

from accel.ledger import ProcessRef

START_TIMEOUT_S = 30.0


class BackgroundError(RuntimeError):
    """The process could not be started."""


def ensure(
    record_path: Path,
    argv: Sequence[str],
    ready: Callable[[dict[str, Any]], bool],
    extra: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The live record at ``record_path``, starting ``argv`` first if none is running.

    ``ready(record)`` says whether a started (or recorded) process is serving.
    """
    record_path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(record_path.with_suffix(".lock"))):
        record = _live(record_path, ready)
        if record is not None:
            return record
        log = record_path.with_suffix(".log").open("ab")
        process = subprocess.Popen(
            list(argv),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
        record = {
            **(extra or {}),
            "pid": process.pid,
            "create_time": ProcessRef.of(process.pid).create_time,
        }
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready(record):
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise BackgroundError(
                    f"{Path(argv[0]).name} did not start; see {record_path.with_suffix('.log')}"
                )
            time.sleep(0.1)
        record_path.write_text(json.dumps(record))
        return record


def stop(record_path: Path, ready: Callable[[dict[str, Any]], bool] = lambda r: True) -> bool:
    """End the recorded process; True if one was running."""
    if not record_path.exists():
        return False
    import psutil

    with FileLock(str(record_path.with_suffix(".lock"))):
        record = _live(record_path, ready)
        record_path.unlink(missing_ok=True)
        if record is None:
            return False
        try:
            process = psutil.Process(record["pid"])
            process.terminate()
            process.wait(timeout=10)
        except psutil.TimeoutExpired:
            process.kill()
        except psutil.Error:
            pass
        return True


def _live(record_path: Path, ready: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
    try:
        record = json.loads(record_path.read_text())
    except (OSError, ValueError):
        return None
    if ProcessRef(record["pid"], record["create_time"]).alive() and ready(record):
        return record
    return None
