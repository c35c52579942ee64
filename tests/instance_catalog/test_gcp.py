"""GCP instance types: GPU machine types, CPU families, N1 GPU attach rules, TPU slices, prices."""

from __future__ import annotations

from importlib import resources

import pytest

from accel.names import get as get_accelerator_type
from accel.names import tokens_for
from instance_catalog.gcp import (
    attached_gpu_price,
    canonical_gpu_name,
    gcp_instance_types,
    known_regions,
    n1_gpu_counts,
)
from instance_catalog.model import GCP
from instance_catalog.tpu import gcp_data, tpu_slice_types

GIB = 1024


@pytest.fixture(scope="module")
def types():
    return {entry.name: entry for entry in gcp_instance_types()}


def _has_prices() -> bool:
    return resources.files("instance_catalog.data").joinpath("prices_gcp.csv").is_file()


needs_prices = pytest.mark.skipif(not _has_prices(), reason="no bundled GCP price snapshot")


# GPU machine types ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "vcpus", "memory_gb", "gpu", "count", "gpu_memory_gb", "cloud_name"),
    [
        ("a2-highgpu-8g", 96, 680, "A100-40G", 8, 40, "nvidia-tesla-a100"),
        ("a2-megagpu-16g", 96, 1360, "A100-40G", 16, 40, "nvidia-tesla-a100"),
        ("a2-ultragpu-8g", 96, 1360, "A100-80G", 8, 80, "nvidia-a100-80gb"),
        ("a3-highgpu-8g", 208, 1872, "H100-80G", 8, 80, "nvidia-h100-80gb"),
        ("a3-megagpu-8g", 208, 1872, "H100-80G", 8, 80, "nvidia-h100-mega-80gb"),
        ("a3-ultragpu-8g", 224, 2952, "H200", 8, 141, "nvidia-h200-141gb"),
        ("a4-highgpu-8g", 224, 3968, "B200", 8, 180, "nvidia-b200"),
        ("g2-standard-4", 4, 16, "L4", 1, 24, "nvidia-l4"),
        ("g2-standard-24", 24, 96, "L4", 2, 24, "nvidia-l4"),
        ("g4-standard-384", 384, 1440, "RTX-PRO-6000", 8, 96, "nvidia-rtx-pro-6000"),
    ],
)
def test_gpu_machine_types(types, name, vcpus, memory_gb, gpu, count, gpu_memory_gb, cloud_name):
    entry = types[name]

    assert entry.cloud == GCP
    assert (entry.vcpus, entry.memory_mib) == (vcpus, memory_gb * GIB)
    accelerator = entry.accelerator
    assert accelerator is not None
    assert (accelerator.name, accelerator.count) == (gpu, count)
    assert accelerator.memory_mib == gpu_memory_gb * GIB
    assert (accelerator.manufacturer, accelerator.family) == ("NVIDIA", "nvidia")
    assert accelerator.cloud_name == cloud_name
    assert entry.tpu is None and entry.attachable_gpus == ()


def test_a100_80g_advertises_its_generic_token(types):
    assert tokens_for(types["a2-ultragpu-8g"].accelerator.name) == ("A100", "A100-80G")


def test_every_gce_gpu_has_a_canonical_name():
    for gce_name, facts in gcp_data()["gpus"].items():
        assert get_accelerator_type(facts["canonical"]) is not None, gce_name
        assert canonical_gpu_name(gce_name) == facts["canonical"]


def test_unknown_gce_gpu_falls_back_to_the_name_resolver():
    assert canonical_gpu_name("nvidia-tesla-k80") == "K80"
    assert canonical_gpu_name("nvidia-mystery") == "nvidia-mystery"


# CPU machine types ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "vcpus", "memory_mib"),
    [
        ("n1-standard-1", 1, 3840),
        ("n1-highmem-96", 96, 624 * GIB),
        ("n1-highcpu-2", 2, round(1.8 * GIB)),
        ("n2-standard-8", 8, 32 * GIB),
        ("n2-highmem-128", 128, 864 * GIB),
        ("n2d-standard-224", 224, 896 * GIB),
        ("e2-standard-4", 4, 16 * GIB),
        ("e2-medium", 2, 4 * GIB),
        ("c2-standard-60", 60, 240 * GIB),
        ("c3-highcpu-176", 176, 352 * GIB),
    ],
)
def test_cpu_machine_types(types, name, vcpus, memory_mib):
    entry = types[name]

    assert (entry.vcpus, entry.memory_mib) == (vcpus, memory_mib)
    assert entry.accelerator is None and entry.tpu is None


def test_no_gpu_attaches_outside_n1(types):
    assert types["n2-standard-8"].attachable_gpus == ()
    assert types["e2-standard-4"].attachable_gpus == ()


# N1 attach rules ------------------------------------------------------------------------------
def _counts(entry, gpu: str) -> tuple[int, ...]:
    for attachment in entry.attachable_gpus:
        if attachment.accelerator.name == gpu:
            assert attachment.accelerator.count == 1
            return attachment.counts
    return ()


def test_four_t4_attach_to_n1_standard_32(types):
    assert _counts(types["n1-standard-32"], "T4") == (1, 2, 4)


def test_large_n1_hosts_need_more_gpus(types):
    assert _counts(types["n1-standard-96"], "T4") == (4,)
    assert _counts(types["n1-standard-96"], "V100-16G") == (8,)
    assert _counts(types["n1-standard-64"], "V100-16G") == (8,)
    assert _counts(types["n1-standard-32"], "V100-16G") == (4, 8)
    assert _counts(types["n1-standard-8"], "V100-16G") == (1, 2, 4, 8)


