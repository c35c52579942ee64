"""`autoscale logs` on the fake Google servers and the local cloud (EC2's console over moto:
``tests/providers/aws/test_logs.py``)."""

from __future__ import annotations

import pytest
import yaml
from click.testing import CliRunner

from autoscaler.cli import cli
from providers import get_provider
from providers.base import TAG_NODE_TYPE
from providers.local.gcp.server import GcpEmulator
from tests.fakes.clusters import gcp_settings


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOSCALE_STATE_DIR", str(tmp_path / "state"))
    for name, value in (("AWS_ACCESS_KEY_ID", "t"), ("AWS_SECRET_ACCESS_KEY", "t")):
        monkeypatch.setenv(name, value)


def logs(*args: str):
    """`autoscale logs ARGS...`."""
    return CliRunner().invoke(cli, ["logs", *args])


def write(tmp_path, provider: dict, types: dict, name: str = "logs") -> str:
    path = tmp_path / f"{name}.yaml"
    data = {"cluster_name": name, "provider": provider, "available_node_types": types}
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_compute_engine_serial_port_and_cloud_tpu_in_one_line(tmp_path):
    from providers.local.gcp.compute import BOOT_LOG

    with GcpEmulator() as emulator:
        settings = gcp_settings(emulator.url)
        vm = {"machineType": "n1-standard-4", "availability_zone": ["us-central1-a"]}
        tpu = {"acceleratorType": "v4-8", "runtimeVersion": "tpu-ubuntu2204-base"}
        path = write(tmp_path, settings, {"vm": {"node_config": vm}, "tpu": {"node_config": tpu}})
        provider = get_provider(settings, "logs")
        (vm_id,) = provider.create_node(vm, {TAG_NODE_TYPE: "vm"}, 1, "r1").node_ids
        (tpu_id,) = provider.create_node(tpu, {TAG_NODE_TYPE: "tpu"}, 1, "r2").node_ids

        shown = logs(path, vm_id)
        assert shown.exit_code == 0, shown.output
        assert shown.output == BOOT_LOG
        tpu_logs = logs(path, tpu_id)
        assert tpu_logs.exit_code == 1
        assert "keeps no console output" in tpu_logs.output
        assert "/var/log/accel-autoscaler-boot.log" in tpu_logs.output


def test_the_local_cloud_shows_what_its_ec2_keeps_for_the_node(tmp_path):
    from providers.local.servers import stop_emulator

    settings = {"type": "aws", "region": "us-east-1", "emulator": True}
    path = write(tmp_path, settings, {"cpu": {"node_config": {"InstanceType": "m5.large"}}}, "lc")
    try:
        provider = get_provider(settings, "lc")
        ami = provider.ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
        node_config = {"InstanceType": "m5.large", "ImageId": ami}
        (node_id,) = provider.create_node(node_config, {TAG_NODE_TYPE: "cpu"}, 1, "r").node_ids
        shown = logs(path, node_id, "--tail", "2")
        assert shown.exit_code == 0, shown.output
        assert shown.output.splitlines() == provider.console_output(node_id).splitlines()[-2:]
    finally:
        stop_emulator("aws", "lc")
