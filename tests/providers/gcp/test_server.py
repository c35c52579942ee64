"""The fake TPU server as the local cloud runs it: its own process, faults over HTTP."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest
import requests

from providers import get_provider
from providers.errors import CapacityError
from providers.gcp.provider import GcpNodeProvider


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def server_url():
    port = _free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "providers.local.gcp.server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--tpu-create-delay",
            "0.1",
            "--tpu-delete-delay",
            "0.1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    process.terminate()
    process.wait(timeout=10)


def test_registry_plugin_runs_a_slice_lifecycle_against_the_server_process(server_url):
    config = {
        "type": "gcp",
        "project_id": "p",
        "availability_zone": "us-central2-b",
        "endpoint_url": server_url,
        "operation_poll_s": 0.05,
    }
    provider = get_provider(config, "alpha")
    assert isinstance(provider, GcpNodeProvider)

    (node,) = provider.create_node({"acceleratorType": "v4-16"}, {}, 1, "req-1").nodes
    assert len(node.hosts) == 2

    requests.post(f"{server_url}/_emulator/faults", json={"kind": "stockout"}, timeout=5)
    with pytest.raises(CapacityError):
        provider.create_node({"acceleratorType": "v4-16"}, {}, 1, "req-2")
    requests.delete(f"{server_url}/_emulator/faults", timeout=5)

    assert provider.terminate_nodes([node.id]) == [node.id]
    assert provider.non_terminated_nodes() == []
