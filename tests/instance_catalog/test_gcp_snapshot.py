"""The GCP facts snapshot built from a recorded catalog (SkyPilot's ``vms.csv`` format), the
bundled one, its corrections, and gcp.yaml held to it."""

from __future__ import annotations

import csv
import io
import json

import pytest

from autoscaler.config import ConfigError, parse_cluster_config
from instance_catalog import gcp
from instance_catalog.gcp_refresh import (
    main,
    records_from_catalog_csv,
    snapshot_from_catalog_csv,
    unpack_snapshot,
)
from instance_catalog.tpu import gcp_data
from providers import cloud_for
from providers.errors import InvalidConfigError
from providers.gcp.compute.machine import GPU_FIELD

HEADER = (
    "InstanceType,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,GpuInfo,"
    "Region,AvailabilityZone,Price,SpotPrice"
)
SAMPLE = f"""{HEADER}
g2-standard-8,8.0,32.0,,,,us-central1,us-central1-a,0.85,0.3
g2-standard-8,8.0,32.0,,,,us-central1,us-central1-c,0.85,0.3
n1-highcpu-16,16.0,14.400390625,,,,us-east1,us-east1-b,0.56,0.1
n1-highcpu-16,16.0,14.400390625,,,,us-central1,us-central1-a,0.56,0.1
n2d-384-224-tpu,224.0,384.0,,,,us-east5,us-east5-a,9.0,3.0
,,,L4,1,{{'Gpus': [{{'MemoryInfo': {{'SizeInMiB': 24576}}}}]}},us-central1,us-central1-a,0.56,0.2
,,,L4,8,{{'Gpus': [{{'MemoryInfo': {{'SizeInMiB': 24576}}}}]}},us-central1,us-central1-c,4.4,1.7
,,,T4,4,,us-east1,us-east1-c,1.4,0.5
,,,Z9,1,,us-east1,us-east1-c,1.0,0.5
,,,tpu-v6e-8,1,tpu-v6e-8,us-east5,us-east5-b,21.6,8.6
,,,tpu-v6e-8,1,tpu-v6e-8,us-east5,us-east5-b,21.6,8.6
,,,tpu-v5litepod-4,1,tpu-v5litepod-4,us-west4,us-west4-a,4.8,1.8
"""


@pytest.fixture
def sample(tmp_path):
    path = tmp_path / "vms.csv"
    path.write_text(SAMPLE)
    return path


def test_a_recorded_catalog_gives_the_snapshot_shape_the_live_refresh_gives(sample):
    snapshot = snapshot_from_catalog_csv(sample, "a recording, 2026-11-24")

    assert snapshot["source"] == "a recording, 2026-11-24"
    g2 = snapshot["machine_types"]["g2-standard-8"]
    assert (g2["guestCpus"], g2["memoryMb"], g2["accelerators"]) == (8, 32768, [])
    assert g2["zones"] == {"us-central1": ["us-central1-a", "us-central1-c"]}
    n1 = snapshot["machine_types"]["n1-highcpu-16"]
    assert n1["memoryMb"] == 14746  # 14.400390625 GiB
    assert list(n1["zones"]) == ["us-central1", "us-east1"]
    l4 = snapshot["accelerator_types"]["nvidia-l4"]
    assert l4["maximumCardsPerInstance"] == 8  # the largest count recorded
    assert l4["zones"] == {"us-central1": ["us-central1-a", "us-central1-c"]}
    assert snapshot["accelerator_types"]["nvidia-tesla-t4"]["zones"] == {"us-east1": ["us-east1-c"]}
    assert snapshot["tpu_accelerator_types"] == {
        "v5litepod-4": {"zones": {"us-west4": ["us-west4-a"]}},
        "v6e-8": {"zones": {"us-east5": ["us-east5-b"]}},  # duplicate rows counted once
    }


def test_tpu_host_shapes_and_unknown_accelerators_are_left_out_and_said_so(sample):
    snapshot = snapshot_from_catalog_csv(sample, "s")

    assert "n2d-384-224-tpu" not in snapshot["machine_types"]
    assert set(snapshot["accelerator_types"]) == {"nvidia-l4", "nvidia-tesla-t4"}
    notes = "\n".join(snapshot["notes"])
    assert "n2d-384-224-tpu" in notes and "Z9" in notes and "Built-in GPUs" in notes


