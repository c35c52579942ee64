"""Every supported accelerator family's detection, in detection priority order.

The order, each family's resource and visible-device variable are in
:mod:`accel.family_rules` (its table); each class here takes its rules from there.
"""

from __future__ import annotations

from accel.families.amd import AmdGpu
from accel.families.apple import AppleGpu
from accel.families.ascend import HuaweiAscend
from accel.families.base import AcceleratorFamily, Device, FamilyDetection
from accel.families.furiosa import FuriosaNpu
from accel.families.gaudi import IntelGaudi
from accel.families.intel_gpu import IntelGpu
from accel.families.metax import MetaxGpu
from accel.families.mobilint import MobilintNpu
from accel.families.neuron import AwsNeuron
from accel.families.nvidia import NvidiaGpu
from accel.families.rebellions import RebellionsNpu
from accel.families.tenstorrent import TenstorrentNpu
from accel.families.tpu import GoogleTpu
from accel.family_rules import ACCELERATOR_RESOURCES, RULES, rules_for_resource, rules_named

_CLASSES: dict[str, type[AcceleratorFamily]] = {
    cls.name: cls
    for cls in (
        AmdGpu,
        AppleGpu,
        HuaweiAscend,
        FuriosaNpu,
        IntelGaudi,
        IntelGpu,
        MetaxGpu,
        MobilintNpu,
        AwsNeuron,
        NvidiaGpu,
        RebellionsNpu,
        TenstorrentNpu,
        GoogleTpu,
    )
}

FAMILIES: tuple[AcceleratorFamily, ...] = tuple(_CLASSES[rules.name]() for rules in RULES)
_BY_NAME = {family.name: family for family in FAMILIES}


def family_by_name(name: str) -> AcceleratorFamily:
    return _BY_NAME[rules_named(name).name]


def families_for_resource(resource: str) -> list[AcceleratorFamily]:
    """Families that provide ``resource``, in priority order."""
    return [_BY_NAME[rules.name] for rules in rules_for_resource(resource)]


__all__ = [
    "ACCELERATOR_RESOURCES",
    "FAMILIES",
    "AcceleratorFamily",
    "Device",
    "FamilyDetection",
    "families_for_resource",
    "family_by_name",
]
