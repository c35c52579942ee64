"""``autoscale monitor --ray-address``: bad input, a missing or too old Ray, an unreachable
Ray: one line each and a non-zero exit, never a traceback."""

from __future__ import annotations

import socket
import sys

import pytest
import yaml
from click.testing import CliRunner

from autoscaler.cli import cli
from providers.local.gcp.tpu import TpuEmulator
from tests.fakes.clusters import write_cluster


@pytest.fixture
def cluster_yaml(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOSCALE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with TpuEmulator() as server:
        yield write_cluster(tmp_path, server.url, name="cli")


def monitor(*args: str):
    return CliRunner().invoke(cli, ["monitor", *args], catch_exceptions=False)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_address_that_is_not_host_and_port_is_one_line(cluster_yaml):
    result = monitor(str(cluster_yaml), "--once", "--ray-address", "ray://head:10001")
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "Error: --ray-address: Ray address 'ray://head:10001' is not host:port (the Ray "
        "head's GCS address, e.g. 10.0.0.5:6379)"
    ]


def test_the_yaml_key_is_checked_the_same_way(tmp_path, cluster_yaml):
    data = yaml.safe_load(cluster_yaml.read_text())
    cluster_yaml.write_text(yaml.safe_dump({**data, "ray_address": "auto"}))
    result = monitor(str(cluster_yaml), "--once")
    assert result.exit_code == 2 and "ray_address" in result.output
    assert "'auto' is not host:port" in result.output


def test_without_ray_the_error_names_the_extra(cluster_yaml, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    result = monitor(str(cluster_yaml), "--once", "--ray-address", "127.0.0.1:6379")
    assert result.exit_code == 1
    assert result.output.strip() == (
        "Error: --ray-address: Ray is not installed; pip install 'accel-autoscaler[ray]'"
    )


def test_a_ray_without_the_autoscaler_sdk_names_the_minimum_version(cluster_yaml, monkeypatch):
    pytest.importorskip("ray")
    monkeypatch.setitem(sys.modules, "ray.autoscaler.v2.sdk", None)
    result = monitor(str(cluster_yaml), "--once", "--ray-address", "127.0.0.1:6379")
    assert result.exit_code == 1
    assert "is too old: the autoscaler SDK needs Ray >= 2.10" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_an_unreachable_ray_from_the_environment_fails_the_round(cluster_yaml, monkeypatch):
    pytest.importorskip("ray")
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{_closed_port()}")
    result = monitor(str(cluster_yaml), "--once")
    assert result.exit_code == 1
    (line,) = result.output.strip().splitlines()
    assert line.startswith("Error: round failed: Ray at 127.0.0.1:") and "unreachable" in line
