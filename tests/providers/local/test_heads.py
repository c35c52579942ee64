"""Each simulated head serves its monitor's report endpoint on its own loopback address, as a
head VM serves on its private IP: two local clusters' heads do not collide on the port."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from autoscaler.cli import cli
from providers.local.servers import CONSOLES
from providers.local_state import cluster_state_dir

GPU_DOCKER = Path(__file__).parents[2] / "autoscaler" / "fixtures" / "ray"
GPU_DOCKER = GPU_DOCKER / "aws-example-gpu-docker.yaml"


def autoscale(*args: str):
    return CliRunner().invoke(cli, list(args))


def _head_only(tmp_path: Path, cluster: str) -> str:
    """Ray's GPU docker example, head only and without Ray (whose own ports bind every
    address of the machine)."""
    data = yaml.safe_load(GPU_DOCKER.read_text())
    data["cluster_name"] = cluster
    data["available_node_types"]["ray.worker.default"]["min_workers"] = 0
    data["head_start_ray_commands"] = data["worker_start_ray_commands"] = ["echo no Ray"]
    for node_type in data["available_node_types"].values():
        node_type["ray_start"] = False
    path = tmp_path / f"{cluster}.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _monitor_log(cluster: str) -> str:
    (log,) = (cluster_state_dir(cluster) / CONSOLES).glob(
        "*/host-0/root/var/log/accel-autoscaler/monitor.log"
    )
    return log.read_text()


@pytest.mark.timeout(240)
def test_two_clusters_heads_serve_reports_on_their_own_addresses(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOSCALE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    paths = [_head_only(tmp_path, name) for name in ("heads-one", "heads-two")]
    try:
        served = []
        for path, cluster in zip(paths, ("heads-one", "heads-two"), strict=True):
            up = autoscale("up", path, "--yes", "--wait")
            assert up.exit_code == 0, up.output
            (head,) = json.loads(autoscale("status", path, "--json").stdout)["nodes"]
            assert head["state"] == "running"
            ip = head["internal_ips"][0]
            log = _monitor_log(cluster)
            assert f"reports on port 8077 (nodes send to http://{ip}:8077)" in log
            assert "cannot serve reports" not in log
            served.append(ip)
        assert len(set(served)) == 2 and all(re.match(r"127\.", ip) for ip in served)
    finally:
        for path in paths:
            down = autoscale("down", path, "--yes")
            assert down.exit_code == 0, down.output
