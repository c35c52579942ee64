"""`autoscale up|request|monitor|status|down` against the fake Cloud TPU server."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from autoscaler.cli import cli
from autoscaler.cluster import state_path
from autoscaler.state import StateStore
from providers.base import TAG_NODE_TYPE
from providers.gcp.tpu import GcpTpuNodeProvider
from providers.local.gcp.tpu import TpuEmulator
from tests.fakes.clusters import write_cluster


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOSCALE_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


@pytest.fixture
def server():
    with TpuEmulator() as emulator:
        yield emulator


@pytest.fixture
def cluster_yaml(tmp_path, server) -> str:
    return str(write_cluster(tmp_path, server.url, name="cli"))


@pytest.fixture
def provider(server) -> GcpTpuNodeProvider:
    settings = {"project_id": "p", "availability_zone": "us-central2-b", "endpoint_url": server.url}
    return GcpTpuNodeProvider(settings, "cli")


def autoscale(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def demand_of(name: str = "cli") -> dict:
    store = StateStore(state_path(name))
    try:
        return store.demand()
    finally:
        store.close()


def test_up_launches_head_and_min_workers_and_is_idempotent(cluster_yaml, provider):
    first = autoscale("up", cluster_yaml, "--yes")
    assert first.exit_code == 0, first.output
    assert "head " in first.output and "created" in first.output
    ids = sorted(n.id for n in provider.nodes())
    assert sorted(n.tags[TAG_NODE_TYPE] for n in provider.nodes()) == [
        "head",
        "tpu_v4_8",
        "tpu_v4_8",
    ]
    again = autoscale("up", cluster_yaml)  # nothing to launch: no question asked
    assert again.exit_code == 0, again.output
    assert "reused" in again.output
    assert sorted(n.id for n in provider.nodes()) == ids


def test_up_without_yes_and_without_a_terminal_refuses(cluster_yaml, provider):
    result = autoscale("up", cluster_yaml)
    assert result.exit_code == 1
    assert "pass --yes" in result.output
    assert provider.nodes() == []


def test_up_wait_times_out_while_nodes_have_not_reported(cluster_yaml):
    result = autoscale("up", cluster_yaml, "--yes", "--wait", "--timeout", "0")
    assert result.exit_code == 1
    assert "timed out after 0s: 3 node(s) not reported" in result.output


def test_request_persists_and_an_empty_request_clears(cluster_yaml):
    result = autoscale("request", cluster_yaml, "--bundles", '[{"TPU": 4}, {"TPU": 4}]')
    assert result.exit_code == 0, result.output
    assert demand_of()["bundles"] == [{"resources": {"TPU": 4.0}, "count": 2}]
    assert autoscale("request", cluster_yaml, "--bundles", "[]").exit_code == 0
    assert demand_of()["bundles"] == []


def test_request_reads_a_demand_file(cluster_yaml, tmp_path):
    path = tmp_path / "demand.json"
    groups = [{"strategy": "SPREAD", "bundles": [{"TPU": 4}, {"TPU": 4}]}]
    path.write_text(json.dumps({"placement_groups": groups}))
    assert autoscale("request", cluster_yaml, "--demand", str(path)).exit_code == 0
    (group,) = demand_of()["placement_groups"]
    assert group["strategy"] == "SPREAD" and group["count"] == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--bundles", '[{"TPU": -1}]'), "must not be negative"),
        (("--bundles", "[]", "--demand", "x.json"), "exactly one of --demand or --bundles"),
        ((), "exactly one of --demand or --bundles"),
    ],
)
def test_request_rejects_bad_input_with_exit_2(cluster_yaml, args, message):
    result = autoscale("request", cluster_yaml, *args)
    assert result.exit_code == 2
    assert message in result.output


def test_monitor_once_launches_for_the_recorded_demand(cluster_yaml, provider):
    autoscale("request", cluster_yaml, "--bundles", json.dumps([{"TPU": 4}] * 5))
    result = autoscale("monitor", cluster_yaml, "--once")
    assert result.exit_code == 0, result.output
    assert "launched 5 x tpu_v4_8" in result.output  # no head yet: min_workers 2 + 3 more
    assert len(provider.nodes()) == 5
    again = autoscale("monitor", cluster_yaml, "--once")
    assert "launched 0" in again.output


def hold(cluster_yaml: str, node_type: str) -> None:
    """Record FAILURE_LIMIT nodes of ``node_type`` in a row that never reported, just now."""
    import time

    from autoscaler.boot_failures import (
        FAILURE_LIMIT,
        Console,
        config_fingerprint,
        record_failure,
    )
    from autoscaler.config import load_cluster_config
    from autoscaler.lifecycle import WAITING_FOR_REPORT

    config = config_fingerprint(load_cluster_config(cluster_yaml), node_type)
    streak = None
    for n in range(FAILURE_LIMIT):
        console = Console(("cloud-init: running startup script", "agent: AccessDenied"))
        streak, _ = record_failure(
            streak, node_type, WAITING_FOR_REPORT, f"n{n}", 1900, console, config, time.time()
        )
    store = StateStore(state_path("cli"))
    store.save_boot_failures(node_type, streak.to_json())
    store.close()


def test_monitor_once_exits_non_zero_while_a_node_type_is_held(cluster_yaml, provider):
    hold(cluster_yaml, "tpu_v4_8")
    result = autoscale("monitor", cluster_yaml, "--once")
    assert result.exit_code == 1
    assert "launched 0" in result.output and "held tpu_v4_8" in result.output
    (line,) = [line for line in result.output.splitlines() if line.startswith("Error")]
    assert "tpu_v4_8 is held, not replaced: 3 nodes in a row never reported" in line
    assert provider.nodes() == []  # not even its min_workers
    table = autoscale("status", cluster_yaml)
    assert table.exit_code == 0, table.output
    assert "Held node types" in table.output and "agent: AccessDenied" in table.output
    (held,) = json.loads(autoscale("status", cluster_yaml, "--json").output)["held_node_types"]
    assert held["node_type"] == "tpu_v4_8" and held["failures"] == 3
    down = autoscale("down", cluster_yaml, "--yes")  # clears the hold with the state
    assert down.exit_code == 0, down.output
    again = autoscale("monitor", cluster_yaml, "--once")
    assert again.exit_code == 0, again.output
    assert "launched 2 x tpu_v4_8" in again.output


def test_status_json_lists_nodes_from_the_cloud_after_the_state_folder_is_gone(
    cluster_yaml, state_dir
):
    autoscale("up", cluster_yaml, "--yes")
    shutil.rmtree(state_dir)
    result = autoscale("status", cluster_yaml, "--json")
    assert result.exit_code == 0, result.output
    status = json.loads(result.output)
    assert sorted(n["node_type"] for n in status["nodes"]) == ["head", "tpu_v4_8", "tpu_v4_8"]
    assert status["cost_per_hour"] == pytest.approx(1.5 + 2 * 12.88)


def test_status_json_reads_without_writing_the_state_file(cluster_yaml, provider, state_dir):
    autoscale("up", cluster_yaml, "--yes")
    # Something for a sync to write down: a node of ours no launch explains.
    provider.create_node({"acceleratorType": "v4-8"}, {TAG_NODE_TYPE: "tpu_v4_8"}, 1, "by-hand")
    autoscale("request", cluster_yaml, "--bundles", json.dumps([{"TPU": 4}] * 4))
    files = sorted(state_path("cli").parent.glob("state.db*"))
    assert files
    before = {path.name: path.read_bytes() for path in files}
    result = autoscale("status", cluster_yaml, "--json")
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.output)["nodes"]) == 4
    assert {path.name: path.read_bytes() for path in files} == before
    store = StateStore(state_path("cli"))
    assert not any(e.kind == "adopted" for e in store.events())  # `monitor` would adopt it
    store.close()


def test_status_table_and_events(cluster_yaml):
    autoscale("up", cluster_yaml, "--yes")
    result = autoscale("status", cluster_yaml, "--events")
    assert result.exit_code == 0, result.output
    assert "Nodes of cli" in result.output and "not reported" in result.output
    assert "launched: launched head" in result.output


def test_down_leaves_nothing_and_clears_state(cluster_yaml, provider):
    autoscale("up", cluster_yaml, "--yes")
    autoscale("request", cluster_yaml, "--bundles", '[{"TPU": 4}]')
    result = autoscale("down", cluster_yaml, "--yes")
    assert result.exit_code == 0, result.output
    assert "terminated 3 node(s)" in result.output
    assert provider.nodes() == []
    assert demand_of()["bundles"] == []


def test_down_keeps_the_head_when_asked(cluster_yaml, provider):
    autoscale("up", cluster_yaml, "--yes")
    assert autoscale("down", cluster_yaml, "--keep-head", "--yes").exit_code == 0
    assert [n.tags[TAG_NODE_TYPE] for n in provider.nodes()] == ["head"]


def test_down_without_yes_and_without_a_terminal_refuses(cluster_yaml, provider):
    autoscale("up", cluster_yaml, "--yes")
    result = autoscale("down", cluster_yaml)
    assert result.exit_code == 1
    assert "Terminate 3 node(s) of cluster cli" in result.output
    assert "pass --yes" in result.output
    assert len(provider.nodes()) == 3


def test_an_unreachable_cloud_is_one_line_without_traceback(tmp_path):
    path = write_cluster(tmp_path, "http://127.0.0.1:9", name="gone")
    done = subprocess.run(
        [sys.executable, "-m", "autoscaler", "status", str(path)],
        env={**os.environ, "AUTOSCALE_STATE_DIR": str(tmp_path / "state")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("Error: ") and len(done.stderr.strip().splitlines()) == 1


def test_config_errors_exit_2(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("provider: {type: gcp}\navailable_node_types: {}\n")
    result = autoscale("status", str(path))
    assert result.exit_code == 2


@pytest.fixture
def emulated_yaml(tmp_path):
    from providers.local.servers import stop_emulator
    from providers.local.simulator import stop_simulator

    provider = {
        "type": "gcp",
        "project_id": "p",
        "availability_zone": "us-central2-b",
        "emulator": True,
        "operation_poll_s": 0.1,
    }
    yield str(write_cluster(tmp_path, "", name="emu", provider=provider))
    stop_simulator("emu")
    stop_emulator("gcp", "emu")


def test_an_emulated_cluster_boots_reports_and_goes_away(emulated_yaml, state_dir):
    up = autoscale("up", emulated_yaml, "--yes", "--wait", "--timeout", "90")
    assert up.exit_code == 0, up.output
    status = json.loads(autoscale("status", emulated_yaml, "--json").output)
    assert [n["accelerators"] for n in status["nodes"]] == [{"TPU": 4}] * 3
    down = autoscale("down", emulated_yaml, "--yes")
    assert down.exit_code == 0, down.output
    assert "terminated 3 node(s)" in down.output
    assert not (state_dir / "emu" / "emulator-gcp.json").exists()
    assert not (state_dir / "emu" / "simulator.json").exists()
