"""Intel discrete GPU detection from a fake DRM sysfs tree."""

from __future__ import annotations

import pytest

from accel.families.intel_gpu import IntelGpu
from tests.fakes.gpu_trees import install_intel_gpu

intel = IntelGpu()


def test_detects_every_max_1550_and_skips_integrated_gpu_and_connectors(fake_host):
    install_intel_gpu(fake_host, count=4, model="Max 1550")
    found = intel.detect(fake_host.probe())
    assert found is not None and found.count == 4
    assert found.resource == "GPU"
    assert found.tokens == ("Intel-GPU-Max-1550",)
    assert [d.id for d in found.devices] == ["0", "1", "2", "3"]
    first = found.devices[0]
    assert first.model == "Intel(R) Data Center GPU Max 1550"
    assert first.memory_mib == 128 * 1024
    assert first.details["pci_bus_id"] == "0000:29:00.0"
    assert first.details["tiles"] == 2
    assert first.details["drm_card"] == "card1"


@pytest.mark.parametrize(
    ("model", "token"),
    [("Max 1100", "Intel-GPU-Max-1100"), ("Flex 170", "Intel-GPU-Flex-170")],
)
def test_pci_device_id_gives_the_type(fake_host, model, token):
    install_intel_gpu(fake_host, count=2, model=model, integrated=False)
    assert intel.detect(fake_host.probe()).tokens == (token,)


def test_xe_driver_memory_from_tiles(fake_host):
    install_intel_gpu(fake_host, count=1, integrated=False)
    (fake_host.root / "sys/class/drm/card0/lmem_total_bytes").unlink()
    for tile in (0, 1):
        fake_host.write(
            f"/sys/class/drm/card0/device/tile{tile}/physical_vram_size_bytes", 64 * 1024**3
        )
    assert intel.detect(fake_host.probe()).devices[0].memory_mib == 128 * 1024


def test_memory_unknown_without_sysfs_size(fake_host):
    install_intel_gpu(fake_host, count=1, integrated=False)
    (fake_host.root / "sys/class/drm/card0/lmem_total_bytes").unlink()
    assert intel.detect(fake_host.probe()).devices[0].memory_mib is None


def test_only_integrated_gpu_means_none(fake_host):
    install_intel_gpu(fake_host, count=0, integrated=True)
    assert intel.detect(fake_host.probe()) is None


@pytest.mark.parametrize(
    ("selector", "ids"),
    [
        ("level_zero:1,3", ["1", "3"]),
        ("1,3", ["1", "3"]),  # bare ids, as Ray's documentation writes them
        ("!2", ["0", "1", "3"]),
        ("level_zero:3,1", ["3", "1"]),
        ("level_zero:2.0,2.1", ["2"]),
        ("level_zero:gpu", ["0", "1", "2", "3"]),
        ("*:*", ["0", "1", "2", "3"]),
        ("level_zero:*;!level_zero:0", ["1", "2", "3"]),
        ("!level_zero:1,2", ["0", "3"]),
        ("opencl:cpu;level_zero:0", ["0"]),
        ("opencl:gpu", []),
        ("!*:gpu", []),
    ],
)
def test_oneapi_device_selector(fake_host, selector, ids):
    install_intel_gpu(fake_host, count=4)
    fake_host.env["ONEAPI_DEVICE_SELECTOR"] = selector
    found = intel.detect(fake_host.probe())
    assert ([d.id for d in found.devices] if found else []) == ids


@pytest.mark.parametrize("selector", ["levelzero:1", "level_zero:one", "1;;level_zero:", "x"])
def test_unreadable_selector_is_ignored_with_a_warning(fake_host, selector):
    install_intel_gpu(fake_host, count=4)
    fake_host.env["ONEAPI_DEVICE_SELECTOR"] = selector
    found = intel.detect(fake_host.probe())
    assert [d.id for d in found.devices] == ["0", "1", "2", "3"]
    (warning,) = found.warnings
    assert warning.startswith(f"ONEAPI_DEVICE_SELECTOR={selector!r} is ignored: ")
    assert "every Intel GPU stays visible" in warning


def test_readable_selectors_warn_nothing(fake_host):
    install_intel_gpu(fake_host, count=4)
    fake_host.env["ONEAPI_DEVICE_SELECTOR"] = "opencl:cpu;level_zero:0.*,2"
    assert intel.detect(fake_host.probe()).warnings == ()


def test_empty_and_nodevfiles_mean_no_gpus(fake_host):
    install_intel_gpu(fake_host, count=2)
    for value in ("", "NoDevFiles"):
        fake_host.env["ONEAPI_DEVICE_SELECTOR"] = value
        assert intel.detect(fake_host.probe()) is None


def test_ze_affinity_mask_renumbers_before_the_selector(fake_host):
    install_intel_gpu(fake_host, count=4)
    fake_host.env["ZE_AFFINITY_MASK"] = "2,3"
    found = intel.detect(fake_host.probe())
    assert [(d.id, d.details["pci_bus_id"]) for d in found.devices] == [
        ("0", "0000:69:00.0"),
        ("1", "0000:89:00.0"),
    ]
    fake_host.env["ONEAPI_DEVICE_SELECTOR"] = "level_zero:1"
    found = intel.detect(fake_host.probe())
    assert [(d.id, d.details["pci_bus_id"]) for d in found.devices] == [("1", "0000:89:00.0")]


def test_worker_env_uses_level_zero_prefix_like_ray():
    assert intel.worker_env(["0", "2"], 4, {}) == {"ONEAPI_DEVICE_SELECTOR": "level_zero:0,2"}
    assert intel.worker_env([], 4, {}) == {"ONEAPI_DEVICE_SELECTOR": "!*:gpu"}


def test_worker_env_round_trips_through_detection(fake_host):
    install_intel_gpu(fake_host, count=4)
    fake_host.env.update(intel.worker_env(["1", "2"], 4, {}))
    assert [d.id for d in intel.detect(fake_host.probe()).devices] == ["1", "2"]
    fake_host.env.update(intel.worker_env([], 4, {}))
    assert intel.detect(fake_host.probe()) is None


def test_noset_opt_out():
    env = {"RAY_EXPERIMENTAL_NOSET_ONEAPI_DEVICE_SELECTOR": "1"}
    assert intel.worker_env(["0"], 4, env) == {}


def test_quantities():
    assert intel.validate_quantity(0.5) is None
    assert "whole numbers" in intel.validate_quantity(2.5)


def test_garbage_sysfs_is_ignored(fake_host):
    fake_host.write("/sys/class/drm/card0/device/vendor", "garbage")
    fake_host.write("/sys/class/drm/card1/device/vendor", "0x8086")
    fake_host.write("/sys/class/drm/card1/device/device", "zzz")
    fake_host.mkdir("/sys/class/drm/renderD128")
    assert intel.detect(fake_host.probe()) is None


def test_no_drm_means_none(fake_host):
    assert intel.detect(fake_host.probe()) is None