def test_rows_without_a_zone_are_ignored():
    rows = csv.DictReader(io.StringIO(f"{HEADER}\nn1-standard-1,1.0,3.75,,,,us-east1,,0.1,\n"))

    machines, gpus, tpus, skipped = records_from_catalog_csv(rows)

    assert (machines, gpus, tpus, skipped) == ([], [], [], [])


def test_the_script_writes_a_packed_file_that_unpacks_to_the_snapshot(sample, tmp_path):
    out = tmp_path / "snap.json"

    assert main(["--from-skypilot-csv", str(sample), "--source", "s", "--out", str(out)]) == 0

    packed = json.loads(out.read_text())
    assert packed["machine_types"]["g2-standard-8"]["zones"] in packed["zone_sets"]
    expected = snapshot_from_catalog_csv(sample, "s")
    unpacked = unpack_snapshot(packed)
    for table in ("machine_types", "accelerator_types", "tpu_accelerator_types"):
        assert unpacked[table] == expected[table]


# The bundled snapshot ---------------------------------------------------------------------------
@pytest.fixture
def bundled(tmp_path, monkeypatch):
    """The catalog with no user refresh: the bundled snapshot is in use."""
    monkeypatch.setenv("AUTOSCALE_CATALOG_DIR", str(tmp_path))
    from instance_catalog.catalog import load_catalog

    for cached in (gcp._refreshed, gcp._all_types, gcp.zone_fact_regions, load_catalog):
        cached.cache_clear()
    yield gcp._snapshot()
    for cached in (gcp._refreshed, gcp._all_types, gcp.zone_fact_regions, load_catalog):
        cached.cache_clear()


def _not_recorded(key: str) -> dict[str, dict]:
    return {e[key]: e for e in gcp.gcp_overrides().get("not_recorded", ()) if key in e}


def test_the_bundled_snapshot_says_where_it_came_from_and_its_zones_count_as_api_facts(bundled):
    assert "skypilot-org/skypilot-catalog" in bundled["source"]
    assert "017e2502fb63c7a28757acd94002b2d6099d3e3d" in bundled["source"]
    assert gcp.snapshot_source() == bundled["source"]
    assert gcp.zones_from_api()
    assert gcp.zones_from_api("g2-standard-8")
    assert gcp.zones_from_api("nvidia-tesla-t4", "accelerator_types")
    assert gcp.zones_from_api("v5p-8", "tpu_accelerator_types")
    assert not gcp.zones_from_api("a4-highgpu-8g")  # not recorded


def test_gcp_yaml_machine_shapes_agree_with_the_snapshot(bundled):
    """Every vCPU and memory figure of gcp.yaml equals the recorded one, and every type the
    recording lacks is listed under not_recorded with its source page and the same shape."""
    recorded = bundled["machine_types"]
    missing = _not_recorded("machine_type")
    shapes = {name: (v, m) for name, (v, m) in gcp._cpu_shapes().items()}
    shapes.update({name: (v, m) for name, (v, m, _, _) in gcp_data()["gpu_machine_types"].items()})
    for name, (vcpus, memory_gb) in shapes.items():
        if name in recorded:
            facts = recorded[name]
            assert (facts["guestCpus"], facts["memoryMb"]) == (vcpus, round(memory_gb * 1024)), name
        else:
            assert name in missing, f"{name} is neither recorded nor listed in not_recorded"
            assert missing[name]["source"].startswith("https://cloud.google.com/"), name
            assert missing[name]["shape"] == list(gcp_data()["gpu_machine_types"][name]), name
    assert not set(missing) & set(recorded), "a not_recorded type has since been recorded"


