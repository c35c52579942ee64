"""NVIDIA GPU detection through (fake and, where present, real) NVML."""

from __future__ import annotations

import logging
import os
from dataclasses import replace

import pynvml
import pytest

from accel import names
from accel.families.nvidia import PCI_DEVICE_TYPES, NvidiaGpu
from accel.probe import HostProbe
from tests.fakes.nvml import (
    ANY_CALL,
    FakeNvml,
    a100_40g,
    a100_80g,
    gpus,
    h100_sxm,
    install_nvidia,
    t4,
    with_mig,
)

FAMILY = NvidiaGpu()
LOGGER = "accel.families.nvidia"


@pytest.fixture
def host(fake_host):
    """A fake host with a fake NVML module; tests fill in its GPUs."""
    fake_host.nvml = FakeNvml()
    return fake_host


# The model names users meet, the canonical type and the tokens a node of them advertises.
ISSUE_MODELS = [
    ("NVIDIA A100-SXM4-80GB", "A100-80G", ("A100", "A100-80G")),
    ("NVIDIA H100 80GB HBM3", "H100-80G", ("H100", "H100-80G")),
    ("NVIDIA H100 NVL", "H100-NVL", ("H100", "H100-NVL")),
    ("Tesla T4", "T4", ("T4",)),
    ("NVIDIA L40S", "L40S", ("L40S",)),
    ("NVIDIA GB200", "GB200", ("GB200",)),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX-PRO-6000", ("RTX-PRO-6000",)),
    ("NVIDIA GeForce RTX 4090", "RTX-4090", ("GeForce-RTX-4090", "RTX-4090")),
    ("Quadro RTX 6000", "RTX-6000", ("RTX-6000",)),
]


# Detection -------------------------------------------------------------------------------
@pytest.mark.parametrize("by_pci_id", [True, False], ids=["pci-id", "name-only"])
@pytest.mark.parametrize(("model", "expected_type", "expected_tokens"), ISSUE_MODELS)
def test_issue_models_resolve_by_pci_id_and_by_name(
    host, model, expected_type, expected_tokens, by_pci_id
):
    specs = gpus(model, 4)
    if not by_pci_id:  # NVML without PCI info (some vGPUs): the name decides
        specs = [replace(spec, pci_device_id=None) for spec in specs]
    host.nvml.gpus = specs

    detection = FAMILY.detect(host.probe())

    assert detection is not None
    assert detection.resource == "GPU"
    assert detection.count == 4
    assert detection.accelerator_type == expected_type
    assert detection.tokens == expected_tokens
    assert detection.warnings == ()
    assert [d.model for d in detection.devices] == [model] * 4
    assert [d.accelerator_type for d in detection.devices] == [expected_type] * 4


def test_a100_80g_node_reports_every_gpu(host):
    host.nvml.gpus = a100_80g(8)

    detection = FAMILY.detect(host.probe())

    assert detection.count == 8
    assert detection.tokens == ("A100", "A100-80G")
    assert [d.index for d in detection.devices] == list(range(8))
    assert [d.id for d in detection.devices] == [str(i) for i in range(8)]
    assert [d.uuid for d in detection.devices] == [spec.uuid for spec in host.nvml.gpus]
    assert all(d.uuid.startswith("GPU-") for d in detection.devices)
    first, last = detection.devices[0], detection.devices[-1]
    assert first.memory_mib == 81920
    assert first.details == {
        "pci_bus_id": "00000000:07:00.0",
        "pci_device_id": "0x20B2",
        "compute_capability": "8.0",
    }
    assert last.details["pci_bus_id"] == "00000000:77:00.0"


def test_a100_40g_node_advertises_a100_and_a100_40g(host):
    host.nvml.gpus = a100_40g(4)

    detection = FAMILY.detect(host.probe())

    assert detection.tokens == ("A100", "A100-40G")
    assert detection.devices[0].memory_mib == 40960


def test_pci_id_wins_over_an_unrecognised_name(host):
    # Drivers older than a GPU report it as "NVIDIA Graphics Device".
    host.nvml.gpus = [replace(spec, name="NVIDIA Graphics Device") for spec in h100_sxm(2)]

    detection = FAMILY.detect(host.probe())

    assert detection.accelerator_type == "H100-80G"
    assert detection.devices[0].model == "NVIDIA Graphics Device"


