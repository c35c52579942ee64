"""Google TPU generations and pod types: pure facts, no host access.

A pod type (GCE ``accelerator-type``, GKE ``TPU_ACCELERATOR_TYPE``) is ``<generation>-<size>``,
e.g. ``v4-16``, ``v5litepod-8``, ``v6e-8`` or ``tpu7x-8``. The size counts TensorCores, and a
chip has two cores on v2, v3, v4, v5p and v7x but one on v5e and v6e, so ``v4-16`` and
``v6e-8`` are both 8 chips. A host carries up to 4 chips, except single-host v5e/v6e slices
with up to 8; multi-host v5e/v6e slices use 4-chip hosts.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cache

GOOGLE_PCI_VENDOR_ID = 0x1AE0
MULTI_HOST_CHIPS_PER_HOST = 4
"""Chips on each host of a slice spanning several hosts, whatever the generation."""


@dataclass(frozen=True)
class TpuGeneration:
    """One TPU generation as Cloud TPU names and lays it out."""

    name: str
    """Generation as pod types spell it: ``v4``, ``v5litepod``, ``v7x``."""
    accelerator_type: str
    """Canonical type (``accel.names``), Ray's ``TPU-V4`` style."""
    cores_per_chip: int
    max_chips_per_host: int
    hbm_gib: int
    """High-bandwidth memory per chip."""
    pci_ids: tuple[tuple[str, str | None], ...]
    """(PCI device id, subsystem device id or None for any) pairs of this generation's chips."""
    aliases: tuple[str, ...] = ()


GENERATIONS: tuple[TpuGeneration, ...] = (
    TpuGeneration("v2", "TPU-V2", 2, 4, 16, (("0x0027", "0x004e"),)),
    TpuGeneration("v3", "TPU-V3", 2, 4, 32, (("0x0027", "0x004f"),)),
    TpuGeneration("v4", "TPU-V4", 2, 4, 32, (("0x005e", None),)),
    TpuGeneration("v5p", "TPU-V5P", 2, 4, 95, (("0x0062", None),)),
    TpuGeneration(
        "v5litepod", "TPU-V5LITEPOD", 1, 8, 16, (("0x0063", None),), aliases=("v5e", "v5lite")
    ),
    TpuGeneration("v6e", "TPU-V6E", 1, 8, 32, (("0x006f", None),), aliases=("trillium",)),
    TpuGeneration("v7x", "TPU-V7X", 2, 4, 192, (("0x0076", None),), aliases=("tpu7x", "v7")),
)

_POD_TYPE = re.compile(r"^(?P<generation>[a-z0-9]+?)-(?P<size>\d+)$")


@cache
def _by_spelling() -> dict[str, TpuGeneration]:
    index: dict[str, TpuGeneration] = {}
    for gen in GENERATIONS:
        for spelling in (gen.name, gen.accelerator_type, *gen.aliases):
            index[spelling.lower()] = gen
    return index


def generation(text: str) -> TpuGeneration | None:
    """The generation spelled ``v4``, ``TPU-V4``, ``v5e``, ``tpu7x``... (any case)."""
    return _by_spelling().get(text.strip().lower())


def generation_for_pci(device_id: str, subsystem_id: str | None = None) -> TpuGeneration | None:
    """The generation of a Google PCI function (``/sys/bus/pci/devices/*/device``)."""
    device_id = device_id.strip().lower()
    subsystem_id = subsystem_id.strip().lower() if subsystem_id else None
    for gen in GENERATIONS:
        for pci_device, pci_subsystem in gen.pci_ids:
            if pci_device == device_id and pci_subsystem in (None, subsystem_id):
                return gen
    return None


@dataclass(frozen=True)
class PodType:
    """A TPU slice shape such as ``v4-16``."""

    generation: TpuGeneration
    size: int
    """The number after the dash: TensorCores (chips on v5e/v6e, one core per chip)."""

    @property
    def name(self) -> str:
        """Normalised spelling, e.g. ``v7x-8`` for ``tpu7x-8``, ``v5litepod-8`` for ``v5e-8``."""
        return f"{self.generation.name}-{self.size}"

    @property
    def chips(self) -> int:
        return max(1, self.size // self.generation.cores_per_chip)

    @property
    def chips_per_host(self) -> int:
        """Chips on each host of the slice (a sub-host slice has all its chips on one)."""
        if self.chips <= self.generation.max_chips_per_host:
            return self.chips
        return MULTI_HOST_CHIPS_PER_HOST

    @property
    def hosts(self) -> int:
        return math.ceil(self.chips / self.chips_per_host)


def parse_pod_type(text: str | None) -> PodType | None:
    """Parse ``v4-16`` / ``v5litepod-8`` / ``tpu7x-8``; ``None`` if malformed or unknown."""
    if not text:
        return None
    match = _POD_TYPE.match(text.strip().lower())
    if match is None:
        return None
    gen = generation(match["generation"])
    size = int(match["size"])
    if gen is None or size < 1:
        return None
    return PodType(gen, size)
