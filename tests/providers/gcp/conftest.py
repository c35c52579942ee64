"""The GCP TPU plugin, with the real client library, against the fake TPU server on 127.0.0.1."""

from __future__ import annotations

import pytest

from providers.gcp.tpu import GcpTpuNodeProvider
from providers.local.gcp.tpu import TpuCloud, TpuEmulator

PROJECT = "test-project"
ZONE = "us-central2-b"
CLUSTER = "alpha"


@pytest.fixture
def cloud() -> TpuCloud:
    """Every operation finishes only after it has been polled once."""
    return TpuCloud(operation_polls=1)


@pytest.fixture
def emulator(cloud):
    with TpuEmulator(cloud=cloud) as server:
        yield server


@pytest.fixture
def provider_config(emulator) -> dict:
    return {
        "type": "gcp",
        "project_id": PROJECT,
        "availability_zone": ZONE,
        "region": "us-central2",
        "endpoint_url": emulator.url,
        "operation_timeout_s": 10,
        "operation_poll_s": 0.05,
        "retry_deadline_s": 3,
    }


@pytest.fixture
def make_provider(provider_config):
    def make(cluster: str = CLUSTER, **overrides) -> GcpTpuNodeProvider:
        return GcpTpuNodeProvider({**provider_config, **overrides}, cluster)

    return make


@pytest.fixture
def provider(make_provider) -> GcpTpuNodeProvider:
    return make_provider()