def test_name_fallback_uses_memory_to_pick_the_variant(host):
    host.nvml.gpus = [
        replace(spec, name="NVIDIA H100", pci_device_id=0x2339) for spec in h100_sxm(2)
    ]

    detection = FAMILY.detect(host.probe())

    assert detection.tokens == ("H100", "H100-80G")


def test_unknown_model_is_reported_without_a_type(host):
    host.nvml.gpus = [
        replace(spec, name="NVIDIA Graphics Device", pci_device_id=0x2FFF) for spec in t4(2)
    ]

    detection = FAMILY.detect(host.probe())

    assert detection.count == 2
    assert detection.accelerator_type is None
    assert detection.tokens == ()


def test_every_pci_table_entry_is_a_known_nvidia_type():
    for device_id, type_name in PCI_DEVICE_TYPES.items():
        entry = names.get(type_name)
        assert entry is not None, f"0x{device_id:04X} -> unknown type {type_name}"
        assert entry.family == "nvidia"


def test_bytes_strings_from_old_pynvml_are_decoded(host):
    host.nvml.gpus = t4(2, bytes_strings=True)

    detection = FAMILY.detect(host.probe())

    assert detection.devices[0].model == "Tesla T4"
    assert detection.devices[0].uuid == host.nvml.gpus[0].uuid


def test_unsupported_optional_queries_keep_the_gpu(host):
    host.nvml.gpus = t4(
        1,
        errors={
            "nvmlDeviceGetPciInfo": pynvml.NVML_ERROR_NOT_SUPPORTED,
            "nvmlDeviceGetCudaComputeCapability": pynvml.NVML_ERROR_FUNCTION_NOT_FOUND,
        },
    )

    detection = FAMILY.detect(host.probe())

    assert detection.count == 1
    assert detection.accelerator_type == "T4"
    assert detection.devices[0].details == {}


def test_install_nvidia_builds_a_node(fake_host):
    install_nvidia(fake_host, count=4, model="NVIDIA H100 80GB HBM3")

    detection = FAMILY.detect(fake_host.probe())

    assert detection.count == 4
    assert detection.accelerator_type == "H100-80G"


# Failing soft -----------------------------------------------------------------------------
def test_no_pynvml_means_no_gpus(fake_host):
    fake_host.nvml = None

    assert FAMILY.probe_devices(fake_host.probe()) == []
    assert FAMILY.detect(fake_host.probe()) is None


@pytest.mark.parametrize(
    "code",
    [pynvml.NVML_ERROR_DRIVER_NOT_LOADED, pynvml.NVML_ERROR_LIBRARY_NOT_FOUND],
    ids=["driver-not-loaded", "library-not-found"],
)
def test_nvml_init_failure_means_no_gpus(host, caplog, code):
    host.nvml = FakeNvml(a100_80g(8), init_error=code)

    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        assert FAMILY.detect(host.probe()) is None

    assert host.nvml.init_calls == 1
    assert host.nvml.shutdown_calls == 0  # nothing to shut down
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "did not initialise" in caplog.text


def test_count_failure_means_no_gpus_and_shuts_down(host, caplog):
    host.nvml = FakeNvml(a100_80g(8), count_error=pynvml.NVML_ERROR_UNKNOWN)

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert FAMILY.detect(host.probe()) is None

    assert "could not count" in caplog.text
    assert host.nvml.shutdown_calls == 1
    assert not host.nvml.initialised


def test_a_lost_gpu_is_skipped_with_a_warning(host, caplog):
    specs = a100_80g(4)
    specs[2] = replace(specs[2], errors={ANY_CALL: pynvml.NVML_ERROR_GPU_IS_LOST})
    host.nvml.gpus = specs

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        detection = FAMILY.detect(host.probe())

    assert [d.id for d in detection.devices] == ["0", "1", "3"]
    assert [d.index for d in detection.devices] == [0, 1, 2]
    assert detection.devices[2].uuid == specs[3].uuid
    assert "skipping NVIDIA GPU 2" in caplog.text
    assert "GPU is lost" in caplog.text


def test_gpu_lost_on_a_late_query_skips_only_that_gpu(host):
    specs = a100_80g(2)
    specs[0] = replace(specs[0], errors={"nvmlDeviceGetMigMode": pynvml.NVML_ERROR_GPU_IS_LOST})
    host.nvml.gpus = specs

    detection = FAMILY.detect(host.probe())

    assert [d.uuid for d in detection.devices] == [specs[1].uuid]


