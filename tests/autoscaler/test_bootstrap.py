"""The boot script: Ray's node keys run in Ray's order, each step logged, executed for real
under bash with stand-ins recording every command (see ``boot_stubs``)."""

from __future__ import annotations

import copy
import json
import shlex
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from autoscaler.bootstrap import agent_script
from autoscaler.cli import cli
from autoscaler.config import parse_cluster_config
from autoscaler.report_channel import ReportTarget
from providers import cloud_for
from tests.autoscaler.boot_stubs import run_boot

IDENTITY = cloud_for("aws").node_identity_script

RAY_YAML: dict[str, Any] = {
    "cluster_name": "demo",
    "provider": {"type": "aws", "region": "us-east-1"},
    "head_node_type": "head",
    "available_node_types": {
        "head": {"node_config": {"InstanceType": "m5.large"}},
        "gpu": {
            "node_config": {"InstanceType": "p4d.24xlarge"},
            "worker_setup_commands": ["mark own-worker-setup"],
        },
        "cpu": {"node_config": {"InstanceType": "m5.large"}},
    },
    "initialization_commands": ["mark init"],
    "setup_commands": ["mark setup"],
    "head_setup_commands": ["mark head-setup"],
    "worker_setup_commands": ["mark worker-setup"],
    "head_start_ray_commands": [
        "ray stop",
        "ulimit -n 65536; ray start --head --port=6380 --object-manager-port=8076 "
        "--autoscaling-config=~/ray_bootstrap_config.yaml",
    ],
    "worker_start_ray_commands": [
        "ray stop",
        "ray start --address=$RAY_HEAD_IP:6380 --object-manager-port=8076",
    ],
}
DOCKER = {
    "image": "rayproject/ray:latest-gpu",
    "worker_image": "rayproject/ray:latest-cpu",
    "container_name": "ray_container",
    "pull_before_run": True,
    "run_options": ["--ulimit nofile=65536:65536"],
}


def config(**changes: Any):
    data = copy.deepcopy(RAY_YAML)
    data.update(changes)
    return parse_cluster_config(data)


def script(cfg, node_type: str, head: bool, **kwargs: Any) -> str:
    return agent_script(cfg, node_type, head, IDENTITY, "accel-autoscaler==0.1.0", **kwargs)


def test_a_head_runs_rays_steps_in_rays_order_in_its_container(tmp_path):
    boot = run_boot(script(config(docker=DOCKER), "head", True), tmp_path)
    assert boot.status == 0, boot.output
    order = [
        "mark init",
        "python3 -m pip install",
        "autoscale node boot-env",
        "docker pull rayproject/ray:latest-gpu",
        "docker run",
        "docker exec",  # the setup commands run in the container
        "mark setup",
        "mark head-setup",
        "ray stop",
        "autoscale node ray-flags",
        "ray start",
    ]
    positions = [boot.index(prefix) for prefix in order]
    assert positions == sorted(positions), boot.calls
    run = shlex.split(next(c for c in boot.calls if c.startswith("docker run")))
    assert run[run.index("--name") + 1] == "ray_container"
    assert "--net=host" in run and "--gpus" in run and "--shm-size=1b" in run
    assert "--ulimit" in run and run[-4:] == [
        "rayproject/ray:latest-gpu",
        "tail",
        "-f",
        "/dev/null",
    ]
    assert not any("--ray-start" in call for call in boot.calls)  # Ray's own commands start Ray
    ray = (tmp_path / "ray.log").read_text().splitlines()
    start = next(line for line in ray if line.startswith("ray start"))
    assert "--autoscaling-config" not in start
    assert "--head --port=6380 --object-manager-port=8076 --no-monitor" in start
    assert '--num-cpus=8 --resources={"accelerator_type:A100":1}' in start
    assert "v2=1 head=10.0.0.9" in start
    log = (tmp_path / "var/log/accel-autoscaler-boot.log").read_text()
    # The agent starts (in the background) after the setup commands, before Ray.
    assert log.index("head_setup_commands[0]: exit 0") < log.index("starting the agent")
    assert log.index("starting the agent") < log.index("head_start_ray_commands[0]")
    assert "--node-id i-0abc" in next(c for c in boot.calls if c.startswith("autoscale node agent"))
    assert "[accel-autoscaler boot] setup_commands[0]: mark setup" in log
    assert "[accel-autoscaler boot] head_setup_commands[0]: exit 0" in log
    assert "boot finished" in log


