"""Each accelerator family's devices reach the node's container as its vendor documents."""

import pytest

from accel.families.base import Device, FamilyDetection
from accel.node import NodeInventory
from accel.probe import HostProbe
from autoscaler.container import docker_flags


def inventory(family: str, count: int = 2) -> NodeInventory:
    devices = tuple(Device(i, str(i), "model", None) for i in range(count))
    detection = FamilyDetection(family, "X", devices, None, ())
    return NodeInventory({"CPU": 8}, (detection,))


@pytest.fixture
def host(tmp_path):
    for path in ("dev/kfd", "dev/neuron0", "dev/neuron1", "dev/accel0", "dev/davinci0"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    (tmp_path / "dev/dri").mkdir()
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/meminfo").write_text("MemTotal:       1000 kB\n")
    return HostProbe(root=tmp_path)


@pytest.mark.parametrize(
    ("family", "expected"),
    [
        ("nvidia", ["--gpus", "all"]),
        ("amd", ["--device=/dev/kfd", "--device=/dev/dri", "--group-add", "video"]),
        ("neuron", ["--device=/dev/neuron0", "--device=/dev/neuron1"]),
        ("gaudi", ["--runtime=habana", "-e", "HABANA_VISIBLE_DEVICES=all", "--ipc=host"]),
        ("tpu", ["--privileged"]),
        ("ascend", ["--device=/dev/davinci0"]),
    ],
)
def test_a_family_found_at_boot_passes_its_devices_through(host, family, expected):
    flags = docker_flags(inventory(family), host)
    for flag in expected:
        assert flag in flags
    assert flags[-1] == f"--shm-size={int(1000 * 1024 * 0.3)}b"


def test_a_cpu_node_gets_only_shared_memory_and_none_when_the_user_sizes_it(host):
    assert docker_flags(NodeInventory({"CPU": 8}), host) == [
        f"--shm-size={int(1000 * 1024 * 0.3)}b"
    ]
    assert docker_flags(inventory("nvidia"), host, shm=False) == ["--gpus", "all"]


def test_no_devices_means_no_flags(host):
    assert docker_flags(inventory("nvidia", count=0), host, shm=False) == []
