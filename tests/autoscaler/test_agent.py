"""The node agent and the embedded cloud's node simulator, against the fake Cloud TPU API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import replace

import pytest

from autoscaler.agent import INTO_TAGS, NodeAgent, tag_publisher, tags_hold
from autoscaler.bootstrap import AGENT_LOG
from autoscaler.config import parse_cluster_config
from autoscaler.reconciler import Reconciler
from autoscaler.report import decode, encode
from autoscaler.state import StateStore
from providers import cloud_for
from providers.gcp.tpu import GcpTpuNodeProvider
from providers.local.gcp.tpu import TpuCloud, TpuEmulator
from providers.local.hosts import SimulatedHost, build, host_probe
from providers.local.simulator import (
    NodeSimulator,
    end_host_processes,
    host_dir,
    node_environment,
)
from tests.fakes.clock import Clock

GCP_VALUE_LIMIT = cloud_for("gcp").tag_value_limit
REPORT_WAIT_S = 180.0
"""How long a simulated slice's agents get to report: alone, a few seconds; under a full CI
run's load (or another job beside it) one wait took over 90 s, and one over 120 s. Their
tests' own time limit is this plus a minute, so the wait, not pytest's limit, decides."""

GIB = 2**30


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOSCALE_STATE_DIR", str(tmp_path / "clusters"))
    with TpuEmulator(cloud=TpuCloud()) as server:
        config = parse_cluster_config(
            {
                "cluster_name": "sim",
                "max_workers": 10,
                "provider": {
                    "type": "gcp",
                    "project_id": "p",
                    "availability_zone": "us-central2-b",
                    "region": "us-central2",
                    "endpoint_url": server.url,
                    "operation_poll_s": 0.02,
                },
                "available_node_types": {
                    "tpu_v4_16": {
                        "node_config": {"acceleratorType": "v4-16"},
                        "cost_per_hour": 25.76,
                        "max_workers": 4,
                    },
                },
            },
            "test",
        )
        provider = GcpTpuNodeProvider(config.spec.provider.model_dump(), "sim")
        yield config, provider, tmp_path
        end_host_processes(f"{tmp_path}/")  # what the simulated hosts' boot scripts started


def test_agent_reports_on_change_and_on_heartbeat(tmp_path):
    host = SimulatedHost("p4d.24xlarge", 96, 1152 * GIB, "nvidia", "A100-40G", 8, 40960)
    probe = host_probe(build(tmp_path / "root", host))
    sent = []
    clock = Clock()
    agent = NodeAgent(sent.append, probe, tmp_path / "state", clock)
    first = agent.step()
    assert first.resources["GPU"] == 8
    assert first.resources["accelerator_type:A100-40G"] == 1
    assert first.device_free == {"GPU": (1.0,) * 8}
    assert first.idle_since == clock()
    clock.advance(10)
    assert agent.step() is None  # nothing changed, heartbeat not due
    clock.advance(60)
    assert agent.step() is not None
    assert sent[-1].idle_since == first.idle_since  # still idle since the start
    assert len(sent) == 2


def test_a_report_another_host_overwrote_is_sent_again(env):
    _, provider, base = env
    (node,) = provider.create_node({"acceleratorType": "v4-16"}, {}, 1, "req-1").nodes
    host = SimulatedHost("v4-16", 240, 400 * GIB, "tpu", "TPU-V4", 4, tpu_pod_type="v4-16")
    clock = Clock()
    agent = NodeAgent(
        tag_publisher(provider, node.id),
        host_probe(build(base / "root", host)),
        base / "state",
        clock,
        INTO_TAGS,
        confirm=tags_hold(provider, node.id),
    )
    before = provider.node_tags(node.id)
    sent = agent.step()
    assert decode(provider.node_tags(node.id)) == sent
    # The other host read the labels before this write and writes them back after it.
    provider.api.update_labels(node.zone, node.id.rpartition("/")[2], before)
    assert decode(provider.node_tags(node.id)) is None

    clock.advance(INTO_TAGS.confirm_after_s - 1)
    assert agent.step() is None  # not read back yet
    clock.advance(1)
    assert agent.step() == replace(sent, reported_at=clock())
    assert decode(provider.node_tags(node.id)).reported_at == clock()
    clock.advance(INTO_TAGS.confirm_after_s)
    assert agent.step() is None  # read back and still there: nothing more to send


def test_a_lease_makes_the_node_busy_and_shows_in_free_shares(tmp_path):
    host = SimulatedHost("p4d.24xlarge", 96, 1152 * GIB, "nvidia", "A100-40G", 8, 40960)
    node_env = build(tmp_path / "root", host)
    agent = NodeAgent(lambda r: None, host_probe(node_env), tmp_path / "state")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "autoscaler",
            "node",
            "run",
            "--resources",
            '{"GPU": 0.5}',
            "--",
            sys.executable,
            "-c",
            "import time; time.sleep(20)",
        ],
        env={**os.environ, **node_env, "AUTOSCALE_NODE_STATE_DIR": str(tmp_path / "state")},
    )
    try:
        for _ in range(100):
            report = agent.report()
            if report.idle_since is None:
                break
            time.sleep(0.1)
        assert report.idle_since is None
        assert report.device_free["GPU"][0] == 0.5
        assert report.free["GPU"] == 7.5
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.timeout(REPORT_WAIT_S + 60)
def test_simulated_slice_reports_every_host_and_becomes_running(env):
    config, provider, _ = env
    clock = Clock()
    reconciler = Reconciler(config, provider, StateStore(_ / "state.db"), clock)
    reconciler.store.set_demand({"bundles": [{"TPU": 4, "TPU-v4-16-head": 1}, {"TPU": 4}]}, 0)
    assert reconciler.tick().launched == {"tpu_v4_16": 1}
    simulator = NodeSimulator(config, provider, boot_delay_s=0, clock=clock)
    reports = _reports(provider, simulator, hosts=2)
    assert [r.resources["TPU"] for r in reports] == [4, 4]
    assert "TPU-v4-16-head" in reports[0].resources
    assert "TPU-v4-16-head" not in reports[1].resources
    (view,) = reconciler.sync().views
    assert view.state == "running"
    assert reconciler.tick().launched == {}


@pytest.mark.timeout(REPORT_WAIT_S + 60)
def test_slice_whose_second_host_never_reports_is_replaced(env):
    config, provider, base = env
    clock = Clock()
    reconciler = Reconciler(config, provider, StateStore(base / "state.db"), clock)
    reconciler.store.set_demand({"bundles": [{"TPU": 4}]}, 0)
    reconciler.tick()
    (node,) = provider.nodes()
    simulator = NodeSimulator(config, provider, boot_delay_s=0, clock=clock)
    _reports(provider, simulator, hosts=2)
    simulator.stop_all()
    provider.set_tags([node.id], {key: "" for key in encode_keys(host=1)})  # host 1 is silent
    (view,) = reconciler.sync().views
    assert view.state == "waiting_for_report"
    clock.advance(31 * 60)
    result = reconciler.tick()
    assert result.terminated == [node.id]
    assert result.launched == {"tpu_v4_16": 1}


def _reports(provider, simulator, hosts: int) -> list:
    """Every host's report, once the simulated hosts' agents (started by their boot
    scripts, in their own processes) have written them into the node's labels, waiting at
    most :data:`REPORT_WAIT_S`."""
    deadline = time.monotonic() + REPORT_WAIT_S
    while True:
        simulator.step()
        (node,) = provider.nodes()
        reports = [decode(node.tags, host) for host in range(hosts)]
        if all(reports):
            return reports
        if time.monotonic() > deadline:
            silent = [host for host, report in enumerate(reports) if not report]
            pytest.fail(f"hosts {silent} never reported:\n{_host_logs(node.id, silent)}")
        time.sleep(0.2)


def _host_logs(node_id: str, hosts: list[int]) -> str:
    """The console and the agent's log of each of ``hosts``: why they did not report."""
    logs = []
    for host in hosts:
        base = host_dir("sim", node_id, host)
        for path in (base / "console.log", base / "root" / AGENT_LOG.lstrip("/")):
            text = path.read_text() if path.exists() else "(none)"
            logs.append(f"--- host {host}: {path.name}\n{text}")
    return "\n".join(logs)


