"""`up` prepares the account and `down --purge` removes it, on EC2 and IAM (moto's server)."""

from __future__ import annotations

import json
import socket
import urllib.request

import boto3
import pytest
import yaml
from click.testing import CliRunner

from autoscaler.cli import cli

REGION = "us-east-1"


@pytest.fixture
def endpoint(monkeypatch, tmp_path):
    from moto.server import ThreadedMotoServer

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AUTOSCALE_STATE_DIR", str(tmp_path / "state"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    urllib.request.urlopen(urllib.request.Request(f"{url}/moto-api/reset", method="POST")).read()
    yield url
    server.stop()


@pytest.fixture
def cluster_yaml(endpoint, tmp_path) -> str:
    ami = boto3.client("ec2", region_name=REGION, endpoint_url=endpoint).describe_images(
        Owners=["amazon"]
    )["Images"][0]["ImageId"]
    node = {"InstanceType": "m5.large", "ImageId": ami}
    path = tmp_path / "acct.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "cluster_name": "acct",
                "provider": {"type": "aws", "region": REGION, "endpoint_url": endpoint},
                "available_node_types": {
                    "head": {"node_config": node},
                    "cpu": {"node_config": node, "min_workers": 1, "max_workers": 2},
                },
                "head_node_type": "head",
            }
        )
    )
    return str(path)


def autoscale(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_up_twice_makes_one_set_and_down_purge_removes_only_ours(cluster_yaml, endpoint):
    iam = boto3.client("iam", region_name=REGION, endpoint_url=endpoint)
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=endpoint)
    iam.create_role(RoleName="someone-elses", AssumeRolePolicyDocument="{}")
    first = autoscale("up", cluster_yaml, "--yes")
    assert first.exit_code == 0, first.output
    assert "instance-profile accel-acct-head: created" in first.output
    second = autoscale("up", cluster_yaml, "--yes")
    assert "instance-profile accel-acct-head: reused" in second.output
    assert "created" not in second.output.replace("head i-", "")
    roles = sorted(r["RoleName"] for r in iam.list_roles()["Roles"])
    assert roles == ["accel-acct-head", "someone-elses"]

    instances = [i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]
    profiles = {
        i.get("IamInstanceProfile", {}).get("Arn", "none").rsplit("/", 1)[-1] for i in instances
    }
    assert profiles == {"accel-acct-head", "none"}  # workers report to the head

    status = json.loads(autoscale("status", cluster_yaml, "--json").output)
    assert sorted(r["kind"] for r in status["account"]) == [
        "iam-role",
        "instance-profile",
        "security-group",
    ]

    down = autoscale("down", cluster_yaml, "--yes", "--purge")
    assert down.exit_code == 0, down.output
    assert [r["RoleName"] for r in iam.list_roles()["Roles"]] == ["someone-elses"]
    assert iam.list_instance_profiles()["InstanceProfiles"] == []
    groups = ec2.describe_security_groups()["SecurityGroups"]
    assert [g["GroupName"] for g in groups] == ["default"]
