"""The helpers families share: value parsing, PCI sysfs reads and vendor tools."""

from __future__ import annotations

import pytest

from accel.families.sysfs import linked_pci_address, numbered_nodes, pci_device_id, read_hex
from accel.families.tools import run_json, run_tool
from accel.families.values import bytes_to_mib, parse_hex, parse_int, pci_address
from tests.fakes.pci import add_pci_device, link_pci_device


@pytest.mark.parametrize(
    ("value", "expected"),
    [(" 42", 42), (7, 7), ("²", None), ("-1", None), (True, None), (None, None), ("0x1", None)],
)
def test_parse_int(value, expected):
    assert parse_int(value) == expected


@pytest.mark.parametrize(
    ("text", "expected"), [("0x10de", 0x10DE), ("10DE", 0x10DE), ("zzz", None), ("", None)]
)
def test_parse_hex(text, expected):
    assert parse_hex(text) == expected


def test_bytes_to_mib():
    assert bytes_to_mib(3 * 2**20 + 5) == 3
    assert bytes_to_mib(0) is None and bytes_to_mib(None) is None and bytes_to_mib(5) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0000:3B:00.0", "0000:3b:00.0"),
        ("e1:00.0", "0000:e1:00.0"),
        ("00000000:0E:00.0", "0000:0e:00.0"),
        ("10000:01:00.1", "10000:01:00.1"),
        ("N/A", None),
        ("../../etc", None),
        (None, None),
    ],
)
def test_pci_address(text, expected):
    assert pci_address(text) == expected


def test_pci_reads(fake_host):
    add_pci_device(fake_host, "0000:01:00.0", "0x1d0f", "0x7164")
    link_pci_device(fake_host, "/sys/class/neuron/neuron0/device", "0000:01:00.0")
    probe = fake_host.probe()
    assert read_hex(probe, "/sys/bus/pci/devices/0000:01:00.0/vendor") == 0x1D0F
    assert pci_device_id(probe, "/sys/bus/pci/devices/0000:01:00.0", 0x1D0F) == 0x7164
    assert pci_device_id(probe, "/sys/bus/pci/devices/0000:01:00.0", 0x10DE) is None
    assert linked_pci_address(probe, "/sys/class/neuron/neuron0/device") == "0000:01:00.0"


def test_numbered_nodes_in_number_order(fake_host):
    for name in ("rbln10", "rbln2", "rbln_ctl", "rbln²", "xrbln1"):
        fake_host.write(f"/dev/{name}")
    assert numbered_nodes(fake_host.probe(), "/dev", "rbln") == [(2, "rbln2"), (10, "rbln10")]


def test_tools_fail_soft(fake_host):
    probe = fake_host.probe()
    assert run_tool(probe, "vendor-smi", ()) is None
    fake_host.command("vendor-smi", "not json")
    assert run_tool(fake_host.probe(), "vendor-smi", ("--json",)) == "not json"
    assert run_json(fake_host.probe(), "vendor-smi", ()) is None
    fake_host.command("vendor-smi", {"devices": []})
    assert run_json(fake_host.probe(), "vendor-smi", ()) == {"devices": []}
    fake_host.command("vendor-smi", "[" * 100_000)
    assert run_json(fake_host.probe(), "vendor-smi", ()) is None
    fake_host.command("vendor-smi", "{}", returncode=1)
    assert run_json(fake_host.probe(), "vendor-smi", ()) is None
