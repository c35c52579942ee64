from __future__ import annotations

import pytest

from accel.families.ascend import HuaweiAscend
from tests.fakes.npu_trees import install_ascend

FAMILY = HuaweiAscend()

# Verbatim `npu-smi info` from a container given cards 0 and 5 of a 910B3 host.
NPU_SMI_TWO_OF_EIGHT = """\
+------------------------------------------------------------------------------------------------+
| npu-smi 25.5.1                   Version: 25.5.1                                               |
+---------------------------+---------------+----------------------------------------------------+
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
+===========================+===============+====================================================+
| 0     910B3               | OK            | 102.8       45                0    / 0             |
| 0                         | 0000:C1:00.0  | 0           0    / 0          3445 / 65536         |
+===========================+===============+====================================================+
| 5     910B3               | OK            | 100.8       44                0    / 0             |
| 0                         | 0000:02:00.0  | 12          0    / 0          60156/ 65536         |
+===========================+===============+====================================================+
+---------------------------+---------------+----------------------------------------------------+
| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |
+===========================+===============+====================================================+
| 5       0                 | 2290156       | VLLMEngineCore           | 56630                   |
+===========================+===============+====================================================+
"""


def test_detects_every_chip_with_type_tokens_and_hbm(fake_host):
    install_ascend(fake_host, count=8, chip="910B3")
    found = FAMILY.detect(fake_host.probe())
    assert found is not None and found.count == 8
    assert found.resource == "NPU"
    assert found.tokens == ("Ascend910B", "Ascend910B3")
    assert found.accelerator_type == "Ascend910B3"
    assert [d.id for d in found.devices] == [str(n) for n in range(8)]
    first = found.devices[0]
    assert first.model == "Ascend910B3"
    assert first.memory_mib == 65536
    assert first.details["pci_bus_id"] == "0000:c1:00.0"
    assert first.details["health"] == "OK"
    assert fake_host.command_calls[0][1:] == ["info"]


def test_910b4_is_a_variant_of_910b_with_32g(fake_host):
    install_ascend(fake_host, count=2, chip="910B4")
    found = FAMILY.detect(fake_host.probe())
    assert found.tokens == ("Ascend910B", "Ascend910B4")
    assert {d.memory_mib for d in found.devices} == {32768}


def test_device_ids_are_chip_logic_ids_not_card_numbers(fake_host):
    fake_host.command("npu-smi", NPU_SMI_TWO_OF_EIGHT, install_dir="/usr/local/sbin")
    found = FAMILY.detect(fake_host.probe())
    assert [d.id for d in found.devices] == ["0", "1"]
    assert [d.details["npu_id"] for d in found.devices] == [0, 5]
    assert [d.details["pci_bus_id"] for d in found.devices] == ["0000:c1:00.0", "0000:02:00.0"]


def test_two_die_910c_card_gives_two_devices(fake_host):
    install_ascend(fake_host, count=2, chip="910C")
    found = FAMILY.detect(fake_host.probe())
    assert [d.id for d in found.devices] == ["0", "1", "2", "3"]
    assert [(d.details["npu_id"], d.details["chip_id"]) for d in found.devices] == [
        (0, 0),
        (0, 1),
        (1, 0),
        (1, 1),
    ]
    assert found.tokens == ("Ascend910C",)


def test_310p3_duo_reads_device_column_and_memory(fake_host):
    install_ascend(fake_host, count=2, chip="310P3")
    found = FAMILY.detect(fake_host.probe())
    assert [d.id for d in found.devices] == ["0", "1", "2", "3"]
    # The SoC name, as Ray's Ascend detection advertises it, and its generic chip.
    assert found.tokens == ("Ascend310P", "Ascend310P3")
    assert {d.memory_mib for d in found.devices} == {44280}


def test_without_npu_smi_counts_davinci_nodes_only(fake_host):
    install_ascend(fake_host, count=4, npu_smi=False)
    found = FAMILY.detect(fake_host.probe())
    assert found.count == 4  # davinci_manager, devmm_svm and hisi_hdc are not chips
    assert [d.details["device_node"] for d in found.devices] == [
        "/dev/davinci0",
        "/dev/davinci1",
        "/dev/davinci2",
        "/dev/davinci3",
    ]
    assert found.accelerator_type is None and found.tokens == ()


def test_more_than_ten_device_nodes_in_natural_order(fake_host):
    for n in range(16):
        fake_host.write(f"/dev/davinci{n}")
    found = FAMILY.detect(fake_host.probe())
    assert [d.details["device_node"][-2:] for d in found.devices][-6:] == [
        "10",
        "11",
        "12",
        "13",
        "14",
        "15",
    ]


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1,3", ["1", "3"]), ("", []), ("NoDevFiles", []), ("7", ["7"])],
)
def test_visible_devices_filter(fake_host, value, expected):
    install_ascend(fake_host, count=8)
    fake_host.env["ASCEND_RT_VISIBLE_DEVICES"] = value
    found = FAMILY.detect(fake_host.probe())
    ids = [d.id for d in found.devices] if found else []
    assert ids == expected
    if found:
        assert [d.index for d in found.devices] == list(range(len(expected)))


def test_worker_env_and_noset_opt_out():
    assert FAMILY.worker_env(["0", "3"], 8, {}) == {"ASCEND_RT_VISIBLE_DEVICES": "0,3"}
    opt_out = {"RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES": "1"}
    assert FAMILY.worker_env(["0"], 8, opt_out) == {}
    assert FAMILY.worker_env(["0"], 8, {"AUTOSCALE_NOSET_ASCEND_RT_VISIBLE_DEVICES": "1"}) == {}


def test_fractions_allowed_but_not_above_one():
    assert FAMILY.validate_quantity(0.5) is None
    assert FAMILY.validate_quantity(4) is None
    assert "whole numbers" in FAMILY.validate_quantity(1.5)
    assert "negative" in FAMILY.validate_quantity(-1)


@pytest.mark.parametrize(
    "tool",
    [
        {"stdout": "", "returncode": 1, "stderr": "dcmi model initialized failed"},
        {"stdout": "dcmi model initialized failed\n"},
        {"stdout": "| garbage | without | rows |\n| not-a-number x | y | z |\n"},
        {"hangs": True},
    ],
)
def test_tool_failures_find_nothing_without_device_nodes(fake_host, tool):
    fake_host.command("npu-smi", install_dir="/usr/local/sbin", **tool)
    assert FAMILY.detect(fake_host.probe()) is None


def test_tool_failure_falls_back_to_device_nodes(fake_host):
    install_ascend(fake_host, count=2, npu_smi=False)
    fake_host.command("npu-smi", returncode=1, install_dir="/usr/local/sbin")
    assert FAMILY.detect(fake_host.probe()).count == 2


def test_empty_host_finds_nothing(fake_host):
    assert FAMILY.detect(fake_host.probe()) is None
