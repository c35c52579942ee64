"""The cluster commands' work (up, status, down, metrics) against the fake Cloud TPU server."""

from __future__ import annotations

import shutil
import socket
import urllib.request
from pathlib import Path

import pytest
import yaml

from autoscaler.bring_up import ensure_head, preflight, preview, up
from autoscaler.cluster import Cluster, ClusterError
from autoscaler.cluster import open_cluster as open_cluster_of
from autoscaler.config import load_cluster_config
from autoscaler.metrics import Metrics
from autoscaler.monitor import all_reported, tick_until
from autoscaler.report import NodeReport, encode
from autoscaler.state import LAUNCHED_INTENT
from autoscaler.status_view import build_status
from autoscaler.teardown import teardown
from providers import cloud_for
from providers.base import NODE_KIND_HEAD, TAG_NODE_KIND, TAG_NODE_TYPE
from providers.local.gcp.tpu import Fault, TpuCloud, TpuEmulator
from tests.fakes.clusters import write_cluster

GCP_VALUE_LIMIT = cloud_for("gcp").tag_value_limit


def report(cluster: Cluster, node_id: str, idle_since: float | None = None) -> None:
    resources = {"CPU": 240, "TPU": 4}
    tags = encode(NodeReport(resources, {"TPU": 4}, resources, {}, idle_since), GCP_VALUE_LIMIT)
    cluster.provider.set_tags([node_id], tags)


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("AUTOSCALE_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


@pytest.fixture
def cloud() -> TpuCloud:
    return TpuCloud()


@pytest.fixture
def server(cloud):
    with TpuEmulator(cloud=cloud) as emulator:
        yield emulator


@pytest.fixture
def open_cluster(tmp_path, server):
    opened: list[Cluster] = []

    def make(**settings) -> Cluster:
        config = load_cluster_config(write_cluster(tmp_path, server.url, **settings))
        opened.append(open_cluster_of(config))
        return opened[-1]

    yield make
    for cluster in opened:
        cluster.close()


def test_preflight_passes_on_a_good_cluster(open_cluster):
    cluster = open_cluster()
    assert preflight(cluster) == []


def test_preflight_names_an_unlaunchable_node_type(tmp_path, server):
    path = write_cluster(tmp_path, server.url)
    data = yaml.safe_load(path.read_text())
    data["available_node_types"]["tpu_v4_8"]["node_config"] = {"acceleratorType": "v7x-8"}
    data["available_node_types"]["tpu_v4_8"]["availability_zone"] = ["us-central1-c"]
    path.write_text(yaml.safe_dump(data))
    (problem,) = preflight(open_cluster_of(load_cluster_config(path)))
    assert problem.startswith("tpu_v4_8:") and "runtimeVersion" in problem


def test_preflight_reports_an_api_that_does_not_answer(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = load_cluster_config(write_cluster(tmp_path, f"http://127.0.0.1:{port}"))
    (problem,) = preflight(open_cluster_of(config))
    assert "does not answer" in problem


def test_up_creates_the_head_and_min_workers_once(open_cluster):
    cluster = open_cluster()
    first = up(cluster)
    assert first.head_created and first.tick.launched == {"tpu_v4_8": 2}
    again = up(open_cluster())
    assert not again.head_created and again.head.id == first.head.id
    assert again.tick.launched == {}
    nodes = cluster.provider.nodes()
    assert sorted(n.tags[TAG_NODE_TYPE] for n in nodes) == ["head", "tpu_v4_8", "tpu_v4_8"]
    assert [n.tags[TAG_NODE_KIND] for n in nodes].count(NODE_KIND_HEAD) == 1
    head_intent = next(i for i in cluster.store.intents() if i.node_type == "head")
    assert head_intent.status == LAUNCHED_INTENT and head_intent.node_ids == (first.head.id,)
    assert preview(cluster) == {}


def test_a_failed_head_launch_is_one_error_and_an_event(open_cluster, cloud):
    cloud.inject(Fault("stockout"))
    cluster = open_cluster()
    with pytest.raises(ClusterError, match="could not launch the head node"):
        ensure_head(cluster)
    (failed,) = [e for e in cluster.store.events() if e.kind == "failed"]
    assert failed.data["kind"] == "capacity"


def test_wait_reported_ticks_until_every_node_reports(open_cluster):
    cluster = open_cluster()
    up(cluster)
    slept: list[float] = []
    done, last = tick_until(cluster.reconciler(), all_reported, 0, sleep=slept.append)
    assert not done and len(last.nodes) == 3
    for node in cluster.provider.nodes():
        report(cluster, node.id)
    done, last = tick_until(cluster.reconciler(), all_reported, 60, sleep=slept.append)
    assert done and all(v.reported for v in last.nodes) and slept == []


def test_status_lists_nodes_from_the_cloud_after_the_state_folder_is_gone(open_cluster, state_dir):
    cluster = open_cluster()
    up(cluster)
    node = next(n for n in cluster.provider.nodes() if n.tags[TAG_NODE_TYPE] == "tpu_v4_8")
    report(cluster, node.id, idle_since=cluster.clock() - 90)
    cluster.close()
    shutil.rmtree(state_dir)
    status = build_status(open_cluster())
    assert len(status["nodes"]) == 3
    reported = next(n for n in status["nodes"] if n["id"] == node.id)
    assert reported["accelerators"] == {"TPU": 4} and reported["idle_seconds"] >= 90
    assert reported["internal_ips"] and reported["state"] == "running"
    assert status["cost_per_hour"] == pytest.approx(1.5 + 2 * 12.88)


def test_status_shows_pending_infeasible_failures_and_blocked_offerings(open_cluster, cloud):
    cluster = open_cluster(name="status")
    cluster.store.set_demand({"bundles": [{"TPU": 4}, {"CPU": 10000}]}, cluster.clock())
    cloud.inject(Fault("stockout", method="create"))
    cluster.reconciler().tick()
    status = build_status(cluster, events=True)
    assert status["infeasible"][0]["resources"] == {"CPU": 10000.0}
    assert status["infeasible"][0]["reason"]
    assert status["pending"] == [] or status["pending"][0]["node_type"] == "tpu_v4_8"
    failure = status["failures"][0]
    assert failure["kind"] == "capacity" and failure["offering"].startswith("v4-8/")
    (blocked,) = status["unavailable_offerings"]
    assert blocked["kind"] == "capacity" and blocked["expires_in_seconds"] > 0
    assert any(e["kind"] == "failed" for e in status["events"])


def test_teardown_leaves_nothing_and_clears_state(open_cluster):
    cluster = open_cluster()
    up(cluster)
    assert len(teardown(cluster, poll_s=0.01)) == 3
    assert cluster.provider.nodes() == []
    assert cluster.store.intents() == [] and cluster.store.events() == []


def test_teardown_can_keep_the_head(open_cluster):
    cluster = open_cluster()
    head = up(cluster).head
    assert len(teardown(cluster, keep_head=True, poll_s=0.01)) == 2
    assert [n.id for n in cluster.provider.nodes()] == [head.id]


def test_teardown_times_out_with_the_nodes_left(open_cluster, monkeypatch):
    cluster = open_cluster()
    up(cluster)
    monkeypatch.setattr(cluster.provider, "terminate_nodes", lambda ids: [])
    with pytest.raises(ClusterError, match="3 node\\(s\\) still listed"):
        teardown(cluster, timeout_s=0)


def test_metrics_endpoint_serves_every_metric(open_cluster, cloud):
    cluster = open_cluster()
    up(cluster)
    bundles = [{"resources": {"TPU": 4}, "count": 4}, {"CPU": 10000}]
    cluster.store.set_demand({"bundles": bundles}, cluster.clock())
    cloud.inject(Fault("quota", times=1))
    started = cluster.clock()
    result = cluster.reconciler().tick()
    metrics = Metrics(cluster.config)
    metrics.observe(result, [e for e in cluster.store.events() if e.at >= started])
    server = metrics.serve(0)
    try:
        url = f"http://127.0.0.1:{server.server_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
    finally:
        server.shutdown()
    for name in (
        'autoscaler_pending_demand{resource="CPU"} 10000.0',
        'autoscaler_pending_demand{resource="TPU"} 4.0',
        'autoscaler_nodes{node_type="tpu_v4_8",state="waiting_for_report"} 2.0',
        "autoscaler_launches_total",
        'autoscaler_launch_failures_total{code="RESOURCE_EXHAUSTED",'
        'offering="v4-8/us-central2-b/on-demand",reason="quota"}',
        "autoscaler_tick_seconds_bucket",
        "autoscaler_plan_cost_per_hour",
        f'autoscaler_plans_total{{outcome="made"}} {float(result.plans_made)}',
        f'autoscaler_plans_total{{outcome="reused"}} {float(result.plans_reused)}',
    ):
        assert name in text
    assert result.plans_made >= 1
