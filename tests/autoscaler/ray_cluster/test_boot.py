"""What the reconciler launches for Ray: a head that starts Ray and the monitor with its own
cluster YAML, and workers that join the attached Ray cluster as their node type."""

from __future__ import annotations

import pytest
import yaml

from autoscaler.cluster import open_cluster
from autoscaler.config import load_cluster_config, parse_cluster_config
from autoscaler.ray_cluster.client import RayCluster
from providers.base import NODE_KIND_HEAD
from providers.local.gcp.tpu import TpuEmulator
from tests.fakes.clusters import TPU_NODE_CONFIG, write_cluster

pytest.importorskip("ray")  # RayCluster needs Ray


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOSCALE_STATE_DIR", str(tmp_path / "state"))
    node = {"node_config": TPU_NODE_CONFIG, "cost_per_hour": 1.0, "ray_start": True}
    types = {"head": node, "tpu_v4_8": {**node, "max_workers": 4}}
    with TpuEmulator() as server:
        path = write_cluster(tmp_path, server.url, available_node_types=types)
        opened = open_cluster(load_cluster_config(path))
        yield opened
        opened.close()


def _script(node_config: dict) -> str:
    return node_config["metadata"]["startup-script"]


def test_the_head_starts_ray_and_the_monitor_with_a_cluster_yaml_that_loads(cluster):
    script = _script(cluster.reconciler().node_config("head", NODE_KIND_HEAD))
    body = script.split("<<'ACCEL_AUTOSCALER_CLUSTER_YAML'\n", 1)[1]
    written = yaml.safe_load(body.split("\nACCEL_AUTOSCALER_CLUSTER_YAML\n", 1)[0])
    assert parse_cluster_config(written).spec == cluster.config.spec
    assert "export RAY_NODE_TYPE_NAME=head" in script and "RAY_ADDRESS" not in script
    assert "pip install --quiet 'accel-autoscaler[control]==" in script  # it runs the monitor
    assert "command -v ray >/dev/null || python3 -m pip install --quiet 'ray[default]==" in script


def test_workers_join_the_attached_ray_cluster(cluster):
    cluster.ray = RayCluster("10.1.2.3:6379")
    script = _script(cluster.reconciler().node_config("tpu_v4_8"))
    assert "export RAY_ADDRESS=10.1.2.3:6379" in script
    assert "export RAY_NODE_TYPE_NAME=tpu_v4_8" in script and "autoscale monitor" not in script
