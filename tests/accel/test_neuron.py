"""AWS Neuron detection (NeuronCores from neuron-ls), visible cores and worker variables."""

from __future__ import annotations

import pytest

from accel.families.neuron import AwsNeuron
from tests.fakes.neuron import install_neuron, neuron_ls_json

NEURON = AwsNeuron()


# Detection --------------------------------------------------------------------------------
def test_trn1_32xlarge_reports_every_neuroncore(fake_host):
    install_neuron(fake_host, "trn1.32xlarge")

    found = NEURON.detect(fake_host.probe())

    assert found.count == 32
    assert [d.id for d in found.devices] == [str(i) for i in range(32)]
    assert found.accelerator_type == "Trainium"
    assert found.tokens == ("aws-neuron-core", "Trainium")
    core = found.devices[5]
    assert core.details["neuron_device"] == 2
    assert core.details["core_in_device"] == 1
    assert core.details["cores_per_device"] == 2
    assert core.details["pci_bus_id"] == "0000:12:1e.0"
    assert core.details["device_memory_mib"] == 32 * 1024
    assert core.memory_mib == 16 * 1024
    assert core.details["instance_type"] == "trn1.32xlarge"
    assert core.model == "AWS Trainium NeuronCore"


@pytest.mark.parametrize(
    ("instance_type", "cores", "expected"),
    [
        ("inf1.6xlarge", 16, "Inferentia"),
        ("inf2.48xlarge", 24, "Inferentia2"),
        ("trn1.2xlarge", 2, "Trainium"),
        ("trn1n.32xlarge", 32, "Trainium"),
        ("trn2.48xlarge", 64, "Trainium2"),
    ],
)
def test_generation_and_core_count_per_instance(fake_host, instance_type, cores, expected):
    install_neuron(fake_host, instance_type)

    found = NEURON.detect(fake_host.probe())

    assert found.count == cores
    assert found.accelerator_type == expected


def test_trn2_counts_logical_cores(fake_host):
    install_neuron(fake_host, "trn2.3xlarge")

    found = NEURON.detect(fake_host.probe())

    assert found.count == 4
    assert found.devices[0].details["logical_neuroncore_config"] == 2
    assert found.devices[0].memory_mib == 24 * 1024


def test_instance_type_from_neuron_ls_without_pci(fake_host):
    install_neuron(fake_host, "inf2.24xlarge", pci=False, dmi=False)

    found = NEURON.detect(fake_host.probe())

    assert found.count == 12
    assert found.accelerator_type == "Inferentia2"


def test_older_neuron_ls_numbers_cores_and_reads_dmi(fake_host):
    # Older tools print neither neuroncore_ids nor instance_type, and a short bdf.
    install_neuron(fake_host, "trn1.32xlarge", modern=False, pci=False)

    found = NEURON.detect(fake_host.probe())

    assert [d.id for d in found.devices] == [str(i) for i in range(32)]
    assert found.accelerator_type == "Trainium"
    assert found.devices[31].details["neuron_device"] == 15
    assert found.devices[0].details["pci_bus_id"] == "0000:10:1e.0"


def test_pci_id_names_the_generation_when_nothing_else_does(fake_host):
    install_neuron(fake_host, "trn2.48xlarge", modern=False, dmi=False)

    assert NEURON.detect(fake_host.probe()).accelerator_type == "Trainium2"


def test_unknown_generation_is_a_generic_neuron_core(fake_host):
    install_neuron(fake_host, "trn1.2xlarge", modern=False, pci=False, dmi=False)

    found = NEURON.detect(fake_host.probe())

    assert found.count == 2
    assert found.accelerator_type == "aws-neuron-core"
    assert found.tokens == ("aws-neuron-core",)


def test_neuron_ls_on_path_is_used_when_not_in_the_sdk_dir(fake_host):
    install_neuron(fake_host, "inf2.xlarge", install_dir="/usr/local/bin")

    found = NEURON.detect(fake_host.probe())

    assert found.count == 2
    assert fake_host.command_calls[0][1:] == ["--json-output"]


def test_single_device_has_no_connected_devices(fake_host):
    install_neuron(fake_host, "trn1.2xlarge")

    core = NEURON.detect(fake_host.probe()).devices[0]

    assert "connected_devices" not in core.details


