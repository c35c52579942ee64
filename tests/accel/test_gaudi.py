"""Intel Gaudi detection (hl-smi, sysfs fallback), visible modules and worker variables."""

from __future__ import annotations

import pytest

from accel.families.gaudi import IntelGaudi
from accel.families.tpu import GoogleTpu
from tests.fakes.gaudi import hl_smi_csv, install_gaudi
from tests.fakes.pci import add_pci_device, link_pci_device

GAUDI = IntelGaudi()


# Detection with hl-smi ----------------------------------------------------------------------
def test_hls_gaudi2_reports_eight_cards_by_module_id(fake_host):
    install_gaudi(fake_host, count=8, generation="gaudi2")

    found = GAUDI.detect(fake_host.probe())

    assert found.count == 8
    assert [d.id for d in found.devices] == [str(m) for m in range(8)]
    assert found.accelerator_type == "Intel-GAUDI2"
    assert found.tokens == ("Intel-GAUDI", "Intel-GAUDI2")
    card = found.devices[0]  # module 0 sits third on the bus
    assert card.model == "HL-225"
    assert card.memory_mib == 98304
    assert card.uuid == "01P0-HL2080A0-15-TNZ0Y2-03-07-02"
    assert card.details == {
        "pci_bus_id": "0000:43:00.0",
        "serial": "AN45003522",
        "hl_smi_index": "2",
    }


def test_hl_smi_is_asked_for_module_ids_as_csv(fake_host):
    install_gaudi(fake_host, count=1)

    GAUDI.detect(fake_host.probe())

    argv = fake_host.command_calls[0]
    assert argv[1:] == [
        "-Q",
        "index,module_id,bus_id,name,memory.total,uuid,serial",
        "-f",
        "csv,noheader",
    ]


@pytest.mark.parametrize(
    ("generation", "expected"),
    [("gaudi1", "Intel-GAUDI1"), ("gaudi2", "Intel-GAUDI2"), ("gaudi3", "Intel-GAUDI3")],
)
def test_generation_from_the_pci_device_id(fake_host, generation, expected):
    install_gaudi(fake_host, count=4, generation=generation)

    assert GAUDI.detect(fake_host.probe()).accelerator_type == expected


@pytest.mark.parametrize(
    ("generation", "expected"),
    [("gaudi1", "Intel-GAUDI1"), ("gaudi2", "Intel-GAUDI2"), ("gaudi3", "Intel-GAUDI3")],
)
def test_generation_from_the_product_name_without_sysfs(fake_host, generation, expected):
    install_gaudi(fake_host, count=2, generation=generation, sysfs=False)

    assert GAUDI.detect(fake_host.probe()).accelerator_type == expected


def test_ray_type_of_gaudi1_is_still_advertised(fake_host):
    # Ray names a first-generation card "Intel-GAUDI"; we advertise it as the generic token.
    install_gaudi(fake_host, count=2, generation="gaudi1")

    assert GAUDI.detect(fake_host.probe()).tokens == ("Intel-GAUDI", "Intel-GAUDI1")


def test_not_available_fields_are_left_out(fake_host):
    fake_host.command("hl-smi", "0, 0, 0000:19:00.0, HL-225, N/A, N/A, N/A\n")

    card = GAUDI.detect(fake_host.probe()).devices[0]

    assert card.uuid is None
    assert card.memory_mib is None
    assert "serial" not in card.details


# Fail soft ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("stdout", "returncode"),
    [
        ("0, 0, 0000:19:00.0, HL-225, 98304 MiB, x, y\n", 1),
        ("", 0),
        ("habanalabs driver is not loaded\n", 0),
        ("index, module_id\nfoo, bar, baz, qux, 1, 2, 3\n", 0),
    ],
)
def test_failing_or_garbage_hl_smi_means_no_cards(fake_host, stdout, returncode):
    fake_host.command("hl-smi", stdout, returncode=returncode)

    assert GAUDI.detect(fake_host.probe()) is None


