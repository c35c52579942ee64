"""Run a generated boot script for real under bash, with stand-ins on PATH for what a test
machine cannot do (the metadata service, pip, docker, systemd, ``autoscale``, ``ray``), each
recording its command line; ``docker exec`` runs its command here, as in the container.
The script's absolute paths are moved under the test's folder."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

STUBS = {
    "curl": 'case "$*" in *instance-id*) echo i-0abc ;; *token*) echo tok ;; *) echo x ;; esac',
    "python3": ":",
    "hostname": "echo 10.0.0.9",
    "systemctl": ":",
    "ray": 'echo "ray $* v2=${RAY_enable_autoscaler_v2:-} head=${RAY_HEAD_IP:-}" >>"$RAY_LOG"',
    "mark": ":",
    "autoscale": """case "$1 $2" in
  "node boot-env") echo "export ACCEL_DOCKER_FLAGS='${STUB_DOCKER_FLAGS:---gpus all --shm-size=1b}'"
                   echo "export RAY_CLOUD_INSTANCE_ID=$4"
                   echo "export RAY_OVERRIDE_LABELS='{}'" ;;
  "node ray-flags") echo "--num-cpus=8 --resources={\\"accelerator_type:A100\\":1}" ;;
esac""",
    "docker": """if [ -n "${STUB_IMAGE_LACKS:-}" ] && [[ "$*" == *"command -v"* ]]; then
  printf "%s " $STUB_IMAGE_LACKS
  exit 0
fi
if [ "$1" = exec ]; then
  shift
  while [ "${1#-}" != "$1" ]; do shift 2; done
  shift
  exec "$@"
fi
if [ "$1" = cp ]; then cp -a "$2" "${3#*:}"; fi
if [ -n "${STUB_DOCKER_FAILS:-}" ] && [ "$1" = "$STUB_DOCKER_FAILS" ]; then exit 7; fi""",
}


@dataclass
class Boot:
    status: int
    output: str
    calls: list[str]
    root: Path

    def index(self, prefix: str) -> int:
        """Position of the first recorded call starting with ``prefix``."""
        return next(i for i, call in enumerate(self.calls) if call.startswith(prefix))


def run_boot(script: str, root: Path, env: dict[str, str] | None = None) -> Boot:
    """Run ``script`` with the stand-ins; every call lands in ``root/calls``."""
    bin_dir, calls = root / "bin", root / "calls"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, body in STUBS.items():
        stub = bin_dir / name
        stub.write_text(f'#!/bin/bash\necho "{name} $*" >> {calls}\n{body}\n')
        stub.chmod(0o755)
    script = re.sub(r"(?<![\w/.-])(?=/etc/|/var/)", str(root), script)
    (root / "etc/systemd/system").mkdir(parents=True, exist_ok=True)
    (root / "var/log").mkdir(parents=True, exist_ok=True)
    (root / "home").mkdir(exist_ok=True)
    script += "wait $!\n"  # the agent's stand-in, started in the background, has recorded
    done = subprocess.run(
        ["bash", "-c", script],
        env={
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "HOME": str(root / "home"),
            "RAY_LOG": str(root / "ray.log"),
            **(env or {}),
        },
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
    )
    recorded = calls.read_text().splitlines() if calls.exists() else []
    return Boot(done.returncode, done.stdout + done.stderr, recorded, root)