def test_connected_devices_are_reported(fake_host):
    install_neuron(fake_host, "trn1.32xlarge")

    core = NEURON.detect(fake_host.probe()).devices[0]

    assert core.details["connected_devices"] == [12, 1, 4, 3]


# Fail soft ----------------------------------------------------------------------------------
def test_no_neuron_ls_means_no_cores(fake_host):
    fake_host.write("/sys/devices/virtual/dmi/id/product_name", "trn1.32xlarge")

    assert NEURON.detect(fake_host.probe()) is None
    assert fake_host.command_calls == []


@pytest.mark.parametrize(
    ("stdout", "returncode"),
    [
        (neuron_ls_json("trn1.2xlarge"), 1),
        ("", 0),
        ("neuron-ls: no neuron devices found\n", 0),
        ({"neuron_device": 0, "nc_count": 2}, 0),
        ([{"nc_count": 2}, "junk", 7], 0),
    ],
)
def test_failing_or_garbage_neuron_ls_means_no_cores(fake_host, stdout, returncode):
    fake_host.command("neuron-ls", stdout, returncode=returncode, install_dir="/opt/aws/neuron/bin")

    assert NEURON.detect(fake_host.probe()) is None


def test_hung_neuron_ls_means_no_cores(fake_host):
    fake_host.command("neuron-ls", hangs=True, install_dir="/opt/aws/neuron/bin")

    assert NEURON.detect(fake_host.probe()) is None


def test_bogus_core_ids_fall_back_to_consecutive_numbers(fake_host):
    payload = neuron_ls_json("inf2.24xlarge")
    payload[1]["neuroncore_ids"] = ["a", "b"]
    fake_host.command("neuron-ls", payload, install_dir="/opt/aws/neuron/bin")

    found = NEURON.detect(fake_host.probe())

    assert [d.id for d in found.devices][:4] == ["0", "1", "2", "3"]


# Visible cores and worker variables ---------------------------------------------------------
def test_visible_cores_range_and_list(fake_host):
    install_neuron(fake_host, "trn1.32xlarge")
    fake_host.env["NEURON_RT_VISIBLE_CORES"] = "4-7,12"

    found = NEURON.detect(fake_host.probe())

    assert [d.id for d in found.devices] == ["4", "5", "6", "7", "12"]
    assert found.devices[4].details["neuron_device"] == 6


def test_visible_cores_plain_list(fake_host):
    install_neuron(fake_host, "trn1.32xlarge")
    fake_host.env["NEURON_RT_VISIBLE_CORES"] = "1,3"

    assert [d.id for d in NEURON.detect(fake_host.probe()).devices] == ["1", "3"]


@pytest.mark.parametrize("value", ["", "NoDevFiles"])
def test_empty_visible_cores_means_none(fake_host, value):
    install_neuron(fake_host, "trn1.32xlarge")
    fake_host.env["NEURON_RT_VISIBLE_CORES"] = value

    assert NEURON.detect(fake_host.probe()) is None


@pytest.mark.parametrize(
    ("ids", "value"),
    [
        (["4", "5", "6", "7"], "4-7"),
        (["3"], "3"),
        (["0", "2", "5"], "0,2,5"),
        (["7", "6"], "7,6"),
        ([], ""),
    ],
)
def test_worker_env_uses_a_range_for_consecutive_cores(ids, value):
    assert NEURON.worker_env(ids, node_device_count=32, env={}) == {
        "NEURON_RT_VISIBLE_CORES": value
    }


@pytest.mark.parametrize(
    "var",
    ["AUTOSCALE_NOSET_NEURON_RT_VISIBLE_CORES", "RAY_EXPERIMENTAL_NOSET_NEURON_RT_VISIBLE_CORES"],
)
def test_noset_opt_out(var):
    assert NEURON.worker_env(["0"], node_device_count=2, env={var: "1"}) == {}


# Request quantities -----------------------------------------------------------------------
def test_whole_cores_only():
    assert NEURON.validate_quantity(2) is None
    assert "whole number" in NEURON.validate_quantity(0.5)
    assert "whole numbers" in NEURON.validate_quantity(1.5)


def test_non_ascii_digit_range_matches_no_core(fake_host):
    install_neuron(fake_host, "trn1.32xlarge")
    fake_host.env["NEURON_RT_VISIBLE_CORES"] = "²-3"

    assert NEURON.detect(fake_host.probe()) is None
