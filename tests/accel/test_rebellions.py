from __future__ import annotations

import pytest

from accel.families.rebellions import RebellionsNpu
from tests.fakes.npu_trees import RBLN_DIE_BYTES, install_rebellions, rbln_smi_json

FAMILY = RebellionsNpu()


def test_detects_every_die_in_kernel_order_with_card_code_type(fake_host):
    install_rebellions(fake_host, count=8, name="RBLN-CA22")
    found = FAMILY.detect(fake_host.probe())
    assert found is not None and found.count == 8
    assert found.resource == "RBLN"
    assert [d.id for d in found.devices] == [str(n) for n in range(8)]
    assert found.tokens == ("RBLN-ATOM", "RBLN-CA22")
    assert found.accelerator_type == "RBLN-CA22"  # what Ray's get_npu_name() reports
    first = found.devices[0]
    assert first.model == "RBLN-CA22"
    assert first.uuid == "3a5d3eec-4b2e-4fa0-afa0-192c9b99a700"
    assert first.memory_mib == RBLN_DIE_BYTES // (1024 * 1024) == 16096
    assert first.details["device_node"] == "/dev/rbln0"
    assert first.details["pci_bus_id"] == "0000:03:00.0"
    assert first.details["serial"] == "0000000022513360"
    assert fake_host.command_calls[0][1:] == ["--json"]


def test_ids_come_from_device_node_not_group_local_npu_field(fake_host):
    install_rebellions(fake_host, count=4)
    found = FAMILY.detect(fake_host.probe())
    # the JSON lists rbln1, rbln3, rbln0, rbln2 with "npu" 0, 1, 0, 1
    assert [d.details["device_node"] for d in found.devices] == [
        "/dev/rbln0",
        "/dev/rbln1",
        "/dev/rbln2",
        "/dev/rbln3",
    ]


def test_rebel_and_atom_max_card_codes(fake_host):
    fake_host.command("rbln-smi", rbln_smi_json(2, "RBLN-CR13", 140 * 1024**3))
    found = FAMILY.detect(fake_host.probe())
    assert found.tokens == ("RBLN-REBEL", "RBLN-CR13")
    assert found.devices[0].memory_mib == 140 * 1024


def test_deprecated_rbln_stat_is_used_when_rbln_smi_is_missing(fake_host):
    install_rebellions(fake_host, count=2, name="RBLN-CA25", tool="rbln-stat")
    found = FAMILY.detect(fake_host.probe())
    assert found.count == 2 and found.accelerator_type == "RBLN-CA25"


def test_mixed_cards_advertise_only_the_chip(fake_host):
    report = rbln_smi_json(2, "RBLN-CA22")
    report["devices"][0]["name"] = "RBLN-CA12"
    fake_host.command("rbln-smi", report)
    found = FAMILY.detect(fake_host.probe())
    assert found.tokens == ("RBLN-ATOM",)
    assert found.warnings


def test_without_tool_counts_device_nodes(fake_host):
    install_rebellions(fake_host, count=3, tool=None)
    found = FAMILY.detect(fake_host.probe())
    assert [d.id for d in found.devices] == ["0", "1", "2"]  # rbln_ctl is not a device
    assert found.accelerator_type is None


@pytest.mark.parametrize(
    ("value", "expected"), [("1,3", ["1", "3"]), ("", []), ("NoDevFiles", []), ("9", [])]
)
def test_visible_devices_filter(fake_host, value, expected):
    install_rebellions(fake_host, count=4)
    fake_host.env["RBLN_DEVICES"] = value
    found = FAMILY.detect(fake_host.probe())
    assert ([d.id for d in found.devices] if found else []) == expected


def test_visible_devices_by_uuid(fake_host):
    install_rebellions(fake_host, count=4)
    fake_host.env["RBLN_DEVICES"] = "3a5d3eec-4b2e-4fa0-afa0-192c9b99a702"
    found = FAMILY.detect(fake_host.probe())
    assert [d.details["device_node"] for d in found.devices] == ["/dev/rbln2"]


def test_worker_env_and_noset_opt_outs():
    assert FAMILY.worker_env(["0", "2"], 4, {}) == {"RBLN_DEVICES": "0,2"}
    assert FAMILY.worker_env(["0"], 4, {"AUTOSCALE_NOSET_RBLN_DEVICES": "1"}) == {}
    assert FAMILY.worker_env(["0"], 4, {"RAY_EXPERIMENTAL_NOSET_RBLN_DEVICES": "1"}) == {}
    # the name Ray's Rebellions manager reads
    ray_env = {"RAY_EXPERIMENTAL_NOSET_RBLN_RT_VISIBLE_DEVICES": "1"}
    assert FAMILY.worker_env(["0"], 4, ray_env) == {}


def test_quantities_are_whole_numbers():
    assert FAMILY.validate_quantity(2) is None
    assert "fractional" in FAMILY.validate_quantity(0.5)
    assert "whole numbers" in FAMILY.validate_quantity(2.5)


@pytest.mark.parametrize(
    "tool",
    [
        {"stdout": "", "returncode": 1, "stderr": "Failed to open device"},
        {"stdout": "not json at all"},
        {"stdout": {"KMD_version": "3.0.0"}},
        {"stdout": {"devices": [{"name": "RBLN-CA22", "device": "bogus"}, "junk"]}},
        {"stdout": [1, 2, 3]},
        {"hangs": True},
    ],
)
def test_tool_failures_find_nothing(fake_host, tool):
    fake_host.command("rbln-smi", **tool)
    assert FAMILY.detect(fake_host.probe()) is None


def test_tool_failure_falls_back_to_device_nodes(fake_host):
    install_rebellions(fake_host, count=2, tool=None)
    fake_host.command("rbln-smi", returncode=1)
    assert FAMILY.detect(fake_host.probe()).count == 2
