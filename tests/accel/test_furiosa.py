from __future__ import annotations

import pytest

from accel.families.furiosa import FuriosaNpu, normalise_arch
from tests.fakes.npu_trees import furiosa_smi_info_json, install_furiosa

FAMILY = FuriosaNpu()


def test_detects_rngd_devices_from_furiosa_smi(fake_host):
    install_furiosa(fake_host, count=4, arch="rngd")
    found = FAMILY.detect(fake_host.probe())
    assert found is not None and found.count == 4
    assert found.resource == "FURIOSA"
    assert found.tokens == ("FURIOSA_RNGD", "Furiosa-RNGD")  # Ray's name, then ours
    assert [d.id for d in found.devices] == ["0", "1", "2", "3"]
    first = found.devices[0]
    assert first.model == "Furiosa RNGD"
    assert first.uuid == "3E93AE7C-E8EA-4C62-BED6-AD2EC0461A00"
    assert first.memory_mib == 48 * 1024
    assert first.details["serial"] == "RNGD000000"
    assert first.details["pci_bus_id"] == "0000:17:00.0"
    assert fake_host.command_calls[0][1:] == ["info", "--format", "json"]


def test_warboy_from_furiosa_smi(fake_host):
    install_furiosa(fake_host, count=2, arch="warboy")
    found = FAMILY.detect(fake_host.probe())
    assert found.tokens == ("FURIOSA_WARBOY", "Furiosa-WARBOY")
    assert found.devices[0].memory_mib == 16 * 1024


@pytest.mark.parametrize(
    ("arch", "canonical"),
    [("rngd-max", "Furiosa-RNGD-Max"), ("rngd+", "Furiosa-RNGD-Plus"), ("RngdS", "Furiosa-RNGD-S")],
)
def test_other_rngd_skus_are_their_own_types(fake_host, arch, canonical):
    fake_host.command("furiosa-smi", furiosa_smi_info_json(1, arch))
    found = FAMILY.detect(fake_host.probe())
    assert found.tokens[-1] == canonical and found.tokens[0].startswith("FURIOSA_")
    assert found.devices[0].memory_mib is None


def test_arch_normalised_like_ray():
    assert normalise_arch("rngd+") == "RNGDPLUS"
    assert normalise_arch("Arch.RngdMax") == "RNGDMAX"
    assert normalise_arch("warboy") == "WARBOY"


def test_without_tool_reads_rngd_device_files_and_sysfs(fake_host):
    install_furiosa(fake_host, count=2, arch="rngd", smi=False)
    found = FAMILY.detect(fake_host.probe())
    assert [d.id for d in found.devices] == ["0", "1"]
    assert found.tokens == ("FURIOSA_RNGD", "Furiosa-RNGD")  # Ray's name, then ours
    first = found.devices[0]
    assert first.uuid == "82540B87-1055-48C6-AAB1-C4CC84672C00"
    assert first.details["device_node"] == "/dev/rngd/npu0"
    assert first.details["pci_bus_id"] == "0000:17:00.0"


def test_without_tool_reads_warboy_device_files_and_sysfs(fake_host):
    install_furiosa(fake_host, count=3, arch="warboy", smi=False)
    found = FAMILY.detect(fake_host.probe())
    assert [d.id for d in found.devices] == ["0", "1", "2"]
    assert found.tokens == ("FURIOSA_WARBOY", "Furiosa-WARBOY")


def test_device_files_of_another_platform_are_ignored(fake_host):
    install_furiosa(fake_host, count=2, smi=False, platform="SomethingElse")
    assert FAMILY.detect(fake_host.probe()) is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("npu:1,npu:3", ["1", "3"]),
        ("1,3", ["1", "3"]),
        ("npu:2:0-3", ["2"]),
        ("npu3pe0-1", ["3"]),
        ("", []),
        ("NoDevFiles", []),
        ("npu:9", []),
        ("rngd*2", ["0", "1", "2", "3"]),  # an architecture count names no device
    ],
)
def test_visible_devices_filter(fake_host, value, expected):
    install_furiosa(fake_host, count=4)
    fake_host.env["FURIOSA_DEVICES"] = value
    found = FAMILY.detect(fake_host.probe())
    assert ([d.id for d in found.devices] if found else []) == expected


def test_worker_env_uses_npu_prefix_and_noset_opt_out():
    assert FAMILY.worker_env(["0", "3"], 4, {}) == {"FURIOSA_DEVICES": "npu:0,npu:3"}
    assert FAMILY.worker_env(["0"], 4, {"RAY_EXPERIMENTAL_NOSET_FURIOSA_DEVICES": "1"}) == {}
    assert FAMILY.worker_env(["0"], 4, {"AUTOSCALE_NOSET_FURIOSA_DEVICES": "1"}) == {}


def test_quantities_are_whole_numbers():
    assert FAMILY.validate_quantity(1) is None
    assert "fractional" in FAMILY.validate_quantity(0.25)


@pytest.mark.parametrize(
    "tool",
    [
        {"stdout": "", "returncode": 1, "stderr": "error: no device found"},
        {"stdout": "+------+--------+\n| Arch | Device |\n"},
        {"stdout": {"devices": []}},
        {"stdout": [{"arch": "rngd", "dev_name": "bogus"}, "junk"]},
        {"hangs": True},
    ],
)
def test_tool_failures_find_nothing(fake_host, tool):
    fake_host.command("furiosa-smi", **tool)
    assert FAMILY.detect(fake_host.probe()) is None


def test_tool_failure_falls_back_to_device_files(fake_host):
    install_furiosa(fake_host, count=2, smi=False)
    fake_host.command("furiosa-smi", returncode=2)
    assert FAMILY.detect(fake_host.probe()).count == 2
    assert len(fake_host.command_calls) == 2  # --format json, then --output json
