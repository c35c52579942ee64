"""`autoscale node boot-env` and `node ray-flags` on simulated hosts: what the boot script
gives a node's container and its `ray start`, from real detection."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from providers.local.hosts import SimulatedHost, build

GIB = 2**30


def on_host(tmp_path, host: SimulatedHost, shell: str) -> str:
    env = {**os.environ, **build(tmp_path / "host", host)}
    env["PATH"] = f"{os.path.dirname(sys.executable)}:{env['PATH']}"
    done = subprocess.run(
        ["bash", "-c", shell], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        (
            SimulatedHost("p4d.24xlarge", 96, 1152 * GIB, "nvidia", "A100-40G", 8, 40960),
            "--gpus all",
        ),
        (
            SimulatedHost("v4-8", 240, 400 * GIB, "tpu", "TPU-V4", 4, tpu_pod_type="v4-8"),
            "--privileged",
        ),
        (SimulatedHost("m5.large", 2, 8 * GIB), ""),
    ],
)
def test_the_container_gets_the_detected_devices_and_shared_memory(tmp_path, host, expected):
    shell = (
        'eval "$(autoscale node boot-env --node-id i-1)"; '
        'echo "$ACCEL_DOCKER_FLAGS"; echo "$RAY_OVERRIDE_LABELS"; echo "$RAY_CLOUD_INSTANCE_ID"'
    )
    flags, labels, instance = on_host(tmp_path, host, shell).splitlines()
    assert flags.startswith(expected)
    assert flags.endswith(f"--shm-size={int(host.memory_bytes * 0.3)}b")
    assert instance == "i-1"
    if host.family == "nvidia":
        assert json.loads(labels)["ray.io/accelerator-type"] == "A100-40G"


def test_ray_flags_advertise_the_detected_gpus_less_what_the_user_sets(tmp_path):
    host = SimulatedHost("p4d.24xlarge", 96, 1152 * GIB, "nvidia", "A100-40G", 8, 40960)
    words = on_host(tmp_path, host, "autoscale node ray-flags --omit num-cpus").split()
    assert not any(w.startswith("--num-cpus") for w in words)
    assert "--num-gpus=8" in words
    resources = json.loads(next(w for w in words if w.startswith("--resources="))[12:])
    assert resources["accelerator_type:A100"] == 1