def test_a_worker_runs_its_own_setup_and_joins_the_head(tmp_path):
    cfg = config(docker=DOCKER)
    target = ReportTarget("s3cret", "http://10.0.0.5:8077")
    boot = run_boot(script(cfg, "gpu", False, report=target), tmp_path)
    assert boot.status == 0, boot.output
    assert "docker pull rayproject/ray:latest-cpu" in boot.calls  # worker_image
    assert "mark own-worker-setup" in boot.calls and "mark worker-setup" not in boot.calls
    assert "mark head-setup" not in boot.calls
    start = (tmp_path / "ray.log").read_text().splitlines()[-1]
    assert start.startswith("ray start --address=10.0.0.5:6380 --object-manager-port=8076 ")
    assert "--no-monitor" not in start and "v2= head=10.0.0.5" in start
    other = run_boot(script(cfg, "cpu", False, ray_address="10.1.2.3:6380"), tmp_path / "cpu")
    assert "mark worker-setup" in other.calls  # the cluster's, the type having none
    assert "head=10.1.2.3" in (tmp_path / "cpu/ray.log").read_text()


def test_without_docker_every_command_runs_on_the_host(tmp_path):
    boot = run_boot(script(config(), "head", True), tmp_path)
    assert boot.status == 0, boot.output
    assert not any(call.startswith("docker") for call in boot.calls)
    assert boot.index("mark init") < boot.index("mark setup") < boot.index("autoscale node agent")


def test_a_failing_step_stops_the_boot_with_its_exit_status(tmp_path):
    cfg = config(setup_commands=["mark one", "exit 3", "mark never"])
    boot = run_boot(script(cfg, "head", True), tmp_path)
    assert boot.status == 3
    assert "mark one" in boot.calls and "mark never" not in boot.calls
    assert not any(call.startswith("autoscale node agent") for call in boot.calls)
    log = (tmp_path / "var/log/accel-autoscaler-boot.log").read_text()
    assert "setup_commands[1]: exit 3" in log
    assert "boot stopped: setup_commands[1] failed (exit 3)" in log


def test_an_image_without_python3_gets_one_clear_line(tmp_path):
    boot = run_boot(
        script(config(docker=DOCKER), "head", True), tmp_path, {"STUB_IMAGE_LACKS": "python3"}
    )
    lines = [line for line in boot.output.splitlines() if "has no python3" in line]
    assert len(lines) == 1 and "rayproject/ray:latest-gpu" in lines[0]


def test_file_mounts_are_in_place_before_the_setup_commands(tmp_path, monkeypatch):
    local = tmp_path / "laptop"
    (local / "code").mkdir(parents=True)
    (local / "code" / "train.py").write_text("print('hi')\n")
    (local / "settings.json").write_text('{"a": 1}')
    monkeypatch.chdir(local)
    node = tmp_path / "node"
    mounts = {f"{node}/opt/code": "code", "~/settings.json": str(local / "settings.json")}
    checks = [f"test -f {node}/opt/code/train.py", "grep -q '\"a\": 1' ~/settings.json"]
    cfg = config(file_mounts=mounts, setup_commands=checks)
    boot = run_boot(script(cfg, "head", True), tmp_path / "root")
    assert boot.status == 0, boot.output
    assert (node / "opt/code/train.py").read_text() == "print('hi')\n"
    head_yaml = cfg.head_yaml()
    assert f"{node}/opt/code: {node}/opt/code" in head_yaml  # the head reads its own copy


