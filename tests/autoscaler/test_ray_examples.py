"""Ray's own cluster-launcher examples (``fixtures/ray``, only provider.emulator, region and
image ids changed) plan, and come up and down in the local cloud with their node keys in
each node's boot data."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml
from click.testing import CliRunner

from autoscaler.cli import cli
from autoscaler.config import load_cluster_config, parse_cluster_config
from providers.processes import processes_with

RAY = Path(__file__).resolve().parent / "fixtures" / "ray"
EXAMPLES = sorted(p.name for p in RAY.glob("*.yaml"))


def autoscale(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOSCALE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)


@pytest.mark.parametrize("name", EXAMPLES)
def test_each_example_plans_and_says_what_it_does_not_act_on(name):
    done = autoscale("plan", str(RAY / name))
    assert done.exit_code == 0, done.output
    config = load_cluster_config(RAY / name)
    for line in config.not_acted_on():
        assert f"warning: {line}" in done.stderr


def test_rays_list_form_scheduling_and_legacy_layouts_fill_as_in_ray():
    gcp = load_cluster_config(RAY / "gcp-example-full.yaml")
    assert gcp.node_type("ray_worker_small").market == "spot"  # scheduling: [{preemptible}]
    subnets = load_cluster_config(RAY / "aws-example-subnets.yaml")
    worker = subnets.spec.available_node_types["ray.worker.default"].node_config
    assert worker["InstanceType"] == "m5.large"  # Ray's default under the legacy node config
    assert worker["SubnetIds"] == ["subnet-fffffff"]


def _copy(tmp_path: Path, name: str, cluster: str) -> str:
    data = yaml.safe_load((RAY / name).read_text())
    data["cluster_name"] = cluster  # one local cloud per test
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _user_data(cluster: str, node_id: str) -> str:
    from providers import get_provider

    config = load_cluster_config(Path(cluster))
    provider = get_provider(config.provider_settings(), config.spec.cluster_name)
    answer = provider.ec2.describe_instance_attribute(InstanceId=node_id, Attribute="userData")
    return base64.b64decode(answer["UserData"]["Value"]).decode()


@contextmanager
def brought_up(
    tmp_path: Path, name: str, cluster: str, *flags: str
) -> Iterator[tuple[str, Any, dict]]:
    """`up` of example ``name`` in the local cloud (with ``flags``): (its YAML, up's result,
    `status --json`); `down` after, which must end."""
    path = _copy(tmp_path, name, cluster)
    try:
        up = autoscale("up", path, "--yes", *flags)
        assert up.exit_code == 0, up.output
        yield path, up, json.loads(autoscale("status", path, "--json").stdout)
    finally:
        down = autoscale("down", path, "--yes")
    assert down.exit_code == 0, down.output
    assert _left_running(tmp_path) == []


def _left_running(tmp_path: Path) -> list[psutil.Process]:
    """What the simulated hosts started and is still running: marked with a host, or working
    in a host's folder (Ray's retitled agents can lose the mark from their visible
    environment, not their working folder)."""
    marked = processes_with("AUTOSCALE_SIM_HOST", lambda mark: mark.startswith(str(tmp_path)))
    working = []
    for process in psutil.process_iter(["pid", "cwd"]):
        if (process.info.get("cwd") or "").startswith(str(tmp_path)) and process not in marked:
            working.append(process)
    return marked + working


def _boot_log_until(path: str, node_id: str, line: str, timeout_s: float = 120.0) -> str:
    """`logs` of ``node_id`` once they hold ``line`` (or as they are at ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while True:
        logs = autoscale("logs", path, node_id, "--tail", "400")
        assert logs.exit_code == 0, logs.output
        if line in logs.stdout or time.monotonic() > deadline:
            return logs.stdout
        time.sleep(0.5)


@pytest.mark.timeout(240)
def test_aws_example_full_comes_up_with_its_node_keys_and_down_ends(tmp_path):
    # cache_stopped_nodes: down counts a stopped node as done.
    with brought_up(tmp_path, "aws-example-full.yaml", "ray-aws-full") as (path, up, status):
        assert "warning: rsync_exclude: Ray key not acted on" in up.stderr
        (head,) = [n for n in status["nodes"] if n["kind"] == "head"]
        assert status["ray"] == {
            "address": f"{head['internal_ips'][0]}:6379",
            "dashboard": f"http://{head['internal_ips'][0]}:8265",
            "warning": None,
        }
        script = _user_data(path, head["id"])
        assert "run_step 'docker pull' host 'docker pull rayproject/ray-ml:latest-gpu'" in script
        assert "--ulimit nofile=65536:65536 rayproject/ray-ml:latest-gpu" in script
        (start,) = [
            line
            for line in script.splitlines()
            if line.startswith("run_step 'head_start_ray_commands[1]'")
        ]
        assert "--no-monitor" in start and "--autoscaling-config" not in start
        assert "--object-manager-port=8076" in start


@pytest.mark.timeout(240)
def test_gcp_example_full_comes_up_with_list_form_scheduling(tmp_path):
    with brought_up(tmp_path, "gcp-example-full.yaml", "ray-gcp-full") as (_, up, status):
        assert "warning: target_utilization_fraction: Ray key not acted on" in up.stderr
        assert [n["node_type"] for n in status["nodes"]] == ["ray_head_default"]


def test_cache_stopped_nodes_where_the_cloud_cannot_is_said_in_one_line():
    data = yaml.safe_load((RAY / "gcp-example-full.yaml").read_text())
    data["provider"]["cache_stopped_nodes"] = True
    lines = [
        line
        for line in parse_cluster_config(data).not_acted_on()
        if line.startswith("provider.cache_stopped_nodes")
    ]
    assert lines == [
        "provider.cache_stopped_nodes: not supported on gcp: idle nodes are deleted, not stopped"
    ]
    aws = load_cluster_config(RAY / "aws-example-full.yaml")
    assert not any("cache_stopped_nodes" in line for line in aws.not_acted_on())


def test_docker_keys_we_do_not_act_on_are_warned_and_bad_ones_refused():
    data = yaml.safe_load((RAY / "aws-example-full.yaml").read_text())
    data["docker"]["use_podman"] = True
    lines = parse_cluster_config(data).not_acted_on()
    assert "docker.use_podman: Ray key not acted on" in lines
    data["docker"]["run_options"] = 3
    with pytest.raises(ValueError, match=r"docker\.run_options"):
        parse_cluster_config(data)


@pytest.mark.timeout(240)
def test_gcp_tpu_example_comes_up_with_rays_default_start_commands(tmp_path):
    with brought_up(tmp_path, "gcp-tpu.yaml", "ray-gcp-tpu") as (path, up, status):
        assert "no Ray start commands: Ray's defaults start Ray" in up.stderr
        types = sorted(n["node_type"] for n in status["nodes"])
        assert types == ["ray_head_default"] + ["ray_tpu"] * 7
        config = load_cluster_config(Path(path))
        assert config.spec.worker_start_ray_commands[-1].startswith(
            "ray start --address=$RAY_HEAD_IP:6379"
        )


@pytest.mark.timeout(240)
def test_aws_example_gpu_docker_comes_up_on_its_retired_k80_head(tmp_path):
    # p2.xlarge (K80) is named explicitly; the local EC2 offers every catalogued type.
    with brought_up(tmp_path, "aws-example-gpu-docker.yaml", "ray-aws-gpu", "--wait") as (
        path,
        _,
        status,
    ):
        nodes = {n["node_type"]: n for n in status["nodes"]}
        head = nodes["ray.head.gpu"]
        assert head["offering"].startswith("p2.xlarge/")
        assert head["state"] == "running" and head["accelerators"] == {"GPU": 1}
        assert nodes["ray.worker.default"]["offering"].startswith("m5.large/")
        assert status["ray"]["address"] == f"{head['internal_ips'][0]}:6379"
        # --wait ends at the agents' reports; the agent starts before Ray's start commands.
        logs = _boot_log_until(path, head["id"], "boot finished")
        assert "head_setup_commands[0]: exit 0" in logs
        assert "Ray runtime started." in logs


@pytest.mark.timeout(240)
def test_gcp_tpu_pod_example_comes_up_with_its_head_vm_in_a_tpu_zone(tmp_path):
    # us-central2-b: the catalog knows it from TPU v4 alone; its head VM still launches there.
    with brought_up(tmp_path, "gcp-example-tpu-pod.yaml", "ray-gcp-pod", "--wait") as (
        path,
        _,
        status,
    ):
        nodes = {n["node_type"]: n for n in status["nodes"]}
        head = nodes["ray_head_default"]
        assert head["offering"] == "n1-standard-4/us-central2-b/on-demand"
        assert head["state"] == "running"
        pod = nodes["ray_tpu"]
        assert pod["offering"].startswith("v4-16/us-central2-b/")
        assert len(pod["internal_ips"]) == 2  # one per host of the slice
        logs = autoscale("logs", path, head["id"])
        assert logs.exit_code == 0, logs.output
        assert "head_setup_commands[0]: pip install google-api-python-client" in logs.stdout