def test_built_in_gpus_agree_with_the_recorded_accelerator_types(bundled):
    """gcp.yaml's built-in GPU of each recorded machine type is a recorded accelerator type
    offered in a region of that machine type, with at least its count per VM."""
    gpus = bundled["accelerator_types"]
    for name, (_, _, gce_gpu, count) in gcp_data()["gpu_machine_types"].items():
        machine = bundled["machine_types"].get(name)
        if machine is None:
            continue
        assert gce_gpu in gpus, name
        assert count <= gpus[gce_gpu]["maximumCardsPerInstance"], name
        assert set(machine["zones"]) & set(gpus[gce_gpu]["zones"]), name


def test_every_gcp_yaml_gpu_is_recorded_or_listed_as_not_recorded(bundled):
    missing = _not_recorded("accelerator_type")
    for gce_gpu in gcp_data()["gpus"]:
        assert gce_gpu in bundled["accelerator_types"] or gce_gpu in missing, gce_gpu


def test_n1_attachable_gpu_counts_reach_the_recorded_maximum(bundled):
    limits = next(e for e in gcp.gcp_overrides()["not_recorded"] if "n1_gpu_limits" in e)
    for gce_gpu, rules in gcp_data()["n1_attachable_gpus"].items():
        if gce_gpu not in bundled["accelerator_types"]:
            assert gce_gpu in _not_recorded("accelerator_type"), gce_gpu  # K80: retired
            continue
        assert gce_gpu in limits["n1_gpu_limits"]
        most = bundled["accelerator_types"][gce_gpu]["maximumCardsPerInstance"]
        assert max(rule["count"] for rule in rules) == most, gce_gpu


def test_every_override_gives_a_reason():
    overrides = gcp.gcp_overrides()
    for entry in (*overrides["corrections"], *overrides["not_recorded"]):
        assert entry.get("reason"), entry


def test_corrections_apply_to_the_bundled_snapshot(bundled):
    zones = bundled["machine_types"]["n1-highmem-8"]["zones"]

    assert "us-central2" not in zones and "us-central1" in zones
    assert "us-central2" not in gcp.zone_fact_regions("machine_types")
    assert "us-central2" in gcp.zone_fact_regions("tpu_accelerator_types")


# Zone checks at load ----------------------------------------------------------------------------
GCP = cloud_for("gcp")


def test_a_gce_type_in_a_zone_that_does_not_offer_it_fails_naming_the_zones_that_do(bundled):
    node = {"machineType": "a2-ultragpu-8g", "availability_zone": ["us-central1-b"]}

    with pytest.raises(InvalidConfigError, match="us-central1-a, us-central1-c") as caught:
        GCP.offering(node, {"region": "us-central1"})

    assert caught.value.field == "machineType"


def test_an_attached_gpu_in_a_zone_without_it_fails_naming_the_zones_that_have_it(bundled):
    node = {
        "machineType": "n1-standard-8",
        "availability_zone": ["us-east1-b"],
        "guestAccelerators": [{"acceleratorType": "nvidia-tesla-t4", "acceleratorCount": 1}],
    }

    with pytest.raises(InvalidConfigError, match="us-east1-c, us-east1-d") as caught:
        GCP.offering(node, {})

    assert caught.value.field == GPU_FIELD


def test_a_cluster_file_naming_such_a_zone_fails_at_load(bundled):
    config = {
        "cluster_name": "c",
        "max_workers": 2,
        "provider": {"type": "gcp", "region": "us-central1", "project_id": "p"},
        "available_node_types": {
            "head": {"node_config": {"machineType": "n2-standard-4"}, "resources": {"CPU": 0}},
            "a100": {
                "node_config": {"machineType": "a2-ultragpu-1g"},
                "availability_zone": ["us-central1-f"],
                "max_workers": 1,
            },
        },
        "head_node_type": "head",
    }

    with pytest.raises(ConfigError) as caught:
        parse_cluster_config(config)

    message = str(caught.value)
    assert "a2-ultragpu-1g is not offered in 'us-central1-f'" in message
    assert "us-central1-a, us-central1-c" in message


def test_a_type_the_recording_lacks_is_not_zone_checked(bundled):
    offering = GCP.offering(
        {"machineType": "a4-highgpu-8g", "availability_zone": ["us-central1-b"]}, {}
    )

    assert offering.zones == ("us-central1-b",)
