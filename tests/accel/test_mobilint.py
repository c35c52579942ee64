from __future__ import annotations

import pytest

from accel.families.mobilint import MobilintNpu
from tests.fakes.npu_trees import install_mobilint

FAMILY = MobilintNpu()


def test_detects_aries_cards_from_device_nodes(fake_host):
    install_mobilint(fake_host, count=4, family="aries")
    found = FAMILY.detect(fake_host.probe())
    assert found is not None and found.count == 4
    assert found.resource == "MBLT"
    assert found.tokens == ("MOBILINT_ARIES", "Mobilint-ARIES")  # Ray's name, then ours
    assert [d.id for d in found.devices] == ["0", "1", "2", "3"]
    assert found.devices[0].model == "Mobilint ARIES"
    assert found.devices[3].details["device_node"] == "/dev/aries3"


def test_regulus_auxiliary_nodes_are_not_npus(fake_host):
    install_mobilint(fake_host, count=1, family="regulus")
    found = FAMILY.detect(fake_host.probe())
    assert found.count == 1
    assert found.tokens == ("MOBILINT_REGULUS", "Mobilint-REGULUS")
    assert found.devices[0].details["device_node"] == "/dev/regulus-npu0"


def test_ten_or_more_cards_in_numeric_order(fake_host):
    install_mobilint(fake_host, count=12)
    found = FAMILY.detect(fake_host.probe())
    assert [d.id for d in found.devices] == [str(n) for n in range(12)]


def test_unrelated_device_nodes_are_ignored(fake_host):
    for name in ("aries", "ariesX", "regulus", "regulus-usb", "nvidia0"):
        fake_host.write(f"/dev/{name}")
    assert FAMILY.detect(fake_host.probe()) is None


@pytest.mark.parametrize(
    ("value", "expected"), [("1,3", ["1", "3"]), ("", []), ("NoDevFiles", []), ("5", [])]
)
def test_visible_devices_filter(fake_host, value, expected):
    install_mobilint(fake_host, count=4)
    fake_host.env["QBRUNTIME_VISIBLE_DEVICES"] = value
    found = FAMILY.detect(fake_host.probe())
    assert ([d.id for d in found.devices] if found else []) == expected


def test_worker_env_and_noset_opt_outs():
    assert FAMILY.worker_env(["0", "1"], 4, {}) == {"QBRUNTIME_VISIBLE_DEVICES": "0,1"}
    assert FAMILY.worker_env(["0"], 4, {"AUTOSCALE_NOSET_QBRUNTIME_VISIBLE_DEVICES": "1"}) == {}
    # the name Ray's Mobilint manager reads
    ray_env = {"RAY_EXPERIMENTAL_NOSET_MBLT_RT_VISIBLE_DEVICES": "1"}
    assert FAMILY.worker_env(["0"], 4, ray_env) == {}


def test_quantities_are_whole_numbers():
    assert FAMILY.validate_quantity(3) is None
    assert "fractional" in FAMILY.validate_quantity(0.5)
    assert "negative" in FAMILY.validate_quantity(-2)


def test_empty_host_finds_nothing(fake_host):
    assert FAMILY.detect(fake_host.probe()) is None