def test_file_mounts_are_copied_into_the_container(tmp_path, monkeypatch):
    (tmp_path / "data.txt").write_text("x")
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "in-container" / "data.txt"
    cfg = config(docker=DOCKER, file_mounts={str(target): "data.txt"})
    boot = run_boot(script(cfg, "head", True), tmp_path / "root")
    assert boot.status == 0, boot.output
    assert any(
        c.startswith("docker cp") and c.endswith(f"ray_container:{target}") for c in boot.calls
    )
    assert target.read_text() == "x"


def test_a_missing_local_mount_is_warned_at_plan_and_refused_at_up(tmp_path):
    data = copy.deepcopy(RAY_YAML)
    data["file_mounts"] = {"/remote": str(tmp_path / "nope")}
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(data))
    runner = CliRunner()
    planned = runner.invoke(cli, ["plan", str(path)])
    assert planned.exit_code == 0
    assert "warning: file_mounts./remote: local path" in planned.stderr
    up = runner.invoke(cli, ["up", str(path), "--yes"])
    assert up.exit_code == 2 and "does not exist" in up.output


def test_ray_start_true_without_commands_has_the_agent_start_ray(tmp_path):
    data = {
        "provider": {"type": "aws", "region": "us-east-1"},
        "available_node_types": {
            "a100": {"node_config": {"InstanceType": "p4d.24xlarge"}, "ray_start": True}
        },
    }
    cfg = parse_cluster_config(data)
    text = script(cfg, "a100", False, ray_address="10.0.0.5:6379")
    boot = run_boot(text, tmp_path)
    assert boot.status == 0, boot.output
    (agent,) = [c for c in boot.calls if c.startswith("autoscale node agent")]
    assert "--ray-start" in agent
    assert not any(c.startswith("docker") or c.startswith("ray") for c in boot.calls)
    (line,) = [line for line in text.splitlines() if line.startswith("nohup autoscale")]
    argv = shlex.split(line.split(">>")[0])
    assert json.loads(argv[argv.index("--provider-config") + 1]) == {
        "type": "aws",
        "region": "us-east-1",
    }


def test_user_boot_scripts_are_kept():
    aws = cloud_for("aws")
    assert aws.with_boot_script({"UserData": "mine"}, "ours")["UserData"] == "mine"
    assert aws.with_boot_script({}, "ours")["UserData"] == "ours"
    gcp = cloud_for("gcp").with_boot_script({"metadata": {"team": "x"}}, "ours")
    assert gcp["metadata"] == {"team": "x", "startup-script": "ours"}


def test_the_head_runs_the_monitor_as_a_service_that_receives_reports(tmp_path):
    cfg = config()
    boot = run_boot(script(cfg, "head", True, report=ReportTarget("s3cret")), tmp_path)
    assert boot.status == 0, boot.output
    unit = (tmp_path / "etc/systemd/system/accel-autoscaler-monitor.service").read_text()
    (start,) = [line for line in unit.splitlines() if line.startswith("ExecStart=")]
    assert "monitor" in start and "--report-port 8077" in start
    assert "--report-address 10.0.0.9" in start  # served on the head's own address
    assert "--ray-address 10.0.0.9:6380" in start  # the port the head's `ray start` opens
    assert (tmp_path / "etc/accel-autoscaler/report-secret").read_text() == "s3cret"
    assert "systemctl enable --now accel-autoscaler-monitor.service" in boot.calls
    (agent,) = [c for c in boot.calls if c.startswith("autoscale node agent")]
    assert "--report-url http://10.0.0.9:8077" in agent  # not loopback: the head's address
    written = Path(tmp_path / "etc/accel-autoscaler/cluster.yaml").read_text()
    assert written == cfg.head_yaml()  # carried compressed in the boot data


def test_workers_report_to_the_head_or_else_into_their_tags():
    to_head = script(config(), "cpu", False, report=ReportTarget("s3cret", "http://10.0.0.5:8077"))
    assert "--report-url http://10.0.0.5:8077 --report-secret-file" in to_head
    assert "systemctl" not in to_head and "autoscale monitor" not in to_head
    unknown_head = script(config(), "cpu", False, report=ReportTarget("s3cret"))
    assert "--report-url" not in unknown_head and "s3cret" not in unknown_head
