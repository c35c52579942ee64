"""gcp-gpu.yaml on the embedded local GCP: up, request, monitor, status, down, with a TPU
node type in its own zone beside the Compute Engine types (one cluster, both APIs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from autoscaler.cli import cli

EXAMPLE = Path(__file__).resolve().parents[4] / "example-clusters" / "gcp-gpu.yaml"


def autoscale(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def cluster_yaml(tmp_path, monkeypatch):
    from providers.local.servers import stop_emulator
    from providers.local.simulator import stop_simulator

    monkeypatch.setenv("AUTOSCALE_STATE_DIR", str(tmp_path / "state"))
    spec = yaml.safe_load(EXAMPLE.read_text())
    spec["cluster_name"] = "gpu-emu"
    spec["provider"].update(emulator=True, operation_poll_s=0.05)
    types = spec["available_node_types"]
    types["head"] = {"node_config": {"machineType": "n1-standard-4"}, "max_workers": 0}
    types["t4"]["min_workers"] = 1
    types["tpu_v5e_8"] = {
        "node_config": {"acceleratorType": "v5litepod-8"},
        "availability_zone": ["us-central1-a"],
        "min_workers": 1,
        "max_workers": 2,
    }
    spec["head_node_type"] = "head"
    path = tmp_path / "gcp-gpu.yaml"
    path.write_text(yaml.safe_dump(spec))
    yield str(path)
    stop_simulator("gpu-emu")
    stop_emulator("gcp", "gpu-emu")


def test_gcp_gpu_example_runs_up_request_monitor_down_on_the_local_cloud(cluster_yaml):
    up = autoscale("up", cluster_yaml, "--yes", "--wait", "--timeout", "90")
    assert up.exit_code == 0, up.output
    nodes = json.loads(autoscale("status", cluster_yaml, "--json").output)["nodes"]
    by_type = {node["node_type"]: node for node in nodes}
    assert set(by_type) == {"head", "t4", "tpu_v5e_8"}
    assert by_type["t4"]["accelerators"] == {"GPU": 1}  # the attached T4, behind NVML
    assert by_type["tpu_v5e_8"]["accelerators"] == {"TPU": 8}

    bundles = json.dumps([{"GPU": 1, "accelerator_type:L4": 0.001}])
    assert autoscale("request", cluster_yaml, "--bundles", bundles).exit_code == 0
    monitor = autoscale("monitor", cluster_yaml, "--once")
    assert monitor.exit_code == 0, monitor.output
    nodes = json.loads(autoscale("status", cluster_yaml, "--json").output)["nodes"]
    assert sorted(node["node_type"] for node in nodes) == ["head", "l4", "t4", "tpu_v5e_8"]

    down = autoscale("down", cluster_yaml, "--yes")
    assert down.exit_code == 0, down.output
    assert "terminated 4 node(s)" in down.output
