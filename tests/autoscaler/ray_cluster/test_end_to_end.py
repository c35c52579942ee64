"""Real Ray, end to end: a local Ray head, a driver with pending tasks and a STRICT_SPREAD
placement group that no node can run yet, the monitor on the embedded cloud. Nodes launch,
join Ray with the accelerators detection found, the work finishes, and the idle nodes are
drained through Ray and terminated; nothing is left running."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from providers.processes import processes_with

pytest.importorskip("ray")

from ray.autoscaler.v2.sdk import get_cluster_status

from autoscaler.bring_up import up
from autoscaler.cluster import open_cluster
from autoscaler.config import load_cluster_config
from autoscaler.lifecycle import RUNNING, TERMINATING
from autoscaler.monitor import tick_until
from autoscaler.ray_cluster.client import RayCluster
from autoscaler.ray_cluster.local_head import LocalRayHead
from autoscaler.teardown import teardown

A100 = {"GPU": 1, "accelerator_type:A100": 0.001}
DRIVER = """
import ray
from ray.util.placement_group import placement_group
ray.init(log_to_driver=False)

@ray.remote(num_gpus=1, accelerator_type="A100")
def task(i):
    return i

group = placement_group([{"GPU": 1, "accelerator_type:A100": 0.001}] * 2, strategy="STRICT_SPREAD")
results = ray.get([task.remote(i) for i in range(3)])
ray.get(group.ready(), timeout=120)
print("done", sum(results), flush=True)
"""


def _cluster_yaml(tmp_path: Path, address: str) -> Path:
    data = {
        "cluster_name": "ray-e2e",
        "max_workers": 2,
        "ray_address": address,
        "provider": {"type": "aws", "region": "us-east-1", "emulator": True},
        "available_node_types": {
            "a100": {
                "node_config": {"InstanceType": "p4d.24xlarge", "ImageId": "ami-1e749f67"},
                "max_workers": 2,
                "ray_start": True,
                "idle_timeout_minutes": 0.05,
            }
        },
    }
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _ray_status(address: str) -> str:
    ray = Path(sys.executable).with_name("ray")
    done = subprocess.run(
        [str(ray), "status", "-v", "--address", address],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.stdout + done.stderr


@pytest.mark.timeout(400)
def test_ray_work_drives_launch_join_run_drain_and_retire(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOSCALE_STATE_DIR", str(tmp_path / "state"))
    head = LocalRayHead(tmp_path / "head.log", num_cpus=0)
    driver = cluster = None
    try:
        head.wait_ready()
        path = _cluster_yaml(tmp_path, head.address)
        cluster = open_cluster(load_cluster_config(path))
        cluster.ray = RayCluster(head.address)
        up(cluster, path)  # the embedded cloud and its node simulator; nothing to launch yet
        assert cluster.provider.nodes() == []
        reconciler = cluster.reconciler()

        env = {**os.environ, "RAY_ADDRESS": head.address, "RAY_USAGE_STATS_ENABLED": "0"}
        driver = subprocess.Popen(
            [sys.executable, "-c", DRIVER], env=env, stdout=subprocess.PIPE, text=True
        )
        pending, first = tick_until(reconciler, lambda r: bool(r.launched), 90, 0.5)
        assert pending, "Ray's pending work launched nothing"
        # Three 1-GPU tasks fit one node; the STRICT_SPREAD pair needs two distinct nodes.
        assert first.launched == {"a100": 2}
        assert first.plan.launches[0].serves, "the launch says what it is for"
        status = _ray_status(head.address)  # what a user types
        assert "a100, 1 launching" in status.split("Pending:")[1].split("Recent failures")[0]
        booting = reconciler.tick()  # launched, still booting (the simulator waits 2 s)
        pending = get_cluster_status(head.address).pending_nodes
        assert {n.instance_id for n in pending} == {v.id for v in booting.nodes}
        assert all(
            "not yet in Ray" in n.details and n.ray_node_type_name == "a100" for n in pending
        )

        joined, _ = tick_until(
            reconciler, lambda r: len(r.nodes) == 2 and all(v.joined for v in r.nodes), 120, 0.5
        )
        assert joined, "the launched nodes did not join Ray"
        views = reconciler.observe().views
        ours = {v.id for v in views}
        ray_nodes = [n for v in views for n in v.ray_nodes.values()]
        assert {n.instance_id for n in ray_nodes} == ours
        for node in ray_nodes:
            assert node.node_type == "a100"
            assert node.total["GPU"] == 8 and node.total["CPU"] == 96
            assert node.total["accelerator_type:A100"] == 1
            assert node.total["accelerator_type:A100-40G"] == 1

        out, _ = driver.communicate(timeout=120)
        assert driver.returncode == 0 and "done 3" in out

        retired, last = tick_until(
            reconciler, lambda r: all(v.state == TERMINATING for v in r.nodes), 120, 0.5
        )
        assert retired, f"idle nodes were not retired: {[(v.id, v.state) for v in last.nodes]}"
        terminated = [e.message for e in cluster.store.events(100) if e.kind == "terminated"]
        assert len(terminated) == 2 and all("drained by Ray" in m for m in terminated)
        assert all(v.state in (RUNNING, TERMINATING) for v in last.nodes)
    finally:
        if driver is not None and driver.poll() is None:
            driver.kill()
            driver.wait()
        if cluster is not None:
            teardown(cluster)
            cluster.close()
        head.stop()
    leftovers = processes_with("AUTOSCALE_STATE_DIR", str(tmp_path / "state").__eq__)
    assert leftovers == []
