"""A local-cloud instance boots from its own boot data (EC2 ``UserData``, a Compute Engine
``startup-script``): the simulated host runs it, the metadata service answers with the
instance's own identity, and what it prints is the console the cloud's API returns."""

from __future__ import annotations

import time

import pytest

from autoscaler.config import parse_cluster_config
from providers import get_provider
from providers.base import TAG_NODE_TYPE
from providers.local.gcp.compute import ComputeCloud
from providers.local.gcp.server import GcpEmulator
from providers.local.servers import CONSOLES, stop_emulator
from providers.local.simulator import NodeSimulator, end_host_processes
from providers.local_state import cluster_state_dir

AWS_SCRIPT = """#!/bin/bash
set -euo pipefail
TOKEN=$(curl -fsS -X PUT http://169.254.169.254/latest/api/token)
ID=$(curl -fsS -H "X-aws-ec2-metadata-token: $TOKEN" \\
  http://169.254.169.254/latest/meta-data/instance-id)
mkdir -p /etc/demo && echo "$ID" > /etc/demo/id
echo "booted $ID at $(hostname -I)"
"""
GCE_SCRIPT = """#!/bin/bash
MD=http://metadata.google.internal/computeMetadata/v1/instance
echo "booted $(curl -fsS -H 'Metadata-Flavor: Google' $MD/name) in \\
$(curl -fsS -H 'Metadata-Flavor: Google' $MD/zone)"
"""


def _console(provider, node_id: str, text: str, simulator=None) -> str:
    """The node's console once it shows ``text`` (the simulator keeps stepping)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if simulator is not None:
            simulator.step()
        console = provider.console_output(node_id) or ""
        if text in console:
            return console
        time.sleep(0.2)
    return console


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOSCALE_STATE_DIR", str(tmp_path))
    yield tmp_path
    end_host_processes(f"{tmp_path}/")


def test_an_ec2_instance_runs_its_user_data(state):
    config = parse_cluster_config(
        {
            "cluster_name": "boot-aws",
            "provider": {"type": "aws", "region": "us-east-1", "emulator": True},
            "available_node_types": {
                "cpu": {"node_config": {"InstanceType": "m6i.large", "ImageId": "ami-1e749f67"}}
            },
        },
        "test",
    )
    provider = get_provider(config.provider_settings(), "boot-aws")
    try:
        node_config = {"InstanceType": "m6i.large", "ImageId": "ami-1e749f67"}
        created = provider.create_node(
            {**node_config, "UserData": AWS_SCRIPT}, {TAG_NODE_TYPE: "cpu"}, 1, "r1"
        )
        (node,) = created.nodes
        assert node.internal_ip.startswith("127.")  # the local cloud's network is loopback
        simulator = NodeSimulator(config, provider, boot_delay_s=0)
        simulator.step()
        console = _console(provider, node.id, "booted", simulator)
        assert f"booted {node.id} at {node.internal_ip}" in console
        console = _console(provider, node.id, "boot script exit 0", simulator)
        assert console.startswith("[local cloud] boot script: ")
        root = cluster_state_dir("boot-aws") / CONSOLES / node.id / "host-0" / "root"
        assert (root / "etc" / "demo" / "id").read_text().strip() == node.id
    finally:
        stop_emulator("aws", "boot-aws")


def test_a_compute_engine_vm_runs_its_startup_script(state):
    compute = ComputeCloud(consoles=cluster_state_dir("boot-gce") / CONSOLES)
    with GcpEmulator(compute=compute) as server:
        config = parse_cluster_config(
            {
                "cluster_name": "boot-gce",
                "provider": {
                    "type": "gcp",
                    "project_id": "p",
                    "region": "us-central1",
                    "availability_zone": "us-central1-a",
                    "endpoint_url": server.url,
                    "operation_poll_s": 0.02,
                },
                "available_node_types": {"cpu": {"node_config": {"machineType": "n2-standard-4"}}},
            },
            "test",
        )
        provider = get_provider(config.provider_settings(), "boot-gce")
        node_config = {
            "machineType": "n2-standard-4",
            "metadata": {"items": [{"key": "startup-script", "value": GCE_SCRIPT}]},
        }
        (node,) = provider.create_node(node_config, {TAG_NODE_TYPE: "cpu"}, 1, "r1").nodes
        simulator = NodeSimulator(config, provider, boot_delay_s=0)
        console = _console(provider, node.id, "booted", simulator)
        name = node.id.rpartition("/")[2]
        assert f"booted {name} in projects/0/zones/us-central1-a" in console