def test_a_failing_required_query_skips_only_that_gpu(host):
    specs = t4(3)
    specs[1] = replace(specs[1], errors={"nvmlDeviceGetUUID": pynvml.NVML_ERROR_UNKNOWN})
    host.nvml.gpus = specs

    detection = FAMILY.detect(host.probe())

    assert [d.id for d in detection.devices] == ["0", "2"]


@pytest.mark.parametrize(
    "fake",
    [
        FakeNvml(a100_80g(2)),
        FakeNvml(a100_80g(2), count_error=pynvml.NVML_ERROR_UNKNOWN),
        FakeNvml(t4(2, errors={ANY_CALL: pynvml.NVML_ERROR_GPU_IS_LOST})),
        FakeNvml([]),
    ],
    ids=["healthy", "count-fails", "all-lost", "no-gpus"],
)
def test_nvml_is_always_shut_down(host, fake):
    host.nvml = fake

    FAMILY.probe_devices(host.probe())

    assert (fake.init_calls, fake.shutdown_calls) == (1, 1)
    assert not fake.initialised


# MIG ---------------------------------------------------------------------------------------
MIG_SLICE_MIB = 19968  # 2g.20gb on an A100 80GB


@pytest.fixture
def mig_host(host):
    """GPU 0 split into three 2g.20gb instances; GPU 1 MIG capable but off."""
    first, second = a100_80g(2)
    host.nvml.gpus = [
        with_mig(first, "2g.20gb", MIG_SLICE_MIB, 3),
        replace(second, mig_enabled=False),
    ]
    return host


def test_a_gpu_in_mig_mode_is_one_device_listing_its_instances(mig_host):
    detection = FAMILY.detect(mig_host.probe())

    assert detection.count == 2
    assert detection.tokens == ("A100", "A100-80G")
    split, whole = detection.devices
    instances = mig_host.nvml.gpus[0].mig_instances
    assert split.details["mig_enabled"] is True
    assert split.details["mig_devices"] == [
        {
            "uuid": instance.uuid,
            "name": "NVIDIA A100-SXM4-80GB MIG 2g.20gb",
            "memory_mib": MIG_SLICE_MIB,
        }
        for instance in instances
    ]
    assert all(i["uuid"].startswith("MIG-") for i in split.details["mig_devices"])
    assert whole.details["mig_enabled"] is False
    assert "mig_devices" not in whole.details


def test_gpus_without_mig_support_have_no_mig_details(host):
    host.nvml.gpus = t4(1)

    detection = FAMILY.detect(host.probe())

    assert "mig_enabled" not in detection.devices[0].details


def test_mig_uuids_in_cuda_visible_devices_select_those_instances(mig_host):
    instances = mig_host.nvml.gpus[0].mig_instances
    mig_host.env["CUDA_VISIBLE_DEVICES"] = f"{instances[2].uuid},{instances[0].uuid}"

    detection = FAMILY.detect(mig_host.probe())

    assert detection.count == 2
    assert [d.id for d in detection.devices] == [instances[2].uuid, instances[0].uuid]
    assert [d.memory_mib for d in detection.devices] == [MIG_SLICE_MIB] * 2
    # A slice has a fraction of the memory: only the generic type is advertised.
    assert detection.tokens == ("A100",)
    assert detection.devices[0].details == {
        "mig_parent_index": 0,
        "mig_parent_uuid": mig_host.nvml.gpus[0].uuid,
    }
    env = FAMILY.worker_env([detection.devices[0].id], detection.count, {})
    assert env == {"CUDA_VISIBLE_DEVICES": instances[2].uuid}


def test_mig_uuid_and_whole_gpu_together(mig_host):
    instance = mig_host.nvml.gpus[0].mig_instances[1]
    mig_host.env["CUDA_VISIBLE_DEVICES"] = f"1,{instance.uuid},MIG-00000000-not-on-this-host"

    detection = FAMILY.detect(mig_host.probe())

    assert [d.id for d in detection.devices] == ["1", instance.uuid]
    assert detection.tokens == ("A100",)


