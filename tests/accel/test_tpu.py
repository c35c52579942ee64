"""Google TPU detection, slice resources, worker variables and request rules."""

from __future__ import annotations

import pytest

from accel.families.tpu import GoogleTpu
from accel.tpu_generations import generation, generation_for_pci, parse_pod_type
from tests.fakes.pci import add_pci_device
from tests.fakes.tpu_trees import add_vfio_group, install_tpu_host

TPU = GoogleTpu()


# Detection --------------------------------------------------------------------------------
def test_v4_host_on_gke_reports_four_accel_chips(fake_host):
    install_tpu_host(fake_host, "v4-16", worker_id=0, chips=4, topology="2x2x2")

    found = TPU.detect(fake_host.probe())

    assert found.count == 4
    assert [d.id for d in found.devices] == ["0", "1", "2", "3"]
    assert found.accelerator_type == "TPU-V4"
    assert found.tokens == ("TPU-V4",)
    chip = found.devices[0]
    assert chip.model == "TPU v4"
    assert chip.memory_mib == 32 * 1024
    assert chip.details["device_path"] == "/dev/accel0"
    assert chip.details["pci_bus_id"] == "0000:00:04.0"
    assert chip.details["pci_device_id"] == "0x005e"
    assert chip.details["cores_per_chip"] == 2


def test_gke_host_never_asks_the_metadata_server(fake_host):
    install_tpu_host(fake_host, "v4-16", topology="2x2x2")

    TPU.detect(fake_host.probe())

    assert fake_host.metadata_calls == []


def test_v5e_vfio_chips_on_a_gce_vm(fake_host):
    install_tpu_host(fake_host, "v5litepod-8", chips=8, via="gce", topology="2x4")

    found = TPU.detect(fake_host.probe())

    assert found.count == 8
    assert [d.id for d in found.devices] == [str(i) for i in range(8)]
    assert found.accelerator_type == "TPU-V5LITEPOD"
    assert found.devices[3].details["device_path"] == "/dev/vfio/3"
    assert found.devices[0].memory_mib == 16 * 1024


def test_vfio_groups_are_ordered_numerically(fake_host):
    install_tpu_host(fake_host, "v6e-8", chips=8, first_group=6, via=None)

    found = TPU.detect(fake_host.probe())

    paths = [d.details["device_path"] for d in found.devices]
    assert paths == [f"/dev/vfio/{g}" for g in range(6, 14)]
    assert found.accelerator_type == "TPU-V6E"


def test_functions_of_one_pci_slot_are_one_chip(fake_host):
    install_tpu_host(fake_host, "tpu7x-8", chips=4, functions_per_chip=2, via=None)

    found = TPU.detect(fake_host.probe())

    assert found.count == 4
    assert found.accelerator_type == "TPU-V7X"
    assert found.devices[1].details["pci_functions"] == ["0000:00:05.0", "0000:00:05.1"]


@pytest.mark.parametrize(
    ("pod_type", "expected"),
    [("v2-8", "TPU-V2"), ("v3-32", "TPU-V3"), ("v5p-8", "TPU-V5P"), ("v6e-4", "TPU-V6E")],
)
def test_generation_comes_from_the_pci_device_id(fake_host, pod_type, expected):
    install_tpu_host(fake_host, pod_type, chips=4, via=None)

    assert TPU.detect(fake_host.probe()).accelerator_type == expected


def test_without_sysfs_the_pod_type_names_the_generation(fake_host):
    install_tpu_host(fake_host, "v4-8", chips=4, via="gke", pci=False)

    found = TPU.detect(fake_host.probe())

    assert found.count == 4
    assert found.accelerator_type == "TPU-V4"


def test_unknown_generation_still_counts_chips_without_a_type(fake_host):
    install_tpu_host(fake_host, "v4-8", chips=4, via=None, pci=False)

    found = TPU.detect(fake_host.probe())

    assert found.count == 4
    assert found.accelerator_type is None
    assert found.tokens == ()
    assert found.devices[0].model == "Google TPU"


# Hosts that are not TPU hosts -------------------------------------------------------------
def test_non_tpu_host_finds_nothing_and_never_waits_on_metadata(fake_host):
    fake_host.metadata["instance/attributes/accelerator-type"] = "v4-8"

    assert TPU.detect(fake_host.probe()) is None
    assert fake_host.metadata_calls == []


def test_kernel_accel_directory_is_not_a_tpu(fake_host):
    # Gaudi, Intel NPU and NVIDIA 570+ drivers create /dev/accel/accel0 (a directory).
    fake_host.write("/dev/accel/accel0")

    assert TPU.detect(fake_host.probe()) is None
    assert fake_host.metadata_calls == []