def test_p100_never_comes_eight_to_a_vm(types):
    for entry in types.values():
        assert 8 not in _counts(entry, "P100"), entry.name
    assert _counts(types["n1-standard-96"], "P100") == ()
    assert _counts(types["n1-highmem-32"], "P100") == (2, 4)
    assert _counts(types["n1-standard-64"], "P100") == ()  # 240 GB is over the 208 GB limit


def test_memory_limits_the_counts_too():
    # n1-highmem-16 (104 GB) fits one P100 (16 vCPUs / 104 GB); n1-highmem-32 (208 GB) does not.
    assert n1_gpu_counts("nvidia-tesla-p100", 16, 104) == (1, 2, 4)
    assert n1_gpu_counts("nvidia-tesla-p100", 16, 105) == (2, 4)
    assert n1_gpu_counts("nvidia-l4", 4, 15) == ()


def test_attached_gpu_records(types):
    t4 = next(a for a in types["n1-standard-4"].attachable_gpus if a.accelerator.name == "T4")

    assert t4.accelerator.cloud_name == "nvidia-tesla-t4"
    assert t4.accelerator.memory_mib == 16 * GIB
    assert t4.accelerator.family == "nvidia"
    models = {a.accelerator.name for a in types["n1-standard-4"].attachable_gpus}
    assert models == {"T4", "P4", "V100-16G", "P100", "K80"}  # K80: retired, older files load


def test_custom_machine_types_are_read_from_their_name():
    from instance_catalog.catalog import load_catalog

    custom = load_catalog().get("custom-6-16384", "gcp")
    assert (custom.vcpus, custom.memory_mib) == (6, 16384)
    assert {a.accelerator.name for a in custom.attachable_gpus} >= {"T4", "K80"}  # an N1 shape
    n2 = load_catalog().get("n2-custom-8-32768-ext", "gcp")
    assert (n2.vcpus, n2.memory_mib, n2.attachable_gpus) == (8, 32768, ())


# TPU slice types ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "vcpus", "memory_gb", "accelerator", "chips_per_host", "hbm_gib", "cores"),
    [
        ("v4-8", 240, 407, "TPU-V4", 4, 32, 2),
        ("v4-16", 240, 407, "TPU-V4", 4, 32, 2),
        ("v5litepod-8", 224, 384, "TPU-V5LITEPOD", 8, 16, 1),
        ("v5litepod-16", 112, 192, "TPU-V5LITEPOD", 4, 16, 1),
        ("v5p-8", 208, 448, "TPU-V5P", 4, 95, 2),
        ("v6e-256", 180, 720, "TPU-V6E", 4, 32, 1),
        ("v7x-16", 224, 960, "TPU-V7X", 4, 192, 2),
    ],
)
def test_tpu_types_describe_one_host(
    types, name, vcpus, memory_gb, accelerator, chips_per_host, hbm_gib, cores
):
    entry = types[name]

    assert (entry.vcpus, entry.memory_mib) == (vcpus, memory_gb * GIB)
    assert entry.tpu is not None
    assert entry.accelerator.name == accelerator
    assert entry.accelerator.count == chips_per_host == entry.tpu.chips_per_host
    assert entry.accelerator.memory_mib == hbm_gib * GIB
    assert entry.accelerator.cores_per_device == cores
    assert (entry.accelerator.manufacturer, entry.accelerator.family) == ("Google", "tpu")


def test_v6e_256_spans_64_hosts(types):
    tpu = types["v6e-256"].tpu

    assert (tpu.hosts, tpu.topology) == (64, "16x16")


def test_every_tpu_slice_type_is_an_instance_type(types):
    for name in tpu_slice_types():
        assert types[name].tpu is not None, name


def test_tpu_zones(types):
    assert types["v4-16"].zones["us-central2"] == ("us-central2-b",)
    assert "us-central1-c" in types["v7x-16"].zones["us-central1"]


def test_known_regions_are_those_of_every_catalogued_type(types):
    """Read from the data without building the types (a GCP config's region check)."""
    assert known_regions() == {region for entry in types.values() for region in entry.zones}
    assert {"us-central1", "us-central2", "europe-west4"} <= known_regions()


def test_names_are_unique():
    names = [e.name for e in gcp_instance_types()]
    assert len(names) == len(set(names))


# Prices ---------------------------------------------------------------------------------------
@needs_prices
@pytest.mark.parametrize(
    ("name", "region"),
    [
        ("n1-standard-4", "us-central1"),
        ("e2-standard-4", "us-central1"),
        ("a2-highgpu-8g", "us-central1"),
        ("a3-highgpu-8g", "us-central1"),
        ("v4-8", "us-central2"),
        ("v5litepod-8", "us-central1"),
        ("v5p-8", "us-east5"),
        ("v6e-8", "us-east5"),
    ],
)
def test_common_types_have_prices(types, name, region):
    entry = types[name]

    assert entry.price(region) is not None and entry.price(region) > 0
    assert region in entry.regions


@needs_prices
def test_built_in_gpus_are_priced_with_the_vm(types):
    from instance_catalog.prices import gcp_prices

    vm = gcp_prices("machine", "a2-highgpu-8g")["us-central1"].on_demand
    gpu = gcp_prices("gpu", "nvidia-tesla-a100")["us-central1"].on_demand

    assert types["a2-highgpu-8g"].price("us-central1") == pytest.approx(vm + 8 * gpu)


@needs_prices
def test_attached_gpu_price():
    one = attached_gpu_price("nvidia-tesla-t4", 1, "us-central1")

    assert one is not None and one > 0
    assert attached_gpu_price("T4", 4, "us-central1") == pytest.approx(4 * one)
    assert attached_gpu_price("nvidia-tesla-t4", 1) <= one
    assert attached_gpu_price("nvidia-tesla-t4", 1, "mars-north1") is None
    assert attached_gpu_price(None, 1, "us-central1") is None
