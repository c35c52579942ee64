"""Every accelerator family's request rules, apart from its detection code.

What the planner, the config and demand checks need of a family (its resource, its
visible-device variable, which quantities a request may ask for) lives here, so they load
none of the detection modules in :mod:`accel.families`, whose classes take these rules.

The order is fixed and documented (never a set): when two families share a resource name
(``GPU``), the first one detected owns it on that node.

 1. NVIDIA GPU        GPU           CUDA_VISIBLE_DEVICES
 2. AMD GPU           GPU           HIP_VISIBLE_DEVICES (ROCR_VISIBLE_DEVICES read too)
 3. Intel GPU         GPU           ONEAPI_DEVICE_SELECTOR (ZE_AFFINITY_MASK read too)
 4. MetaX GPU         GPU           CUDA_VISIBLE_DEVICES
 5. Apple silicon     GPU           (none)
 6. Google TPU        TPU           TPU_VISIBLE_CHIPS
 7. AWS Neuron        neuron_cores  NEURON_RT_VISIBLE_CORES
 8. Intel Gaudi       HPU           HABANA_VISIBLE_MODULES
 9. Huawei Ascend     NPU           ASCEND_RT_VISIBLE_DEVICES
10. Rebellions        RBLN          RBLN_DEVICES
11. Furiosa           FURIOSA       FURIOSA_DEVICES
12. Mobilint          MBLT          QBRUNTIME_VISIBLE_DEVICES
13. Tenstorrent       TTNPU         TT_VISIBLE_DEVICES
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FamilyRules:
    """One family's name, resource, visible-device variable and request rules."""

    name: str
    """Short stable id, e.g. ``nvidia``."""
    display_name: str
    resource_name: str
    visible_env_var: str | None
    """The variable set for a worker; ``None`` where the vendor has none (Apple)."""
    allows_fractions: bool
    whole_counts: tuple[int, ...] = ()
    """Where not empty, the only whole quantities one worker may ask for."""
    whole_counts_why: str = ""
    """Why only those, for the error message."""

    def validate_quantity(self, quantity: float) -> str | None:
        """An error message if ``quantity`` of this resource cannot be requested, else None."""
        if quantity < 0:
            return f"{self.resource_name} quantity must not be negative, got {quantity:g}"
        if quantity > 1 and not float(quantity).is_integer():
            return (
                f"{self.resource_name} quantity {quantity:g} is invalid: quantities above 1 "
                "must be whole numbers (fractions share one device)"
            )
        if not self.allows_fractions and not float(quantity).is_integer():
            return (
                f"{self.display_name} ({self.resource_name}) does not support fractional "
                f"requests, got {quantity:g}; request a whole number"
            )
        if self.whole_counts and quantity and quantity not in self.whole_counts:
            counts = self.whole_counts
            return (
                f"{self.resource_name} quantity {quantity:g} is not supported; request "
                f"{', '.join(map(str, counts[:-1]))} or {counts[-1]} ({self.whole_counts_why})"
            )
        return None


NVIDIA = FamilyRules("nvidia", "NVIDIA GPU", "GPU", "CUDA_VISIBLE_DEVICES", True)
AMD = FamilyRules("amd", "AMD GPU", "GPU", "HIP_VISIBLE_DEVICES", True)
INTEL_GPU = FamilyRules("intel_gpu", "Intel GPU", "GPU", "ONEAPI_DEVICE_SELECTOR", True)
METAX = FamilyRules("metax", "MetaX GPU", "GPU", "CUDA_VISIBLE_DEVICES", True)
APPLE = FamilyRules("apple", "Apple silicon GPU", "GPU", None, True)
TPU = FamilyRules(
    "tpu",
    "Google TPU",
    "TPU",
    "TPU_VISIBLE_CHIPS",
    False,
    whole_counts=(1, 2, 4, 8),
    whole_counts_why="chips: a TPU host is split only into 1-, 2- or 4-chip workers, or used whole",
)
NEURON = FamilyRules("neuron", "AWS Neuron", "neuron_cores", "NEURON_RT_VISIBLE_CORES", False)
GAUDI = FamilyRules("gaudi", "Intel Gaudi", "HPU", "HABANA_VISIBLE_MODULES", False)
ASCEND = FamilyRules("ascend", "Huawei Ascend", "NPU", "ASCEND_RT_VISIBLE_DEVICES", True)
REBELLIONS = FamilyRules("rebellions", "Rebellions", "RBLN", "RBLN_DEVICES", False)
FURIOSA = FamilyRules("furiosa", "Furiosa", "FURIOSA", "FURIOSA_DEVICES", False)
MOBILINT = FamilyRules("mobilint", "Mobilint", "MBLT", "QBRUNTIME_VISIBLE_DEVICES", False)
TENSTORRENT = FamilyRules("tenstorrent", "Tenstorrent", "TTNPU", "TT_VISIBLE_DEVICES", False)

RULES: tuple[FamilyRules, ...] = (
    NVIDIA,
    AMD,
    INTEL_GPU,
    METAX,
    APPLE,
    TPU,
    NEURON,
    GAUDI,
    ASCEND,
    REBELLIONS,
    FURIOSA,
    MOBILINT,
    TENSTORRENT,
)
"""Every family, in detection priority order."""

ACCELERATOR_RESOURCES: tuple[str, ...] = tuple(dict.fromkeys(r.resource_name for r in RULES))


NEURON_LNC_CHOICES = (1, 2)
NEURON_DEFAULT_LNC = {"Trainium2": 2}
"""Physical NeuronCores per logical one by default, for types with LNC (others: 1)."""


def neuron_logical_cores(type_name: str | None, physical: int, lnc: int | None = None) -> int:
    """The ``neuron_cores`` of a Neuron device with ``physical`` cores at logical-core
    setting ``lnc`` (the type's default where None or not a choice; types without LNC: 1)."""
    default = NEURON_DEFAULT_LNC.get(type_name or "")
    if default is None:
        return physical
    return max(1, physical // (lnc if lnc in NEURON_LNC_CHOICES else default))


def rules_named(name: str) -> FamilyRules:
    for rules in RULES:
        if rules.name == name:
            return rules
    raise KeyError(f"unknown accelerator family {name!r}; known: {[r.name for r in RULES]}")


def rules_for_resource(resource: str) -> list[FamilyRules]:
    """Families that provide ``resource``, in priority order."""
    return [rules for rules in RULES if rules.resource_name == resource]