def test_vfio_group_of_another_vendor_is_not_a_tpu(fake_host):
    # BlueField-3's management function bound to vfio-pci shows up as /dev/vfio/96.
    add_vfio_group(fake_host, 96)
    add_pci_device(fake_host, "0000:03:00.1", "0x15b3", "0xc2d5", iommu_group=96)

    assert TPU.detect(fake_host.probe()) is None
    assert fake_host.metadata_calls == []


def test_vfio_group_without_sysfs_is_not_counted(fake_host):
    install_tpu_host(fake_host, "v5litepod-4", chips=4, via="gke", pci=False)

    assert TPU.detect(fake_host.probe()) is None


def test_garbage_metadata_leaves_slice_unknown(fake_host):
    install_tpu_host(fake_host, "v4-8", chips=4, via=None)
    fake_host.metadata["instance/attributes/accelerator-type"] = "<html>404</html>"
    fake_host.metadata["instance/attributes/agent-worker-number"] = "zero"

    found = TPU.detect(fake_host.probe())

    assert found.count == 4
    assert found.extra_resources == {}
    assert "ray.io/tpu-pod-type" not in found.labels


# Slice resources and labels -----------------------------------------------------------------
def test_worker_zero_carries_the_head_resource_and_slice_name(fake_host):
    install_tpu_host(fake_host, "v4-16", worker_id=0, slice_name="my-tpu", topology="2x2x2")

    found = TPU.detect(fake_host.probe())

    assert found.extra_resources == {"my-tpu": 1.0, "TPU-v4-16-head": 1.0}
    assert found.labels == {
        "ray.io/tpu-pod-type": "v4-16",
        "ray.io/tpu-worker-id": "0",
        "ray.io/tpu-slice-name": "my-tpu",
        "ray.io/tpu-topology": "2x2x2",
        "tpu-chips-per-host": "4",
        "tpu-worker-count": "2",
    }


def test_other_workers_carry_only_the_slice_name(fake_host):
    install_tpu_host(fake_host, "v4-16", worker_id=1, slice_name="my-tpu")

    found = TPU.detect(fake_host.probe())

    assert found.extra_resources == {"my-tpu": 1.0}
    assert found.labels["ray.io/tpu-worker-id"] == "1"


def test_gce_vm_reads_the_slice_from_metadata(fake_host):
    install_tpu_host(
        fake_host,
        "v5litepod-16",
        worker_id=0,
        chips=4,
        slice_name="tpu-slice-a",
        topology="4x4",
        via="gce",
    )

    found = TPU.detect(fake_host.probe())

    assert found.extra_resources == {"tpu-slice-a": 1.0, "TPU-v5litepod-16-head": 1.0}
    assert found.labels["ray.io/tpu-topology"] == "4x4"
    assert found.labels["tpu-chips-per-host"] == "4"
    assert found.labels["tpu-worker-count"] == "4"
    assert "instance/attributes/accelerator-type" in fake_host.metadata_calls


def test_v7x_pod_type_is_normalised_like_ray(fake_host):
    install_tpu_host(fake_host, "tpu7x-16", worker_id=0, chips=4, slice_name="iw")

    found = TPU.detect(fake_host.probe())

    assert "TPU-v7x-16-head" in found.extra_resources
    assert found.labels["ray.io/tpu-pod-type"] == "v7x-16"


def test_worker_hostnames_give_the_worker_count(fake_host):
    hosts = [f"tpu-job-0-{i}.tpu-job" for i in range(4)]
    install_tpu_host(fake_host, "v4-32", worker_id=2, worker_hostnames=hosts)

    found = TPU.detect(fake_host.probe())

    assert found.labels["tpu-worker-count"] == "4"


def test_without_a_slice_name_there_are_no_slice_resources(fake_host):
    install_tpu_host(fake_host, "v4-8", worker_id=0, slice_name=None)

    found = TPU.detect(fake_host.probe())

    assert found.extra_resources == {}
    assert found.labels["ray.io/tpu-pod-type"] == "v4-8"


# Visible chips and worker variables -------------------------------------------------------
def test_visible_chips_filter(fake_host):
    install_tpu_host(fake_host, "v4-8", chips=4)
    fake_host.env["TPU_VISIBLE_CHIPS"] = "1,3"

    found = TPU.detect(fake_host.probe())

    assert [d.id for d in found.devices] == ["1", "3"]
    assert [d.index for d in found.devices] == [0, 1]


