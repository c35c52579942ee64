"""The catalog's records: instance types, their accelerators, TPU slices and prices."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

AWS = "aws"
GCP = "gcp"
CLOUDS = (AWS, GCP)


@dataclass(frozen=True)
class Accelerator:
    """The accelerators one instance carries (one model per instance type)."""

    name: str
    """Canonical type (``accel.names``), e.g. ``A100-80G``; the cloud's name if unknown."""
    manufacturer: str
    count: float
    """Devices per instance; a fraction for partitioned GPUs (AWS g6f: 0.125)."""
    memory_mib: int | None = None
    """Memory of one device."""
    family: str | None = None
    """The ``accel`` family that detects it on the node (``nvidia``, ``neuron``...), or None."""
    cores_per_device: int | None = None
    """NeuronCores per Neuron device, TensorCores per TPU chip."""
    cloud_name: str | None = None
    """What the cloud calls it (``A100``, ``nvidia-tesla-t4``), when it differs."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "manufacturer": self.manufacturer,
            "count": self.count,
            "memory_mib": self.memory_mib,
            "family": self.family,
            "cores_per_device": self.cores_per_device,
        }


@dataclass(frozen=True)
class TpuSlice:
    """Shape of a Cloud TPU slice type."""

    generation: str
    chips: int
    hosts: int
    chips_per_host: int
    topology: str
    cores_per_chip: int


@dataclass(frozen=True)
class GpuAttachment:
    """A GPU model attachable to a machine type (GCE N1), and the counts allowed with it."""

    accelerator: Accelerator
    """The GPU with ``count`` 1; multiply by the attached count."""
    counts: tuple[int, ...]
    unavailable: str | None = None
    """Why it cannot be attached (a retired GPU), if it cannot."""


@dataclass(frozen=True)
class Price:
    """Hourly USD prices in one region, each with its source and the day it is from."""

    on_demand: float | None
    spot: float | None = None
    as_of: str | None = None
    """``YYYY-MM-DD`` the on-demand price is from; None where the source does not say."""
    source: str | None = None
    """Where the on-demand price comes from."""
    spot_as_of: str | None = None
    spot_source: str | None = None
    note: str | None = None
    """Why a price here is not the recorded one (a flagged anomaly), if it is not."""


@dataclass(frozen=True)
class InstanceType:
    """One instance type (AWS), machine type (GCE) or TPU slice type (GCP)."""

    name: str
    cloud: str
    vcpus: int
    memory_mib: int
    accelerator: Accelerator | None = None
    zones: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Regions offering it, each with its zones (empty tuple where zones are unknown)."""
    prices: Mapping[str, Price] = field(default_factory=dict)
    """Price per region."""
    tpu: TpuSlice | None = None
    attachable_gpus: tuple[GpuAttachment, ...] = ()
    architectures: tuple[str, ...] = ()
    """CPU architectures it runs (``x86_64``, ``arm64``); empty where the cloud does not say."""
    network: str | None = None
    """Network performance as the cloud states it, e.g. ``Up to 12.5 Gigabit``."""
    unavailable: str | None = None
    """Why it cannot be launched (a GKE-only TPU), if it cannot: such types are listed only
    when asked for by name, and a node type using one is unavailable with this reason."""

    @property
    def regions(self) -> tuple[str, ...]:
        """Regions offering it: those with known zones, else those with a price."""
        return tuple(sorted(self.zones or self.prices))

    def price(self, region: str | None = None, spot: bool = False) -> float | None:
        """Hourly price in ``region`` (the cheapest region when None); None if unknown."""
        candidates = [self.prices[region]] if region in self.prices else []
        if region is None:
            candidates = list(self.prices.values())
        values = [p.spot if spot else p.on_demand for p in candidates]
        known = [v for v in values if v is not None]
        return min(known) if known else None
