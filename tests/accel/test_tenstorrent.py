from __future__ import annotations

import pytest

from accel.families.tenstorrent import TenstorrentNpu
from tests.fakes.npu_trees import install_tenstorrent
from tests.fakes.pci import add_pci_device, link_pci_device

FAMILY = TenstorrentNpu()


def test_detects_wormhole_boards_from_sysfs(fake_host):
    install_tenstorrent(fake_host, count=4, card="n300")
    found = FAMILY.detect(fake_host.probe())
    assert found is not None and found.count == 4
    assert found.resource == "TTNPU"
    assert found.tokens == ("Tenstorrent-Wormhole",)
    assert [d.id for d in found.devices] == ["0", "1", "2", "3"]
    first = found.devices[0]
    assert first.model == "Tenstorrent Wormhole n300"
    assert first.uuid == "1000186119020000"
    assert first.memory_mib == 24 * 1024
    assert first.details["pci_bus_id"] == "0000:01:00.0"
    assert first.details["pci_device_id"] == "0x401e"
    assert first.details["board_type"] == "n300"
    assert fake_host.command_calls == []  # tt-smi is never run: it would open the chips


def test_blackhole_from_pci_device_id(fake_host):
    install_tenstorrent(fake_host, count=2, card="p150a")
    found = FAMILY.detect(fake_host.probe())
    assert found.tokens == ("Tenstorrent-Blackhole",)
    assert found.devices[0].memory_mib == 32 * 1024


def test_card_type_names_the_arch_when_pci_ids_are_missing(fake_host):
    fake_host.write("/dev/tenstorrent/0")
    fake_host.write("/sys/class/tenstorrent/tenstorrent!0/tt_card_type", "n150")
    found = FAMILY.detect(fake_host.probe())
    assert found.tokens == ("Tenstorrent-Wormhole",)
    assert found.devices[0].memory_mib == 12 * 1024


def test_grayskull_has_no_card_type_but_a_pci_id(fake_host):
    fake_host.write("/dev/tenstorrent/0")
    add_pci_device(fake_host, "0000:03:00.0", "0x1e52", "0xfaca")
    link_pci_device(fake_host, "/sys/class/tenstorrent/tenstorrent!0/device", "0000:03:00.0")
    found = FAMILY.detect(fake_host.probe())
    assert found.tokens == ("Tenstorrent-Grayskull",)
    assert found.devices[0].details["pci_bus_id"] == "0000:03:00.0"


def test_device_files_without_sysfs_are_untyped(fake_host):
    install_tenstorrent(fake_host, count=2, sysfs=False)
    found = FAMILY.detect(fake_host.probe())
    assert found.count == 2
    assert found.accelerator_type is None and found.tokens == ()


def test_sysfs_without_device_files_finds_nothing(fake_host):
    install_tenstorrent(fake_host, count=2)
    for n in range(2):
        (fake_host.root / f"dev/tenstorrent/{n}").unlink()
    assert FAMILY.detect(fake_host.probe()) is None


def test_garbage_sysfs_values_fail_soft(fake_host):
    install_tenstorrent(fake_host, count=1)
    fake_host.write("/sys/bus/pci/devices/0000:01:00.0/device", "not-hex")
    fake_host.write("/sys/class/tenstorrent/tenstorrent!0/tt_card_type", "unknown")
    found = FAMILY.detect(fake_host.probe())
    assert found.count == 1 and found.accelerator_type is None


@pytest.mark.parametrize(
    ("value", "expected"), [("1,3", ["1", "3"]), ("", []), ("NoDevFiles", []), ("8", [])]
)
def test_visible_devices_filter(fake_host, value, expected):
    install_tenstorrent(fake_host, count=4)
    fake_host.env["TT_VISIBLE_DEVICES"] = value
    found = FAMILY.detect(fake_host.probe())
    assert ([d.id for d in found.devices] if found else []) == expected


def test_worker_env_and_noset_opt_outs():
    assert FAMILY.worker_env(["2", "3"], 4, {}) == {"TT_VISIBLE_DEVICES": "2,3"}
    assert FAMILY.worker_env(["0"], 4, {"AUTOSCALE_NOSET_TT_VISIBLE_DEVICES": "1"}) == {}
    # the name Ray's Tenstorrent manager reads
    ray_env = {"RAY_EXPERIMENTAL_NOSET_TENSTORRENT_VISIBLE_DEVICES": "1"}
    assert FAMILY.worker_env(["0"], 4, ray_env) == {}


def test_quantities_are_whole_numbers():
    assert FAMILY.validate_quantity(1) is None
    assert "fractional" in FAMILY.validate_quantity(0.5)


def test_empty_host_finds_nothing(fake_host):
    assert FAMILY.detect(fake_host.probe()) is None


def test_odd_names_in_the_device_directory_are_skipped(fake_host):
    # "²" passes str.isdigit() but not int(); it used to make detection raise.
    install_tenstorrent(fake_host, count=2)
    for name in ("²", "3a", "ctl"):
        fake_host.write(f"/dev/tenstorrent/{name}")
    assert [d.id for d in FAMILY.detect(fake_host.probe()).devices] == ["0", "1"]


def test_device_link_loop_leaves_the_bus_id_out(fake_host):
    fake_host.write("/dev/tenstorrent/0")
    fake_host.write("/sys/class/tenstorrent/tenstorrent!0/tt_card_type", "n150")
    fake_host.symlink("/sys/class/tenstorrent/tenstorrent!0/device", "device")
    device = FAMILY.detect(fake_host.probe()).devices[0]
    assert "pci_bus_id" not in device.details
    assert device.accelerator_type == "Tenstorrent-Wormhole"
