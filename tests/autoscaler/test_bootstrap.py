"""The boot script that starts the agent on launched nodes."""

import json
import shlex

from autoscaler.bootstrap import agent_script
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
