"""The boot script that starts the agent on launched nodes."""

import json
import shlex

from autoscaler.bootstrap import agent_script
from autoscaler.report_channel import ReportTarget
from providers import cloud_for

AWS = {"type": "aws", "region": "us-east-1", "endpoint_url": None}
GCP = {"type": "gcp", "project_id": "p", "availability_zone": "us-central2-b"}


def test_aws_script_installs_finds_its_id_and_starts_the_agent():
    identity = cloud_for("aws").node_identity_script
    script = agent_script(
        "demo", AWS, identity, "accel-autoscaler==0.1.0", ["echo before"], ["echo after"]
    )
    lines = script.splitlines()
    assert lines[0] == "#!/bin/bash"
    assert lines.index("echo before") < lines.index("echo after")
    assert "pip install --quiet accel-autoscaler==0.1.0" in script
    assert "169.254.169.254/latest/meta-data/instance-id" in script
    (start,) = [line for line in lines if line.startswith("nohup autoscale node agent")]
    argv = shlex.split(start.split(">>")[0])
    config = json.loads(argv[argv.index("--provider-config") + 1])
    assert config == {"type": "aws", "region": "us-east-1"}
    assert argv[argv.index("--cluster") + 1] == "demo"


def test_gcp_script_reads_the_tpu_worker_number():
    identity = cloud_for("gcp").node_identity_script
    script = agent_script("demo", GCP, identity, "accel-autoscaler", ray_start=True)
    assert "agent-worker-number" in script
    assert "--ray-start" in script


def test_user_boot_scripts_are_kept():
    aws = cloud_for("aws")
    assert aws.with_boot_script({"UserData": "mine"}, "ours")["UserData"] == "mine"
    assert aws.with_boot_script({}, "ours")["UserData"] == "ours"
    gcp = cloud_for("gcp").with_boot_script({"metadata": {"team": "x"}}, "ours")
    assert gcp["metadata"] == {"team": "x", "startup-script": "ours"}


def _syntax_ok(script: str) -> None:
    import subprocess

    done = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
    assert done.returncode == 0, done.stderr


def test_a_ray_worker_joins_the_ray_head_as_its_node_type():
    identity = cloud_for("aws").node_identity_script
    script = agent_script(
        "demo",
        AWS,
        identity,
        "accel-autoscaler[ray]==0.1.0",
        ray_start=True,
        node_type="a100",
        ray_address="10.0.0.5:6379",
    )
    _syntax_ok(script)
    lines = script.splitlines()
    agent = next(i for i, line in enumerate(lines) if line.startswith("nohup autoscale node"))
    assert lines.index("export RAY_ADDRESS=10.0.0.5:6379") < agent
    assert lines.index("export RAY_NODE_TYPE_NAME=a100") < agent
    assert "--ray-start" in lines[agent] and "autoscale monitor" not in script


def test_a_ray_head_starts_ray_and_the_monitor_with_its_cluster_yaml():
    identity = cloud_for("aws").node_identity_script
    cluster_yaml = "cluster_name: demo\nmax_workers: 3\n"
    script = agent_script(
        "demo",
        AWS,
        identity,
        "accel-autoscaler[ray]",
        ray_start=True,
        node_type="head",
        ray_address="ignored:1",
        head_config=cluster_yaml,
    )
    _syntax_ok(script)
    assert "RAY_ADDRESS" not in script  # the head's agent starts the Ray head itself
    body = script.split("<<'ACCEL_AUTOSCALER_CLUSTER_YAML'\n", 1)[1]
    assert body.split("\nACCEL_AUTOSCALER_CLUSTER_YAML\n", 1)[0] == cluster_yaml.rstrip()
    (monitor,) = [line for line in script.splitlines() if line.startswith("ExecStart=")]
    assert "--ray-address $HEAD_IP:6379" in monitor
    assert "/etc/accel-autoscaler/cluster.yaml" in monitor


def test_the_head_runs_the_monitor_as_a_service_that_receives_reports():
    script = agent_script(
        "demo",
        AWS,
        cloud_for("aws").node_identity_script,
        "accel-autoscaler",
        head_config="cluster_name: demo\n",
        report=ReportTarget("s3cret"),
    )
    _syntax_ok(script)
    lines = script.splitlines()
    unit = lines[lines.index("[Unit]") : lines.index("UNIT", lines.index("[Unit]"))]
    assert "Restart=on-failure" in unit
    assert "StandardOutput=append:/var/log/accel-autoscaler/monitor.log" in unit
    (start,) = [line for line in unit if line.startswith("ExecStart=")]
    assert start.startswith("ExecStart=$AUTOSCALE monitor /etc/accel-autoscaler/cluster.yaml")
    assert "--report-port 8077 --report-secret-file /etc/accel-autoscaler/report-secret" in start
    assert "--report-address $HEAD_IP" in start
    assert "systemctl enable --now accel-autoscaler-monitor.service" in lines
    assert "(umask 077 && printf '%s' s3cret > /etc/accel-autoscaler/report-secret)" in lines
    (agent,) = [line for line in lines if line.startswith("nohup autoscale node agent")]
    assert "--report-url http://127.0.0.1:8077" in agent  # the head reports to itself
    assert lines.index("systemctl enable --now accel-autoscaler-monitor.service") < lines.index(
        agent
    )


def test_workers_report_to_the_head_or_else_into_their_tags():
    identity = cloud_for("aws").node_identity_script
    to_head = agent_script(
        "demo", AWS, identity, "pkg", report=ReportTarget("s3cret", "http://10.0.0.5:8077")
    )
    assert "--report-url http://10.0.0.5:8077 --report-secret-file" in to_head
    assert "systemctl" not in to_head and "autoscale monitor" not in to_head
    unknown_head = agent_script("demo", AWS, identity, "pkg", report=ReportTarget("s3cret"))
    assert "--report-url" not in unknown_head and "s3cret" not in unknown_head