def test_hung_hl_smi_means_no_cards(fake_host):
    fake_host.command("hl-smi", hangs=True)

    assert GAUDI.detect(fake_host.probe()) is None


def test_nothing_installed_means_no_cards(fake_host):
    assert GAUDI.detect(fake_host.probe()) is None


# Detection from sysfs -----------------------------------------------------------------------
def test_sysfs_fallback_without_hl_smi(fake_host):
    install_gaudi(fake_host, count=8, generation="gaudi3", hl_smi=False)

    found = GAUDI.detect(fake_host.probe())

    assert found.count == 8
    assert [d.id for d in found.devices] == [str(m) for m in range(8)]
    assert found.accelerator_type == "Intel-GAUDI3"
    card = found.devices[0]
    assert card.model == "GAUDI3"
    assert card.memory_mib is None
    assert card.details == {
        "pci_bus_id": "0000:43:00.0",
        "serial": "AN45003522",
        "device_node": "/dev/accel/accel2",
    }


def test_sysfs_skips_other_accel_devices(fake_host):
    # An Intel NPU (vendor 0x8086) and a Goya inference card (0x1da3:0x0001) are not HPUs.
    add_pci_device(fake_host, "0000:00:0b.0", "0x8086", "0x7d1d")
    link_pci_device(fake_host, "/sys/class/accel/accel0/device", "0000:00:0b.0")
    add_pci_device(fake_host, "0000:3b:00.0", "0x1da3", "0x0001")
    link_pci_device(fake_host, "/sys/class/accel/accel1/device", "0000:3b:00.0")

    assert GAUDI.detect(fake_host.probe()) is None


def test_a_gaudi_host_is_not_a_tpu_host(fake_host):
    install_gaudi(fake_host, count=8)

    assert GoogleTpu().detect(fake_host.probe()) is None
    assert fake_host.metadata_calls == []


# Visible modules and worker variables -------------------------------------------------------
def test_visible_modules_filter(fake_host):
    install_gaudi(fake_host, count=8)
    fake_host.env["HABANA_VISIBLE_MODULES"] = "1,3"

    found = GAUDI.detect(fake_host.probe())

    assert [d.id for d in found.devices] == ["1", "3"]
    assert [d.details["pci_bus_id"] for d in found.devices] == ["0000:44:00.0", "0000:1a:00.0"]


@pytest.mark.parametrize("value", ["", "NoDevFiles"])
def test_empty_visible_modules_means_none(fake_host, value):
    install_gaudi(fake_host, count=8)
    fake_host.env["HABANA_VISIBLE_MODULES"] = value

    assert GAUDI.detect(fake_host.probe()) is None


def test_worker_env_lists_module_ids():
    assert GAUDI.worker_env(["4", "5"], node_device_count=8, env={}) == {
        "HABANA_VISIBLE_MODULES": "4,5"
    }


@pytest.mark.parametrize(
    "var",
    ["AUTOSCALE_NOSET_HABANA_VISIBLE_MODULES", "RAY_EXPERIMENTAL_NOSET_HABANA_VISIBLE_MODULES"],
)
def test_noset_opt_out(var):
    assert GAUDI.worker_env(["0"], node_device_count=8, env={var: "1"}) == {}


# Request quantities -----------------------------------------------------------------------
def test_whole_cards_only():
    assert GAUDI.validate_quantity(4) is None
    assert "whole number" in GAUDI.validate_quantity(0.5)
    assert "whole numbers" in GAUDI.validate_quantity(2.5)


def test_hl_smi_row_with_a_non_ascii_module_id_is_skipped(fake_host):
    rows = hl_smi_csv(2).splitlines()
    rows[1] = rows[1].replace(", 3, ", ", ², ", 1)
    fake_host.command("hl-smi", "\n".join(rows) + "\n")

    assert [d.id for d in GAUDI.detect(fake_host.probe()).devices] == ["2"]
