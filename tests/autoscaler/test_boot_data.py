"""What a node's boot data carries besides commands: file mounts within each cloud's cap,
and `auth`'s SSH key the way Ray's launcher hands it to the cloud."""

from __future__ import annotations

import os

import yaml
from click.testing import CliRunner

from autoscaler.cli import cli
from autoscaler.config import parse_cluster_config

AWS = {"type": "aws", "region": "us-east-1"}
GCP = {
    "type": "gcp",
    "project_id": "p",
    "region": "us-central1",
    "availability_zone": "us-central1-a",
}


def cluster(tmp_path, provider, node_config, **extra) -> str:
    data = {
        "cluster_name": "cap",
        "provider": provider,
        "head_node_type": "head",
        "available_node_types": {"head": {"node_config": node_config}},
        **extra,
    }
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_file_mounts_past_the_cap_stop_plan_and_up_in_one_line(tmp_path):
    blob = tmp_path / "blob.bin"
    blob.write_bytes(os.urandom(40_000))  # random bytes do not compress
    mounts = {"/opt/blob.bin": str(blob)}
    aws = cluster(tmp_path, AWS, {"InstanceType": "m5.large"}, file_mounts=mounts)
    for command in (["plan", aws], ["up", aws, "--yes"]):
        done = CliRunner().invoke(cli, command)
        assert done.exit_code == 2, done.output
        (line,) = [line for line in done.output.splitlines() if line.startswith("Error:")]
        assert "over the 16,384-byte cap of EC2 user data" in line
        assert "file_mounts take" in line and "object storage" in line
    gcp = cluster(tmp_path, GCP, {"machineType": "n1-standard-4"}, file_mounts=mounts)
    assert CliRunner().invoke(cli, ["plan", gcp]).exit_code == 0  # 256 KB per metadata value


def test_a_mount_far_past_the_cap_is_refused_without_packing_it(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    for i in range(3):
        (folder / f"{i}.bin").write_bytes(b"\0" * 600_000)
    path = cluster(tmp_path, AWS, {"InstanceType": "m5.large"}, file_mounts={"/data": str(folder)})
    done = CliRunner().invoke(cli, ["plan", path])
    assert done.exit_code == 2 and "file_mounts hold over" in done.output


def test_gcp_nodes_get_the_users_public_key_as_ssh_keys_metadata(tmp_path):
    key = tmp_path / "id_ed25519"
    key.write_text("private")
    (tmp_path / "id_ed25519.pub").write_text("ssh-ed25519 AAAA me@laptop\n")
    config = parse_cluster_config(
        {
            "provider": GCP,
            "auth": {"ssh_user": "ubuntu", "ssh_private_key": str(key)},
            "head_node_type": "vm",
            "available_node_types": {
                "vm": {"node_config": {"machineType": "n1-standard-4"}},
                "tpu": {
                    "node_config": {"acceleratorType": "v4-8"},
                    "region": "us-central2",
                    "availability_zone": "us-central2-b",
                },
            },
        }
    )
    items = config.launch_config("vm")["metadata"]["items"]
    assert {"key": "ssh-keys", "value": "ubuntu:ssh-ed25519 AAAA me@laptop"} in items
    assert config.launch_config("tpu")["metadata"]["ssh-keys"].startswith("ubuntu:ssh-ed25519")
    assert config.not_acted_on() == ()
    # The head's own YAML carries the key itself: its file stays on the laptop.
    head = parse_cluster_config(yaml.safe_load(config.head_yaml()))
    key.with_suffix(".pub").unlink()
    assert head.launch_config("vm")["metadata"]["items"] == items


def test_aws_nodes_without_a_key_pair_are_said_once_per_type():
    config = parse_cluster_config(
        {
            "provider": AWS,
            "auth": {"ssh_user": "ubuntu"},
            "available_node_types": {
                "keyed": {"node_config": {"InstanceType": "m5.large", "KeyName": "mine"}},
                "bare": {"node_config": {"InstanceType": "m5.large"}},
            },
        }
    )
    (line,) = config.not_acted_on()
    assert line.startswith("auth: node type bare has no node_config.KeyName")
    assert config.launch_config("keyed")["KeyName"] == "mine"
