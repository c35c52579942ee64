"""The Compute Engine plugin, with the real client library, against the fake server."""

from __future__ import annotations

import pytest

from providers.gcp.compute.provider import GceNodeProvider
from providers.local.gcp.compute import ComputeCloud
from providers.local.gcp.rest import FakeServer

PROJECT = "test-project"
CLUSTER = "alpha"
ZONES = ["us-central1-a", "us-central1-b"]
L4 = {"machineType": "g2-standard-8", "availability_zone": ZONES}
T4 = {
    "machineType": "n1-standard-8",
    "guestAccelerators": [{"acceleratorType": "nvidia-tesla-t4", "acceleratorCount": 1}],
    "availability_zone": ZONES,
}


@pytest.fixture
def cloud() -> ComputeCloud:
    """Every operation finishes only after it has been polled once."""
    return ComputeCloud(operation_polls=1)


@pytest.fixture
def server(cloud):
    with FakeServer(cloud.route) as running:
        yield running


@pytest.fixture
def make_provider(server):
    def make(cluster: str = CLUSTER, **overrides) -> GceNodeProvider:
        settings = {
            "type": "gcp",
            "project_id": PROJECT,
            "region": "us-central1",
            "endpoint_url": server.url,
            "operation_timeout_s": 10,
            "operation_poll_s": 0.01,
            "retry_deadline_s": 2,
            **overrides,
        }
        return GceNodeProvider(settings, cluster)

    return make


@pytest.fixture
def provider(make_provider) -> GceNodeProvider:
    return make_provider()
