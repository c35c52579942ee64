"""`autoscale catalog refresh --cloud gcp` against the fake Compute Engine and Cloud TPU
servers, through the real clients over HTTP."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from autoscaler.cli import cli
from instance_catalog import gcp
from instance_catalog.catalog import load_catalog
from providers.local.gcp.compute import ComputeCloud, Fault
from providers.local.gcp.server import GcpEmulator
from providers.local.gcp.tpu import TpuCloud

G2 = {
    "guestCpus": 8,
    "memoryMb": 32768,
    "accelerators": [{"guestAcceleratorType": "nvidia-l4", "guestAcceleratorCount": 1}],
}
MACHINES = {
    "us-central1-a": {"g2-standard-8": G2, "n1-standard-8": {"guestCpus": 8, "memoryMb": 30720}},
    "us-central1-c": {"g2-standard-8": G2},
}
GPUS = {
    "us-central1-a": {
        "nvidia-tesla-t4": {"description": "NVIDIA T4", "maximumCardsPerInstance": 4}
    },
    "us-central1-b": {
        "nvidia-tesla-t4": {"description": "NVIDIA T4", "maximumCardsPerInstance": 4}
    },
}
TPUS = {"us-central2-b": ["v4-8", "v4-16"], "us-east5-b": ["v6e-8"]}


@pytest.fixture
def server():
    compute = ComputeCloud(machine_types=MACHINES, accelerator_types=GPUS)
    with GcpEmulator(compute=compute, tpu=TpuCloud(zones=TPUS)) as running:
        yield running


@pytest.fixture
def catalog_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOSCALE_CATALOG_DIR", str(tmp_path))
    yield tmp_path
    for cached in (gcp._refreshed, gcp._all_types, gcp.zone_fact_regions, load_catalog):
        cached.cache_clear()


def refresh(url: str):
    args = ["catalog", "refresh", "--cloud", "gcp", "--project", "p", "--endpoint-url", url]
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def test_refresh_builds_zone_tables_from_the_apis(server, catalog_dir):
    result = refresh(server.url)

    assert result.exit_code == 0, result.output
    snapshot = json.loads((catalog_dir / "gcp_compute.json").read_text())
    g2 = snapshot["machine_types"]["g2-standard-8"]
    assert (g2["guestCpus"], g2["memoryMb"]) == (8, 32768)
    assert g2["accelerators"] == G2["accelerators"]
    assert g2["zones"] == {"us-central1": ["us-central1-a", "us-central1-c"]}
    t4 = snapshot["accelerator_types"]["nvidia-tesla-t4"]
    assert t4["maximumCardsPerInstance"] == 4
    assert t4["zones"] == {"us-central1": ["us-central1-a", "us-central1-b"]}
    assert snapshot["tpu_accelerator_types"]["v6e-8"]["zones"] == {"us-east5": ["us-east5-b"]}
    assert "Compute Engine" in snapshot["source"]


def test_the_catalog_takes_its_zones_from_the_refreshed_snapshot(server, catalog_dir):
    assert refresh(server.url).exit_code == 0
    for cached in (gcp._refreshed, gcp._all_types, gcp.zone_fact_regions, load_catalog):
        cached.cache_clear()

    entry = load_catalog().get("g2-standard-8", "gcp")

    assert entry.zones["us-central1"] == ("us-central1-a", "us-central1-c")
    assert gcp.accelerator_zones("nvidia-tesla-t4")["us-central1"] == (
        "us-central1-a",
        "us-central1-b",
    )


def test_a_missing_permission_is_named(server, catalog_dir):
    server.compute.inject(Fault("permission", method="machineTypes"))

    result = refresh(server.url)

    assert result.exit_code != 0
    assert "compute.machineTypes.list" in result.output
