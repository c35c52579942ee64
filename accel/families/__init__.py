"""Every supported accelerator family, in detection priority order.

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

FAMILIES: tuple[AcceleratorFamily, ...] = (
    NvidiaGpu(),
    AmdGpu(),
    IntelGpu(),
    MetaxGpu(),
    AppleGpu(),
    GoogleTpu(),
    AwsNeuron(),
    IntelGaudi(),
    HuaweiAscend(),
    RebellionsNpu(),
    FuriosaNpu(),
    MobilintNpu(),
    TenstorrentNpu(),
)

ACCELERATOR_RESOURCES: tuple[str, ...] = tuple(dict.fromkeys(f.resource_name for f in FAMILIES))


def family_by_name(name: str) -> AcceleratorFamily:
    for family in FAMILIES:
        if family.name == name:
            return family
    raise KeyError(f"unknown accelerator family {name!r}; known: {[f.name for f in FAMILIES]}")


def families_for_resource(resource: str) -> list[AcceleratorFamily]:
    """Families that provide ``resource``, in priority order."""
    return [family for family in FAMILIES if family.resource_name == resource]


__all__ = [
    "ACCELERATOR_RESOURCES",
    "FAMILIES",
    "AcceleratorFamily",
    "Device",
    "FamilyDetection",
    "families_for_resource",
    "family_by_name",
]
