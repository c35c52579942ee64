"""Whole-node detection across families: what a node advertises and who owns a resource."""

import pytest

from accel.families import FAMILIES, family_by_name
from accel.node import detect_node
from tests.fakes.gpu_trees import install_amd
from tests.fakes.neuron import install_neuron
from tests.fakes.nvml import install_nvidia
from tests.fakes.tpu_trees import install_tpu_host


def test_families_are_in_the_documented_priority_order():
    assert [f.name for f in FAMILIES] == [
        "nvidia", "amd", "intel_gpu", "metax", "apple", "tpu", "neuron", "gaudi", "ascend",
        "rebellions", "furiosa", "mobilint", "tenstorrent",
    ]  # fmt: skip


def test_p4de_node_advertises_gpus_and_both_a100_tokens(fake_host):
    install_nvidia(fake_host, count=8, model="NVIDIA A100-SXM4-80GB")
    inventory = detect_node(fake_host.probe())
    assert inventory.resources["GPU"] == 8
    assert inventory.resources["accelerator_type:A100"] == 1
    assert inventory.resources["accelerator_type:A100-80G"] == 1
    assert "accelerator_type:A100-40G" not in inventory.resources
    assert inventory.pools["GPU"].ids == tuple(str(i) for i in range(8))
    assert len({d.uuid for d in inventory.detections[0].devices}) == 8


def test_first_gpu_family_in_priority_owns_gpu_and_the_other_is_reported(fake_host):
    install_nvidia(fake_host, count=2, model="Tesla T4")
    install_amd(fake_host, count=4, model="MI300X")
    inventory = detect_node(fake_host.probe())
    assert inventory.resources["GPU"] == 2
    assert inventory.pools["GPU"].family == "nvidia"
    assert [d.family for d in inventory.detections] == ["nvidia"]
    assert any("AMD GPU found 4 device(s)" in w for w in inventory.warnings)


def test_gpu_and_tpu_families_coexist(fake_host):
    install_amd(fake_host, count=2, model="MI300X")
    install_tpu_host(fake_host, accelerator_type="v4-16", worker_id=0, chips=4)
    inventory = detect_node(fake_host.probe())
    assert inventory.resources["GPU"] == 2
    assert inventory.resources["TPU"] == 4
    assert inventory.pools["GPU"].family == "amd"
    assert inventory.family_for("TPU").visible_env_var == "TPU_VISIBLE_CHIPS"


@pytest.mark.parametrize(("worker_id", "has_head"), [(0, True), (1, False)])
def test_tpu_slice_head_resource_only_on_worker_zero(fake_host, worker_id, has_head):
    install_tpu_host(fake_host, accelerator_type="v4-16", worker_id=worker_id, slice_name="s1")
    resources = detect_node(fake_host.probe()).resources
    assert resources["TPU"] == 4
    assert resources["accelerator_type:TPU-V4"] == 1
    assert resources["s1"] == 1
    assert ("TPU-v4-16-head" in resources) is has_head


def test_trainium_node_counts_neuron_cores(fake_host):
    install_neuron(fake_host, instance_type="trn1.32xlarge")
    resources = detect_node(fake_host.probe()).resources
    assert resources["neuron_cores"] == 32
    assert resources["accelerator_type:aws-neuron-core"] == 1
    assert resources["accelerator_type:Trainium"] == 1


def test_one_broken_family_does_not_hide_the_others(fake_host, monkeypatch):
    install_nvidia(fake_host, count=1, model="Tesla T4")
    install_neuron(fake_host, instance_type="inf2.xlarge")

    def explode(probe):
        raise RuntimeError("vendor library crashed")

    monkeypatch.setattr(family_by_name("nvidia"), "probe_devices", explode)
    resources = detect_node(fake_host.probe()).resources
    assert "GPU" not in resources
    assert resources["neuron_cores"] == 2


def test_visible_devices_variable_limits_the_node(fake_host):
    install_nvidia(fake_host, count=4, model="Tesla T4")
    fake_host.env["CUDA_VISIBLE_DEVICES"] = "1,3"
    inventory = detect_node(fake_host.probe())
    assert inventory.resources["GPU"] == 2
    assert inventory.pools["GPU"].ids == ("1", "3")


@pytest.mark.parametrize("value", ["", "NoDevFiles"])
def test_visible_devices_variable_can_hide_every_device(fake_host, value):
    install_nvidia(fake_host, count=4, model="Tesla T4")
    fake_host.env["CUDA_VISIBLE_DEVICES"] = value
    inventory = detect_node(fake_host.probe())
    assert "GPU" not in inventory.resources
    assert not any(k.startswith("accelerator_type:") for k in inventory.resources)