def encode_keys(host: int) -> list[str]:
    from autoscaler.report import NodeReport

    return list(encode(NodeReport({"CPU": 1}), GCP_VALUE_LIMIT, host))


@pytest.mark.timeout(REPORT_WAIT_S + 60)
def test_node_run_on_a_simulated_host_gets_device_ids(env):
    config, provider, base = env
    clock = Clock()
    reconciler = Reconciler(config, provider, StateStore(base / "state.db"), clock)
    reconciler.store.set_demand({"bundles": [{"TPU": 4}]}, 0)
    reconciler.tick()
    _reports(provider, NodeSimulator(config, provider, boot_delay_s=0, clock=clock), hosts=2)
    (node,) = provider.nodes()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "autoscaler",
            "node",
            "run",
            "--resources",
            '{"TPU": 2}',
            "--",
            sys.executable,
            "-c",
            "import os; print(os.environ['TPU_VISIBLE_CHIPS'])",
        ],
        env={**os.environ, **node_environment("sim", node.id, host=1)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0,1"
    detect = subprocess.run(
        [sys.executable, "-m", "autoscaler", "node", "detect", "--json"],
        env={**os.environ, **node_environment("sim", node.id, host=1)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert json.loads(detect.stdout)["resources"]["TPU"] == 4


def test_agent_command_reports_into_the_nodes_labels(env):
    config, provider, base = env
    provider.create_node({"acceleratorType": "v4-8"}, {}, 1, "agentcli0")
    (node,) = provider.nodes()
    host = SimulatedHost("v4-8", 240, 400 * GIB, "tpu", "TPU-V4", 4, 32768, 2, "v4-8", 0, node.id)
    node_env = build(base / "root", host)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "autoscaler",
            "node",
            "agent",
            "--cluster",
            "sim",
            "--provider-config",
            json.dumps(config.spec.provider.model_dump()),
            "--node-id",
            node.id,
            "--once",
        ],
        env={**os.environ, **node_env, "AUTOSCALE_NODE_STATE_DIR": str(base / "state")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    (node,) = provider.nodes()
    report = decode(node.tags)
    assert report.resources["TPU"] == 4
    assert report.resources["TPU-v4-8-head"] == 1
