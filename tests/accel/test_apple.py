"""Apple silicon GPU detection through a fake ``sysctl``."""

from __future__ import annotations

from accel.families.apple import AppleGpu
from tests.fakes.gpu_trees import install_apple

apple = AppleGpu()


def test_detects_one_m2_max_gpu_with_generic_token(fake_host):
    install_apple(fake_host, chip="Apple M2 Max", memsize=96 * 1024**3)
    found = apple.detect(fake_host.probe())
    assert found is not None and found.count == 1
    assert found.resource == "GPU"
    # Ray's names (ray.util.accelerators: Apple-Silicon, M2, M2-Max) are advertised too.
    assert found.tokens == ("Apple-Silicon", "M2", "Apple-M2", "M2-Max", "Apple-M2-Max")
    assert found.accelerator_type == "Apple-M2-Max"
    device = found.devices[0]
    assert (device.id, device.model) == ("0", "Apple M2 Max")
    assert device.details["unified_memory_mib"] == 96 * 1024
    assert fake_host.command_calls[0][1:] == ["-n", "machdep.cpu.brand_string", "hw.memsize"]


def test_plain_chip(fake_host):
    install_apple(fake_host, chip="Apple M1")
    assert apple.detect(fake_host.probe()).tokens == ("Apple-Silicon", "M1", "Apple-M1")


def test_intel_mac_has_no_apple_gpu(fake_host):
    install_apple(fake_host, chip="Intel(R) Core(TM) i9-9980HK CPU @ 2.40GHz")
    assert apple.detect(fake_host.probe()) is None


def test_linux_runs_no_command(fake_host):
    install_apple(fake_host)
    fake_host.system = "Linux"
    assert apple.detect(fake_host.probe()) is None
    assert fake_host.command_calls == []


def test_sysctl_missing_failing_or_hung(fake_host):
    fake_host.system = "Darwin"
    assert apple.detect(fake_host.probe()) is None
    for kwargs in ({"returncode": 1}, {"hangs": True}, {"stdout": ""}):
        fake_host.command("sysctl", install_dir="/usr/sbin", **kwargs)
        assert apple.detect(fake_host.probe()) is None


def test_no_visible_variable_and_no_worker_env(fake_host):
    install_apple(fake_host)
    fake_host.env["CUDA_VISIBLE_DEVICES"] = ""
    assert apple.detect(fake_host.probe()).count == 1
    assert apple.worker_env(["0"], 1, {}) == {}
    assert apple.noset_env_vars == ()


def test_quantities():
    assert apple.validate_quantity(0.5) is None
    assert apple.validate_quantity(2) is None  # may be meant for another node type
    assert "whole numbers" in apple.validate_quantity(1.5)
