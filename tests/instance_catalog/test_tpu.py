"""Cloud TPU slice types: published sizes, chips, hosts and topologies."""

from __future__ import annotations

import math

import pytest

from accel.tpu_generations import parse_pod_type
from instance_catalog.tpu import host_shape, tpu_slice, tpu_slice_types, tpu_zones


@pytest.mark.parametrize(
    ("pod_type", "chips", "hosts", "chips_per_host", "topology"),
    [
        ("v2-8", 4, 1, 4, "2x2"),
        ("v2-512", 256, 64, 4, "16x16"),
        ("v3-32", 16, 4, 4, "4x4"),
        ("v3-2048", 1024, 256, 4, "32x32"),
        ("v4-8", 4, 1, 4, "2x2x1"),
        ("v4-16", 8, 2, 4, "2x2x2"),
        ("v4-32", 16, 4, 4, "2x2x4"),
        ("v4-4096", 2048, 512, 4, "8x16x16"),
        ("v5litepod-1", 1, 1, 1, "1x1"),
        ("v5litepod-4", 4, 1, 4, "2x2"),
        ("v5litepod-8", 8, 1, 8, "2x4"),
        ("v5litepod-16", 16, 4, 4, "4x4"),
        ("v5litepod-256", 256, 64, 4, "16x16"),
        ("v5p-8", 4, 1, 4, "2x2x1"),
        ("v5p-32", 16, 4, 4, "2x2x4"),
        ("v5p-12288", 6144, 1536, 4, "16x16x24"),
        ("v6e-1", 1, 1, 1, "1x1"),
        ("v6e-8", 8, 1, 8, "2x4"),
        ("v6e-256", 256, 64, 4, "16x16"),
        ("v7x-8", 4, 1, 4, "2x2x1"),
        ("v7x-16", 8, 2, 4, "2x2x2"),
    ],
)
def test_published_slices(pod_type, chips, hosts, chips_per_host, topology):
    shape = tpu_slice(pod_type)

    assert shape is not None
    assert (shape.chips, shape.hosts, shape.chips_per_host) == (chips, hosts, chips_per_host)
    assert shape.topology == topology


@pytest.mark.parametrize(
    ("spelling", "normalised"),
    [("v5e-8", "v5litepod-8"), ("tpu7x-16", "v7x-16"), ("V4-16", "v4-16"), ("trillium-8", "v6e-8")],
)
def test_any_spelling_parse_pod_type_accepts(spelling, normalised):
    shape = tpu_slice(spelling)

    assert shape is not None
    assert shape == tpu_slice(normalised)
    assert normalised in tpu_slice_types()


def test_cores_per_chip_follow_the_generation():
    assert tpu_slice("v4-16").cores_per_chip == 2
    assert tpu_slice("v5litepod-16").cores_per_chip == 1
    assert tpu_slice("v7x-16").cores_per_chip == 2
    assert tpu_slice("v5litepod-16").generation == "v5litepod"


@pytest.mark.parametrize(
    "pod_type", ["v4-7", "v4-4", "v4-24", "v5litepod-3", "v5litepod-2", "v6e-512", "v9-8", "", "x"]
)
def test_unpublished_or_invalid_types_give_none(pod_type):
    assert tpu_slice(pod_type) is None


def test_every_listed_type_resolves_consistently():
    types = tpu_slice_types()

    assert len(types) == len(set(types))
    for name in types:
        shape = tpu_slice(name)
        assert shape is not None, name
        assert shape.chips == shape.hosts * shape.chips_per_host, name
        assert math.prod(int(d) for d in shape.topology.split("x")) == shape.chips, name
        pod = parse_pod_type(name)
        assert pod is not None and pod.name == name
        assert (pod.chips, pod.hosts) == (shape.chips, shape.hosts), name
        dims = 3 if shape.generation in ("v4", "v5p", "v7x") else 2
        assert shape.topology.count("x") == dims - 1, name
        assert host_shape(shape.generation, shape.chips_per_host) is not None, name


def test_every_generation_is_listed():
    generations = {tpu_slice(name).generation for name in tpu_slice_types()}

    assert generations == {"v2", "v3", "v4", "v5litepod", "v5p", "v6e", "v7x"}


def test_host_shapes_depend_on_chips_per_host():
    assert host_shape("v5e", 1)["vcpus"] == 24
    assert host_shape("v5litepod", 4)["vcpus"] == 112
    assert host_shape("v5litepod", 8)["vcpus"] == 224
    assert host_shape("v4", 4) == {
        "vcpus": 240,
        "memory_gb": 407,
        "machine_type": "ct4p-hightpu-4t",
    }
    assert host_shape("v4", 8) is None
    assert host_shape("v9", 4) is None


def test_zones_per_generation():
    assert tpu_zones("v4") == {"us-central2": ("us-central2-b",)}
    assert "us-east5-a" in tpu_zones("v5p")["us-east5"]
    assert tpu_zones("v9") == {}
