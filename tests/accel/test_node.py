"""Node inventory: CPU/memory with cgroup limits, overrides, and who owns a resource."""

import pytest

from accel.node import (
    DevicePool,
    InvalidOverrideError,
    NodeInventory,
    apply_overrides,
    detect_node,
    overrides_from_env,
    ray_start_args,
)


def test_cpu_and_memory_come_from_the_host_tree(fake_host):
    fake_host.write("/sys/devices/system/cpu/online", "0-7,16-23")
    fake_host.write("/proc/meminfo", "MemTotal:       65536000 kB\nMemFree: 1 kB")
    inventory = detect_node(fake_host.probe())
    assert inventory.resources == {"CPU": 16.0, "memory": 65536000 * 1024.0}
    assert inventory.detections == ()


@pytest.mark.parametrize(
    ("files", "cpus", "memory"),
    [
        (
            {"/sys/fs/cgroup/cpu.max": "250000 100000", "/sys/fs/cgroup/memory.max": "4294967296"},
            2,
            4294967296,
        ),
        (
            {"/sys/fs/cgroup/cpu.max": "max 100000", "/sys/fs/cgroup/memory.max": "max"},
            32,
            64 * 2**30,
        ),
        (
            {
                "/sys/fs/cgroup/cpu/cpu.cfs_quota_us": "400000",
                "/sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000",
                "/sys/fs/cgroup/memory/memory.limit_in_bytes": "1073741824",
            },
            4,
            2**30,
        ),
    ],
)
def test_container_limits_cap_cpu_and_memory(fake_host, files, cpus, memory):
    fake_host.write("/sys/devices/system/cpu/online", "0-31")
    fake_host.write("/proc/meminfo", f"MemTotal: {64 * 2**20} kB")
    for path, text in files.items():
        fake_host.write(path, text)
    inventory = detect_node(fake_host.probe())
    assert inventory.resources["CPU"] == cpus
    assert inventory.resources["memory"] == memory


def _amd_node() -> NodeInventory:
    return NodeInventory(
        resources={"CPU": 8.0, "GPU": 2.0, "accelerator_type:AMD-Instinct-MI300X": 1.0},
        pools={"GPU": DevicePool("GPU", "amd", ("0", "1"), physical_count=2)},
    )


def test_gpu_override_without_detected_gpus_belongs_to_nvidia():
    inventory = apply_overrides(NodeInventory({"CPU": 4.0}), num_gpus=2)
    assert inventory.resources["GPU"] == 2
    assert inventory.pools["GPU"] == DevicePool("GPU", "nvidia", ("0", "1"), physical_count=0)
    assert inventory.family_for("GPU").visible_env_var == "CUDA_VISIBLE_DEVICES"


def test_gpu_override_keeps_the_detected_gpu_family():
    inventory = apply_overrides(_amd_node(), num_gpus=4)
    assert inventory.pools["GPU"].family == "amd"
    assert inventory.pools["GPU"].ids == ("0", "1", "2", "3")
    assert inventory.pools["GPU"].physical_count == 2


def test_override_below_physical_uses_the_first_visible_devices():
    detected = NodeInventory(
        {"CPU": 8.0, "GPU": 2.0},
        pools={"GPU": DevicePool("GPU", "nvidia", ("1", "3"), physical_count=2)},
    )
    assert apply_overrides(detected, num_gpus=1).pools["GPU"].ids == ("1",)
    assert apply_overrides(detected, num_gpus=3).pools["GPU"].ids == ("1", "3", "0")


def test_resources_override_adds_custom_and_accelerator_resources():
    inventory = apply_overrides(
        NodeInventory({"CPU": 4.0}), resources={"TPU": 4, "my-license": 2, "CPU": 0}
    )
    assert inventory.resources == {"TPU": 4.0, "my-license": 2.0}
    assert inventory.pools["TPU"].family == "tpu"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"GPU": -1}, "must not be negative"),
        ({"GPU": 1.5}, "whole number of devices"),
        ({"GPU": float("nan")}, "'GPU' must be a finite number, got nan"),
        ({"TPU": float("inf")}, "'TPU' must be a finite number, got inf"),
        ({"GPU": 1e308}, r"'GPU' must be at most 1e\+14"),
        ({"GPU": 2000}, "GPU must be at most 1024 devices"),
        ({"my-license": 1e15}, r"'my-license' must be at most 1e\+14"),
    ],
)
def test_invalid_overrides_are_rejected(overrides, message):
    with pytest.raises(InvalidOverrideError, match=message):
        apply_overrides(NodeInventory({"CPU": 1.0}), resources=overrides)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("[1, 2]", "expected a JSON object"),
        ('{"GPU": true}', "'GPU' must be a number"),
        ("{oops", "not valid JSON"),
        ('{"GPU": NaN}', "'GPU' must be a finite number"),
        ('{"GPU": 1e999}', "'GPU' must be a finite number, got inf"),
        ('{"GPU": 1e308, "TPU": 4}', "'GPU' must be at most 1e\\+14, got 1e\\+308"),
        ('{"GPU": 100000000000000000000000}', "'GPU' must be at most"),
        ('{"GPU": 1' + "0" * 5000 + "}", "a number has too many digits"),
        ("[" * 100_000, "nested too deeply"),
        ('{"": 1}', "a resource name must not be empty"),
    ],
)
def test_override_variable_errors_name_the_variable(raw, message):
    with pytest.raises(InvalidOverrideError, match=f"AUTOSCALE_NODE_RESOURCES: .*{message}"):
        overrides_from_env({"AUTOSCALE_NODE_RESOURCES": raw})


def test_a_huge_resource_name_is_quoted_briefly():
    name = "x" * 100_000
    with pytest.raises(InvalidOverrideError) as caught:
        overrides_from_env({"AUTOSCALE_NODE_RESOURCES": f'{{"{name}": 1}}'})
    assert len(str(caught.value)) < 200
    assert "(100000 chars) is longer than 256 characters" in str(caught.value)


def test_logical_devices_beyond_the_physical_get_the_next_free_ids():
    detected = NodeInventory(
        {"CPU": 1.0, "GPU": 2.0}, pools={"GPU": DevicePool("GPU", "nvidia", ("1", "3"), 2)}
    )
    pool = apply_overrides(detected, resources={"GPU": 1024}).pools["GPU"]
    assert pool.ids[:4] == ("1", "3", "0", "2")
    assert len(set(pool.ids)) == 1024
    assert pool.physical_count == 2


def test_ray_start_args_carry_every_resource():
    args = ray_start_args(_amd_node())
    assert args == [
        "--num-cpus=8",
        "--num-gpus=2",
        '--resources={"accelerator_type:AMD-Instinct-MI300X": 1.0}',
    ]
