"""`autoscale logs`: a node's console on every cloud (moto's EC2, the fake Google servers, the
local cloud's simulated host), owned nodes only."""

from __future__ import annotations

import socket
import urllib.request

import boto3
import pytest
import yaml
from click.testing import CliRunner

from autoscaler.cli import cli
from autoscaler.node_logs import simulated_hosts_dir
from providers import get_provider
from providers.base import TAG_NODE_TYPE
from providers.gcp.emulator import GcpEmulator
from tests.fakes.clusters import gcp_settings

MOTO_LAST_LINE = "Enabling fast FPU save and restore... done."


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOSCALE_STATE_DIR", str(tmp_path / "state"))
    for name, value in (("AWS_ACCESS_KEY_ID", "t"), ("AWS_SECRET_ACCESS_KEY", "t")):
        monkeypatch.setenv(name, value)


def logs(*args: str):
    return CliRunner().invoke(cli, ["logs", *args])


def write(tmp_path, provider: dict, types: dict, name: str = "logs") -> str:
    path = tmp_path / f"{name}.yaml"
    data = {"cluster_name": name, "provider": provider, "available_node_types": types}
    path.write_text(yaml.safe_dump(data))
    return str(path)


@pytest.fixture(scope="module")
def moto_url():
    from moto.server import ThreadedMotoServer

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    urllib.request.urlopen(urllib.request.Request(f"{url}/moto-api/reset", method="POST"))
    yield url
    server.stop()


def test_ec2_console_output_of_an_owned_node_and_one_clear_error_for_others(tmp_path, moto_url):
    settings = {"type": "aws", "region": "us-east-1", "endpoint_url": moto_url}
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=moto_url)
    ami = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    node_config = {"InstanceType": "m5.large", "ImageId": ami}
    path = write(tmp_path, settings, {"cpu": {"node_config": node_config}})
    (node_id,) = (
        get_provider(settings, "logs")
        .create_node(node_config, {TAG_NODE_TYPE: "cpu"}, 1, "req-1")
        .node_ids
    )
    (stranger,) = (
        get_provider(settings, "other")
        .create_node(node_config, {TAG_NODE_TYPE: "cpu"}, 1, "req-2")
        .node_ids
    )

    shown = logs(path, node_id, "--tail", "1")
    assert shown.exit_code == 0, shown.output
    assert shown.output == MOTO_LAST_LINE + "\n"
    refused = logs(path, stranger)
    assert refused.exit_code == 1
    assert f"{stranger} is not a node of cluster logs (its nodes: {node_id})" in refused.output


def test_compute_engine_serial_port_and_cloud_tpu_in_one_line(tmp_path):
    from providers.gcp_compute.emulator import BOOT_LOG

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


def test_the_local_cloud_shows_the_simulated_hosts_boot_log(tmp_path):
    from providers.emulator import stop_emulator

    settings = {"type": "aws", "region": "us-east-1", "emulator": True}
    path = write(tmp_path, settings, {"cpu": {"node_config": {"InstanceType": "m5.large"}}}, "lc")
    try:
        provider = get_provider(settings, "lc")
        ami = provider.ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
        node_config = {"InstanceType": "m5.large", "ImageId": ami}
        (node_id,) = provider.create_node(node_config, {TAG_NODE_TYPE: "cpu"}, 1, "r").node_ids
        log = simulated_hosts_dir("lc", node_id) / "host-0/var/log/accel-autoscaler-boot.log"
        log.parent.mkdir(parents=True)
        log.write_text(
            "[accel-autoscaler boot] setup_commands[0]: pip install x\n"
            "[accel-autoscaler boot] setup_commands[0]: exit 0\n"
        )
        shown = logs(path, node_id, "--tail", "1")
        assert shown.exit_code == 0, shown.output
        assert shown.output == "[accel-autoscaler boot] setup_commands[0]: exit 0\n"
    finally:
        stop_emulator("aws", "lc")
