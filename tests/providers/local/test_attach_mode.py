"""Attach mode in the local cloud, as the README documents it: a Ray head the user runs,
`autoscale up` with nothing about Ray in the YAML or the environment, then
`autoscale monitor CLUSTER.yaml --ray-address HOST:PORT`. The launched node learns Ray's
address from its boot data (run by its simulated host), joins Ray, runs the A100 tasks, and
retires when idle."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from providers.processes import processes_with

pytest.importorskip("ray")

from autoscaler.ray_cluster.local_head import LocalRayHead

DRIVER = """
import ray
ray.init(log_to_driver=False)

@ray.remote(num_gpus=1, accelerator_type="A100")
def where():
    return ray.get_runtime_context().get_node_id()

print("ran on", len(set(ray.get([where.remote() for _ in range(3)]))), "node(s)", flush=True)
"""


def _autoscale(*args: str, env: dict[str, str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autoscaler", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        **kwargs,
    )


def _running_nodes(config: Path, env: dict[str, str]) -> list[dict]:
    import json

    status = _autoscale("status", str(config), "--json", env=env)
    assert status.returncode == 0, status.stderr
    return [n for n in json.loads(status.stdout)["nodes"] if n["state"] != "terminating"]


@pytest.mark.timeout(300)
def test_monitor_ray_address_alone_scales_a_local_cloud_cluster(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env |= {"AUTOSCALE_STATE_DIR": str(tmp_path / "state"), "RAY_USAGE_STATS_ENABLED": "0"}
    config = tmp_path / "attach.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "cluster_name": "attach",
                "max_workers": 1,
                "provider": {"type": "aws", "region": "us-east-1", "emulator": True},
                "available_node_types": {
                    "a100": {
                        "node_config": {"InstanceType": "p4d.24xlarge", "ImageId": "ami-1e749f67"},
                        "max_workers": 1,
                        "ray_start": True,
                        "idle_timeout_minutes": 0.05,
                    }
                },
            }
        )
    )
    head = LocalRayHead(tmp_path / "head.log", num_cpus=0)
    monitor = None
    try:
        head.wait_ready()
        up = _autoscale("up", str(config), "--yes", env=env)
        assert up.returncode == 0, up.stdout + up.stderr
        monitor_args = ["--ray-address", head.address, "--interval", "0.5"]
        monitor = subprocess.Popen(
            [sys.executable, "-m", "autoscaler", "monitor", str(config), *monitor_args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        driver = subprocess.run(
            [sys.executable, "-c", DRIVER],
            env={**env, "RAY_ADDRESS": head.address},
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert driver.returncode == 0, driver.stderr[-2000:]
        assert "ran on 1 node(s)" in driver.stdout

        deadline = time.monotonic() + 120
        while _running_nodes(config, env) and time.monotonic() < deadline:
            time.sleep(1)
        assert _running_nodes(config, env) == [], "the idle node did not retire"
    finally:
        if monitor is not None:
            os.killpg(monitor.pid, signal.SIGTERM)
            monitor.wait(timeout=30)
        _autoscale("down", str(config), "--yes", env=env)
        head.stop()
    leftovers = processes_with("AUTOSCALE_STATE_DIR", env["AUTOSCALE_STATE_DIR"].__eq__)
    assert leftovers == []