# Mixed nodes ------------------------------------------------------------------------------
def test_mixed_a100_variants_advertise_only_shared_tokens(host):
    host.nvml.gpus = a100_80g(2) + a100_40g(2)

    detection = FAMILY.detect(host.probe())

    assert detection.count == 4
    assert detection.tokens == ("A100",)
    assert detection.accelerator_type == "A100"
    assert len(detection.warnings) == 1
    assert "NVIDIA A100-SXM4-40GB" in detection.warnings[0]
    assert "NVIDIA A100-SXM4-80GB" in detection.warnings[0]


def test_unrelated_models_share_no_token(host):
    host.nvml.gpus = t4(1) + gpus("NVIDIA L4", 1)

    detection = FAMILY.detect(host.probe())

    assert detection.tokens == ()
    assert detection.accelerator_type is None
    assert "mixed models" in detection.warnings[0]


# CUDA_VISIBLE_DEVICES ------------------------------------------------------------------------
def test_visible_devices_by_index(host):
    host.nvml.gpus = a100_80g(4)
    host.env["CUDA_VISIBLE_DEVICES"] = "1,3"

    detection = FAMILY.detect(host.probe())

    assert [d.id for d in detection.devices] == ["1", "3"]
    assert [d.index for d in detection.devices] == [0, 1]
    assert [d.uuid for d in detection.devices] == [host.nvml.gpus[1].uuid, host.nvml.gpus[3].uuid]


def test_visible_devices_by_uuid_keep_the_users_form_and_order(host):
    host.nvml.gpus = a100_80g(4)
    chosen = [host.nvml.gpus[3].uuid, host.nvml.gpus[0].uuid]
    host.env["CUDA_VISIBLE_DEVICES"] = ",".join(chosen)

    detection = FAMILY.detect(host.probe())

    assert [d.id for d in detection.devices] == chosen
    assert [d.uuid for d in detection.devices] == chosen


@pytest.mark.parametrize("value", ["", "NoDevFiles", "9", "GPU-00000000-0000-0000-0000-0"])
def test_visible_devices_naming_nothing_here_means_none(host, value):
    host.nvml.gpus = a100_80g(4)
    host.env["CUDA_VISIBLE_DEVICES"] = value

    assert FAMILY.detect(host.probe()) is None


# Workers and requests ----------------------------------------------------------------------
def test_worker_env_sets_cuda_visible_devices():
    assert FAMILY.worker_env(["0", "2"], 8, {}) == {"CUDA_VISIBLE_DEVICES": "0,2"}
    assert FAMILY.worker_env([], 8, {}) == {"CUDA_VISIBLE_DEVICES": ""}


@pytest.mark.parametrize(
    "opt_out",
    ["AUTOSCALE_NOSET_CUDA_VISIBLE_DEVICES", "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"],
)
def test_noset_opt_out_leaves_cuda_visible_devices_alone(opt_out):
    assert FAMILY.worker_env(["0"], 8, {opt_out: "1"}) == {}
    assert FAMILY.worker_env(["0"], 8, {opt_out: ""}) == {"CUDA_VISIBLE_DEVICES": "0"}


@pytest.mark.parametrize("quantity", [0, 0.25, 0.5, 1, 2, 8])
def test_fractions_up_to_one_and_whole_numbers_are_valid(quantity):
    assert FAMILY.validate_quantity(quantity) is None


def test_fractions_above_one_are_rejected():
    message = FAMILY.validate_quantity(1.5)

    assert message is not None
    assert "GPU quantity 1.5 is invalid" in message
    assert "whole numbers" in message


def test_negative_quantities_are_rejected():
    assert "must not be negative" in FAMILY.validate_quantity(-1)


# Real hardware ---------------------------------------------------------------------------
def _real_gpu_count() -> int:
    """GPUs the real NVML sees; skips the test where there is no NVML or no GPU."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as err:
        pytest.skip(f"NVML does not initialise here: {err}")
    try:
        count = pynvml.nvmlDeviceGetCount()
    finally:
        pynvml.nvmlShutdown()
    if count < 1:
        pytest.skip("NVML finds no GPU")
    return count


@pytest.mark.nvidia_gpu
def test_real_nvml_reports_every_gpu():
    count = _real_gpu_count()
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}

    detection = FAMILY.detect(HostProbe.from_host(env))

    assert detection is not None
    assert detection.count == count
    for device in detection.devices:
        assert device.uuid, device
        assert device.accelerator_type is not None, device
