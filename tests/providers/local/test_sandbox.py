"""A simulated host's sandbox: system paths land below its root, and the stand-ins do only
what cannot run here (installs and docker recorded, docker exec and systemd units run on the
host, the metadata service answered locally)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from providers.local.sandbox import host_environment, make_root, rewrite_paths, write_standins


def test_system_paths_move_below_the_root_and_quoted_heredocs_stay_as_written(tmp_path):
    script = (
        "mkdir -p /etc/accel-autoscaler /var/lib/x\n"
        "echo hi >>/var/log/agent.log 2>&1 && cat ~/.profile /tmp/keep\n"
        "cat > /etc/x.yaml <<'DATA'\n"
        "remote: /home/ubuntu/data\n"
        "DATA\n"
        "cat > /etc/systemd/system/u.service <<UNIT\n"
        "StandardOutput=append:/var/log/u.log\n"
        "UNIT\n"
        "curl http://169.254.169.254/latest/meta-data/instance-id --temp-dir=/opt/t\n"
    )
    out = rewrite_paths(script, tmp_path)
    assert f"mkdir -p {tmp_path}/etc/accel-autoscaler {tmp_path}/var/lib/x" in out
    assert f">>{tmp_path}/var/log/agent.log" in out
    assert "/tmp/keep" in out and f"{tmp_path}/tmp" not in out
    assert "remote: /home/ubuntu/data\n" in out  # data in a quoted here-document
    assert f"append:{tmp_path}/var/log/u.log" in out  # an unquoted one is the script's text
    assert "http://169.254.169.254/latest/meta-data/instance-id" in out
    assert f"--temp-dir={tmp_path}/opt/t" in out


@pytest.fixture
def host(tmp_path):
    """Run bash lines on a simulated host with the stand-ins first on PATH."""
    root = make_root(tmp_path / "root")
    env = {
        **os.environ,
        **host_environment(tmp_path, root, write_standins(tmp_path / "bin"), os.environ["PATH"]),
        "AUTOSCALE_SIM_IP": "127.0.0.9",
        "AUTOSCALE_SIM_HOST": str(tmp_path),
    }
    (tmp_path / "metadata.json").write_text(
        json.dumps({"/latest/meta-data/instance-id": "i-0abc", "/latest/api/token": "t"})
    )

    def run(lines: str) -> subprocess.CompletedProcess:
        script = rewrite_paths(lines, root)
        return subprocess.run(
            ["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60
        )

    run.root = root
    run.recorded = lambda: (tmp_path / "recorded.log").read_text().splitlines()
    return run


def test_installs_are_recorded_not_run(host):
    done = host(
        "python3 -m pip install --quiet 'accel-autoscaler==9.9'\n"
        "sudo apt-get install -y htop && pip install torch\n"
        "python3 -c 'print(6 * 7)'\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "42"  # every other python3 call is the real one
    assert host.recorded() == [
        "python3 -m pip install --quiet accel-autoscaler==9.9",
        "apt-get install -y htop",
        "pip install torch",
    ]


def test_docker_is_recorded_and_exec_runs_on_the_host(host):
    done = host(
        "docker run -d --name c1 --gpus all --net=host rayproject/ray:latest bash\n"
        "X=from-host docker exec -e X -e Y=set c1 bash -c 'echo $X $Y > ~/inside'\n"
        "cat ~/inside\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "from-host set"
    assert host.recorded()[0] == (
        "docker run -d --name c1 --gpus all --net=host rayproject/ray:latest bash"
    )
    assert host.recorded()[1].startswith("docker exec -e X -e Y=set c1 bash -c")


def test_a_systemd_unit_runs_its_exec_start(host):
    done = host(
        "cat > /etc/systemd/system/hello.service <<UNIT\n"
        "[Service]\n"
        "Environment=GREETING=hello\n"
        "ExecStart=/bin/bash -c 'echo \\$GREETING from the unit'\n"
        "StandardOutput=append:/var/log/hello.log\n"
        "UNIT\n"
        "systemctl daemon-reload\n"
        "systemctl enable --now hello.service\n"
    )
    assert done.returncode == 0, done.stderr
    log = host.root / "var" / "log" / "hello.log"
    for _ in range(100):
        if log.exists() and log.read_text():
            break
        time.sleep(0.05)
    assert log.read_text() == "hello from the unit\n"


def test_the_metadata_service_is_answered_locally(host):
    done = host(
        "TOKEN=$(curl -fsS -X PUT http://169.254.169.254/latest/api/token)\n"
        'curl -fsS -H "X-aws-ec2-metadata-token: $TOKEN" '
        "http://169.254.169.254/latest/meta-data/instance-id\n"
        "echo\nhostname -I\n"
        "curl -fsS http://169.254.169.254/latest/meta-data/nothing || echo missing=$?\n"
    )
    assert done.stdout.split() == ["i-0abc", "127.0.0.9", "missing=22"]


def test_nothing_lands_in_the_real_etc(host):
    marker = f"accel-sandbox-{os.getpid()}"
    assert host(f"mkdir -p /etc/{marker} && touch /etc/{marker}/x").returncode == 0
    assert (host.root / "etc" / marker / "x").exists()
    assert not Path(f"/etc/{marker}").exists()