@pytest.mark.parametrize("value", ["", "NoDevFiles"])
def test_empty_visible_chips_means_none(fake_host, value):
    install_tpu_host(fake_host, "v4-8", chips=4)
    fake_host.env["TPU_VISIBLE_CHIPS"] = value

    assert TPU.detect(fake_host.probe()) is None


@pytest.mark.parametrize(
    ("ids", "bounds"),
    [(["0"], "1,1,1"), (["2", "3"], "1,2,1"), (["4", "5", "6", "7"], "2,2,1")],
)
def test_sub_host_workers_get_chip_and_host_bounds(ids, bounds):
    env = TPU.worker_env(ids, node_device_count=8, env={})

    assert env == {
        "TPU_VISIBLE_CHIPS": ",".join(ids),
        "TPU_CHIPS_PER_HOST_BOUNDS": bounds,
        "TPU_HOST_BOUNDS": "1,1,1",
    }


def test_whole_host_worker_leaves_bounds_unset():
    env = TPU.worker_env(["0", "1", "2", "3"], node_device_count=4, env={})

    assert env == {
        "TPU_VISIBLE_CHIPS": "0,1,2,3",
        "TPU_CHIPS_PER_HOST_BOUNDS": None,
        "TPU_HOST_BOUNDS": None,
    }


@pytest.mark.parametrize(
    "var", ["AUTOSCALE_NOSET_TPU_VISIBLE_CHIPS", "RAY_EXPERIMENTAL_NOSET_TPU_VISIBLE_CHIPS"]
)
def test_noset_opt_out(var):
    assert TPU.worker_env(["0"], node_device_count=4, env={var: "1"}) == {}


# Request quantities -----------------------------------------------------------------------
@pytest.mark.parametrize("quantity", [0, 1, 2, 4, 8])
def test_valid_chip_counts(quantity):
    assert TPU.validate_quantity(quantity) is None


@pytest.mark.parametrize("quantity", [3, 5, 6, 16])
def test_unsupported_chip_counts_are_explained(quantity):
    message = TPU.validate_quantity(quantity)

    assert message is not None
    assert f"TPU quantity {quantity}" in message
    assert "1, 2, 4 or 8" in message


def test_fractional_and_negative_requests_are_rejected():
    assert "fractional" in TPU.validate_quantity(0.5)
    assert "negative" in TPU.validate_quantity(-1)


# Generations and pod types ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pod_type", "name", "chips", "per_host", "hosts"),
    [
        ("v2-8", "v2-8", 4, 4, 1),
        ("v3-32", "v3-32", 16, 4, 4),
        ("v4-8", "v4-8", 4, 4, 1),
        ("v4-16", "v4-16", 8, 4, 2),
        ("v5p-128", "v5p-128", 64, 4, 16),
        ("v5litepod-1", "v5litepod-1", 1, 1, 1),
        ("v5litepod-8", "v5litepod-8", 8, 8, 1),
        ("v5litepod-16", "v5litepod-16", 16, 4, 4),
        ("v5e-4", "v5litepod-4", 4, 4, 1),
        ("v6e-8", "v6e-8", 8, 8, 1),
        ("v6e-256", "v6e-256", 256, 4, 64),
        ("tpu7x-8", "v7x-8", 4, 4, 1),
        ("V7X-16", "v7x-16", 8, 4, 2),
    ],
)
def test_pod_type_shapes(pod_type, name, chips, per_host, hosts):
    pod = parse_pod_type(pod_type)

    assert (pod.name, pod.chips, pod.chips_per_host, pod.hosts) == (name, chips, per_host, hosts)


@pytest.mark.parametrize("text", [None, "", "v4", "v4-", "v9-8", "v4-0", "TPU-V4", "v4-8-x"])
def test_malformed_pod_types(text):
    assert parse_pod_type(text) is None


def test_generation_lookup_and_pci_table():
    assert generation("TPU-V5LITEPOD").name == "v5litepod"
    assert generation("v5e").max_chips_per_host == 8
    assert generation("v4").cores_per_chip == 2
    assert generation_for_pci("0x0027", "0x004f").name == "v3"
    assert generation_for_pci("0x0027", "0x1234") is None
    assert generation_for_pci("0x006F").name == "v6e"
    assert generation_for_pci("0x0042") is None  # gVNIC, Google's NIC


def test_non_ascii_digit_worker_id_is_unknown(fake_host):
    install_tpu_host(fake_host, "v4-16", worker_id=0)
    fake_host.env["TPU_WORKER_ID"] = "²"
    found = TPU.detect(fake_host.probe())
    assert found.count == 4
    assert "ray.io/tpu-worker-id" not in found.labels
    assert found.extra_resources == {}
