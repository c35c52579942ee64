"""The monitor as the head runs it: a long-lived process that receives the nodes' reports
over HTTP, and that resumes after a crash from the cloud's tags and its state file without
launching twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from autoscaler.cluster import open_cluster, state_path
from autoscaler.config import load_cluster_config
from autoscaler.report_server import ReportServer
from autoscaler.state import LAUNCHED_INTENT, StateStore
from providers.base import TAG_NODE_TYPE
from providers.local.gcp.tpu import TpuCloud, TpuEmulator
from tests.fakes.clusters import write_cluster

AUTOSCALE = (sys.executable, "-m", "autoscaler")


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOSCALE_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


@pytest.fixture
def cloud() -> TpuCloud:
    return TpuCloud()


@pytest.fixture
def cluster_yaml(tmp_path, cloud):
    with TpuEmulator(cloud=cloud) as server:
        yield write_cluster(tmp_path, server.url, name="svc")


def _wait_until(condition, what: str, timeout_s: float = 60.0):
    deadline = time.monotonic() + timeout_s
    while not (found := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
    return found


def test_an_agent_reports_to_the_monitor_without_any_cloud_call(cluster_yaml, cloud, tmp_path):
    cluster = open_cluster(load_cluster_config(cluster_yaml))
    (node,) = cluster.provider.create_node(
        {"acceleratorType": "v4-8"}, {TAG_NODE_TYPE: "tpu_v4_8"}, 1, "by-hand"
    ).nodes
    secret = tmp_path / "secret"
    secret.write_text("s3cret")
    endpoint = ReportServer(state_path("svc"), "s3cret", host="127.0.0.1").start()
    labels_before = cloud.calls.get("patch", 0)
    agent = ["node", "agent", "--cluster", "svc", "--provider-config", "{}", "--once"]
    to_monitor = ["--report-url", endpoint.url, "--report-secret-file", str(secret)]
    try:
        done = subprocess.run(
            [*AUTOSCALE, *agent, "--node-id", node.id, *to_monitor],
            env={
                **os.environ,
                "AUTOSCALE_NODE_STATE_DIR": str(tmp_path / "node"),
                "AUTOSCALE_NODE_RESOURCES": '{"TPU": 4}',
            },
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        endpoint.stop()
    assert done.returncode == 0, done.stderr
    (view,) = cluster.reconciler().observe().views
    assert view.reported and view.reports[0].resources["TPU"] == 4
    assert cloud.calls.get("patch", 0) == labels_before  # no label written by the agent
    cluster.close()


def test_a_monitor_killed_mid_launch_resumes_without_launching_twice(cluster_yaml, cloud):
    cloud.hold("create")  # the first launch is still in flight when the monitor dies
    first = subprocess.Popen(
        [*AUTOSCALE, "monitor", str(cluster_yaml), "--interval", "0.2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_until(lambda: cloud.calls.get("create", 0) >= 2, "the min_workers launch")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    cloud.release("create")
    store = StateStore(state_path("svc"))
    pending = [i for i in store.intents() if i.status != LAUNCHED_INTENT]
    assert pending, "the crash left the launch unsettled"
    store.close()
    again = subprocess.run(
        [*AUTOSCALE, "monitor", str(cluster_yaml), "--once"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    assert "launched 0" in again.stdout
    workers = [n for n in cloud.node_names() if "svc" in n]
    assert len(workers) == 2  # min_workers, once
    store = StateStore(state_path("svc"))
    events = [json.dumps([e.kind, e.message]) for e in store.events()]
    store.close()
    assert any("found in the cloud after a restart" in e for e in events)
