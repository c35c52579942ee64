"""AMD GPU detection from a fake KFD topology."""

from __future__ import annotations

import pytest

from accel.families.amd import AmdGpu
from tests.fakes.gpu_trees import amd_uuid_int, install_amd

amd = AmdGpu()


def test_detects_every_mi300x_with_type_uuid_memory_and_bus(fake_host):
    install_amd(fake_host, count=8, model="MI300X")
    found = amd.detect(fake_host.probe())
    assert found is not None and found.count == 8
    assert found.resource == "GPU"
    assert found.tokens == ("AMD-Instinct-MI300X", "AMD-Instinct-MI300X-OAM")
    assert found.accelerator_type == "AMD-Instinct-MI300X-OAM"
    assert [d.id for d in found.devices] == [str(i) for i in range(8)]
    first = found.devices[0]
    assert first.uuid == f"GPU-{amd_uuid_int(0):016x}"
    assert first.model == "AMD Instinct MI300X OAM"
    assert first.memory_mib == 192 * 1024
    assert first.details["pci_bus_id"] == "0000:0c:00.0"
    assert first.details["gfx_target"] == "gfx942"
    assert first.details["compute_units"] == 304
    assert first.details["kfd_node"] == 2  # CPU nodes 0 and 1 are skipped
    assert found.devices[7].details["pci_bus_id"] == "0000:7c:00.0"


def test_device_id_table_names_cards_without_product_name(fake_host):
    install_amd(fake_host, count=2, model="MI250X", cpu_nodes=1)
    found = amd.detect(fake_host.probe())
    assert found.accelerator_type == "AMD-Instinct-MI250X-MI250"
    assert found.devices[0].model == "AMD-Instinct-MI250X-MI250"
    assert found.devices[0].details["gfx_target"] == "gfx90a"


def test_aws_g4ad_radeon_pro_v520(fake_host):
    install_amd(fake_host, count=1, model="V520", cpu_nodes=1)
    found = amd.detect(fake_host.probe())
    assert found.count == 1
    assert found.tokens == ("AMD-Radeon-Pro-V520",)
    assert found.devices[0].memory_mib == 8192


def test_hip_visible_devices_filters_by_index_and_uuid(fake_host):
    install_amd(fake_host, count=4)
    fake_host.env["HIP_VISIBLE_DEVICES"] = "1,3"
    assert [d.id for d in amd.detect(fake_host.probe()).devices] == ["1", "3"]
    uuid = f"GPU-{amd_uuid_int(2):016x}"
    fake_host.env["HIP_VISIBLE_DEVICES"] = uuid
    found = amd.detect(fake_host.probe())
    assert [d.id for d in found.devices] == [uuid]
    assert found.devices[0].details["kfd_node"] == 4


def test_empty_and_nodevfiles_mean_no_gpus(fake_host):
    install_amd(fake_host, count=2)
    for value in ("", "NoDevFiles"):
        fake_host.env["HIP_VISIBLE_DEVICES"] = value
        assert amd.detect(fake_host.probe()) is None


def test_cuda_visible_devices_is_honoured_when_hip_is_unset(fake_host):
    install_amd(fake_host, count=4)
    fake_host.env["CUDA_VISIBLE_DEVICES"] = "2"
    assert [d.id for d in amd.detect(fake_host.probe()).devices] == ["2"]


def test_rocr_filters_first_and_hip_indexes_what_is_left(fake_host):
    install_amd(fake_host, count=8)
    fake_host.env["ROCR_VISIBLE_DEVICES"] = "4,5,6,7"
    found = amd.detect(fake_host.probe())
    assert [d.id for d in found.devices] == ["0", "1", "2", "3"]
    assert [d.details["kfd_node"] for d in found.devices] == [6, 7, 8, 9]
    fake_host.env["HIP_VISIBLE_DEVICES"] = "1"
    found = amd.detect(fake_host.probe())
    assert [(d.id, d.details["kfd_node"]) for d in found.devices] == [("1", 7)]


def test_seed_rocr_example_sees_devices_1_and_3(fake_host):
    """``ROCR_VISIBLE_DEVICES=1,3 ray start --num-gpus=2`` lets Ray see devices 1 and 3."""
    install_amd(fake_host, count=4)
    all_nodes = [d.details["kfd_node"] for d in amd.detect(fake_host.probe()).devices]
    fake_host.env["ROCR_VISIBLE_DEVICES"] = "1,3"
    found = amd.detect(fake_host.probe())
    assert [d.details["kfd_node"] for d in found.devices] == [all_nodes[1], all_nodes[3]]
    assert amd.worker_env(["1"], found.count, fake_host.env) == {"HIP_VISIBLE_DEVICES": "1"}


def test_rocr_accepts_uuids(fake_host):
    install_amd(fake_host, count=4)
    fake_host.env["ROCR_VISIBLE_DEVICES"] = f"GPU-{amd_uuid_int(3):016x}"
    found = amd.detect(fake_host.probe())
    assert [(d.id, d.details["kfd_node"]) for d in found.devices] == [("0", 5)]


def test_render_nodes_missing_in_a_container_hide_those_gpus(fake_host):
    install_amd(fake_host, count=4)
    for minor in (129, 131):
        (fake_host.root / f"dev/dri/renderD{minor}").unlink()
    found = amd.detect(fake_host.probe())
    assert [d.details["drm_render_minor"] for d in found.devices] == [128, 130]
    assert [d.id for d in found.devices] == ["0", "1"]


def test_worker_env_sets_only_hip(fake_host):
    assert amd.worker_env(["0", "3"], 8, {}) == {"HIP_VISIBLE_DEVICES": "0,3"}
    env = {"ROCR_VISIBLE_DEVICES": "4,5,6,7"}
    assert amd.worker_env(["1"], 4, env) == {"HIP_VISIBLE_DEVICES": "1"}


@pytest.mark.parametrize(
    "variable",
    [
        "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES",
        "AUTOSCALE_NOSET_HIP_VISIBLE_DEVICES",
        "RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES",
        "AUTOSCALE_NOSET_ROCR_VISIBLE_DEVICES",
    ],
)
def test_noset_opt_out(variable):
    assert amd.worker_env(["0"], 8, {variable: "1"}) == {}
    assert amd.worker_env(["0"], 8, {variable: ""}) == {"HIP_VISIBLE_DEVICES": "0"}


def test_fractions_allowed_and_invalid_quantities_rejected():
    assert amd.validate_quantity(0.25) is None
    assert amd.validate_quantity(4) is None
    assert "whole numbers" in amd.validate_quantity(1.5)
    assert "negative" in amd.validate_quantity(-1)


def test_no_kfd_means_no_gpus(fake_host):
    assert amd.detect(fake_host.probe()) is None


def test_garbage_properties_are_ignored(fake_host):
    nodes = "/sys/class/kfd/kfd/topology/nodes"
    fake_host.write(f"{nodes}/0/properties", "\x00\x01garbage\nsimd_count lots\n")
    fake_host.write(f"{nodes}/1/properties", "")
    fake_host.mkdir(f"{nodes}/2")
    fake_host.write(f"{nodes}/notanode/properties", "simd_count 4\n")
    assert amd.detect(fake_host.probe()) is None


def test_cpu_only_topology_has_no_gpus(fake_host):
    install_amd(fake_host, count=0, cpu_nodes=2)
    assert amd.detect(fake_host.probe()) is None
