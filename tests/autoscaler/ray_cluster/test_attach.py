"""Attach mode against a Ray head the user runs without autoscaler v2 state: one line at
`monitor` start and in `status`, with the fix; and where `status` says the cluster's Ray is."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from autoscaler.cli import cli
from autoscaler.config import parse_cluster_config
from autoscaler.ray_cluster.endpoints import ATTACH_EVENT, attach_warning, ray_endpoints
from providers.local.gcp.tpu import TpuEmulator
from tests.fakes.clusters import write_cluster


def test_a_head_without_autoscaler_v2_gets_one_line_with_the_fix():
    line = attach_warning("10.0.0.5:6379", False)
    assert "10.0.0.5:6379" in line and "request_resources()" in line
    assert "RAY_enable_autoscaler_v2=1" in line and "\n" not in line
    assert attach_warning("10.0.0.5:6379", True) is None
    assert attach_warning("10.0.0.5:6379", None) is None  # Ray could not say: no claim


def test_status_names_the_heads_ray_address_and_dashboard():
    spec = parse_cluster_config(
        {
            "provider": {"type": "aws", "region": "us-east-1"},
            "available_node_types": {"head": {"node_config": {"InstanceType": "m5.large"}}},
            "head_node_type": "head",
            "head_start_ray_commands": ["ray start --head --port=6380 --dashboard-port=8300"],
        }
    ).spec
    assert ray_endpoints(spec, ["10.0.0.7"], []) == {
        "address": "10.0.0.7:6380",
        "dashboard": "http://10.0.0.7:8300",
        "warning": None,
    }
    assert ray_endpoints(spec, [], []) is None  # no head yet
    attached = SimpleNamespace(kind=ATTACH_EVENT, data={"address": "10.9.9.9:6379", "warning": "w"})
    assert ray_endpoints(spec, [], [attached]) == {
        "address": "10.9.9.9:6379",
        "dashboard": "http://10.9.9.9:8265",
        "warning": "w",
    }


@pytest.mark.timeout(300)
def test_monitor_and_status_say_so_against_a_real_head_without_v2(tmp_path, monkeypatch):
    pytest.importorskip("ray")
    from autoscaler.ray_cluster.local_head import LocalRayHead

    monkeypatch.setenv("AUTOSCALE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.delenv("RAY_enable_autoscaler_v2", raising=False)
    head = LocalRayHead(tmp_path / "head.log", num_cpus=0, autoscaler_v2=False)
    try:
        head.wait_ready()
        with TpuEmulator() as server:
            path = str(write_cluster(tmp_path, server.url, name="attach"))
            runner = CliRunner()
            done = runner.invoke(cli, ["monitor", path, "--once", "--ray-address", head.address])
            lines = [line for line in done.output.splitlines() if "autoscaler v2" in line]
            assert len(lines) == 1 and lines[0].startswith("warning: the Ray head at")
            status = json.loads(runner.invoke(cli, ["status", path, "--json"]).stdout)
            assert status["ray"]["address"] == head.address
            assert "RAY_enable_autoscaler_v2=1" in status["ray"]["warning"]
    finally:
        head.stop()
