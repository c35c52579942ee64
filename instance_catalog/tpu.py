"""Cloud TPU slice types: which pod types exist, and their chips, hosts and topology.

Generation facts (cores per chip, chips per host, HBM) come from ``accel.tpu_generations``;
the published slice shapes and host VM shapes come from ``data/gcp.yaml``.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

from accel.tpu_generations import GENERATIONS, generation, parse_pod_type
from instance_catalog.data import load_bundled_yaml
from instance_catalog.model import TpuSlice


@cache
def gcp_data() -> dict[str, Any]:
    """The parsed ``data/gcp.yaml`` (shared with ``instance_catalog.gcp``; do not mutate)."""
    return load_bundled_yaml("gcp.yaml")


def _dims(topology: str) -> tuple[int, ...]:
    return tuple(int(d) for d in topology.split("x"))


def _cube_likeness(topology: str) -> tuple[int, tuple[int, ...]]:
    dims = _dims(topology)
    return (max(dims), tuple(sorted(dims)))


@cache
def _slices() -> dict[str, TpuSlice]:
    """Normalised pod type -> slice, every generation, smallest first."""
    table: dict[str, TpuSlice] = {}
    for gen in GENERATIONS:
        facts = gcp_data()["tpu"].get(gen.name)
        if not facts:
            continue
        by_chips: dict[int, str] = {}
        for topology in facts["topologies"]:
            chips = math.prod(_dims(topology))
            known = by_chips.get(chips)
            if known is None or _cube_likeness(topology) < _cube_likeness(known):
                by_chips[chips] = topology
        for chips, topology in sorted(by_chips.items()):
            pod = parse_pod_type(f"{gen.name}-{chips * gen.cores_per_chip}")
            if pod is None or pod.chips != chips:
                raise ValueError(f"gcp.yaml: {gen.name} topology {topology} has no pod type")
            table[pod.name] = TpuSlice(
                generation=gen.name,
                chips=chips,
                hosts=pod.hosts,
                chips_per_host=pod.chips_per_host,
                topology=topology,
                cores_per_chip=gen.cores_per_chip,
            )
    return table


def tpu_slice(pod_type: str) -> TpuSlice | None:
    """The slice of ``v4-16`` / ``v5e-8`` / ``tpu7x-16``...; None unless a published size."""
    pod = parse_pod_type(pod_type)
    if pod is None:
        return None
    return _slices().get(pod.name)


def tpu_slice_types() -> list[str]:
    """Every published slice type, normalised (``v5litepod-8``, ``v7x-16``), by generation."""
    return list(_slices())


def host_shape(generation_name: str, chips_per_host: int) -> dict[str, Any] | None:
    """``{"vcpus", "memory_gb", "machine_type"?}`` of the VM carrying that many chips."""
    gen = generation(generation_name)
    if gen is None:
        return None
    hosts = gcp_data()["tpu"].get(gen.name, {}).get("hosts", {})
    return hosts.get(chips_per_host)


def tpu_zones(generation_name: str) -> dict[str, tuple[str, ...]]:
    """Region -> zones offering the generation (empty if unknown)."""
    gen = generation(generation_name)
    if gen is None:
        return {}
    zones = gcp_data()["tpu"].get(gen.name, {}).get("zones", {})
    return {region: tuple(names) for region, names in zones.items()}
