"""HostProbe failing soft and keeping to its own root and environment."""

from __future__ import annotations

import os

from accel.probe import HostProbe, natural_key


def test_natural_key_orders_numbers_and_takes_any_name():
    names = ["accel10", "accel2", "²", "accel1"]
    assert sorted(names, key=natural_key) == ["accel1", "accel2", "accel10", "²"]


def test_listdir_survives_a_name_int_cannot_read(fake_host):
    for name in ("davinci1", "²", "davinci0"):
        fake_host.write(f"/dev/{name}")
    assert fake_host.probe().listdir("/dev") == ["davinci0", "davinci1", "²"]


def test_which_never_searches_this_process_path(tmp_path, monkeypatch):
    tool = tmp_path / "bin" / "vendor-smi"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tool.parent))
    assert HostProbe(root=tmp_path, env={}).which("vendor-smi") is None
    assert HostProbe(root=tmp_path, env={"PATH": str(tool.parent)}).which("vendor-smi")


def test_link_target_name_fails_soft(fake_host):
    fake_host.symlink("/sys/loop/a", "b")
    fake_host.symlink("/sys/loop/b", "a")
    fake_host.write("/sys/devices/pci0000:00/0000:01:00.0/vendor", "0x1e52")
    fake_host.symlink("/sys/class/x/device", "../../devices/pci0000:00/0000:01:00.0")
    probe = fake_host.probe()
    assert probe.link_target_name("/sys/loop/a") is None
    assert probe.link_target_name("/sys/missing") is None
    assert probe.link_target_name("/sys/class/x/device") == "0000:01:00.0"
    assert not probe.is_dir("/sys/loop/a") and not probe.exists("/sys/loop/a")
    assert os.path.islink(fake_host.root / "sys/loop/a")
