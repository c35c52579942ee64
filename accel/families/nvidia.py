"""NVIDIA GPUs, detected through NVML the way ``nvidia-smi`` does.

Detection initialises NVML, counts the GPUs and reads each one by its NVML index: name, UUID,
total memory, PCI bus and device id, CUDA compute capability and MIG mode (the instances of a
GPU in MIG mode are listed in its details; the GPU still counts as one device). A GPU whose
queries fail (``GPU is lost``) is skipped with a warning; a missing library or driver means no
GPUs. NVML is always shut down again.

A vGPU (NVML's virtualization mode ``VGPU``) whose memory is a fraction of its GPU type's is
a partition a cloud sells as one GPU (AWS g6f/gr6f: 1/8, 1/4 or 1/2 of an L4). It counts as
that share of a GPU (rounded to eighths) and advertises only the type's ``-PARTITIONED``
name, never the whole GPU's tokens, so whole-GPU work never lands on it. The profile suffix
of a vGPU's name (``NVIDIA L4-3Q``: 3 GB, Q series) is not part of the model.

The canonical type comes from the PCI device id where it is in :data:`PCI_DEVICE_TYPES`
(exact, and the same in VMs and containers), else from the NVML name and memory through
:func:`accel.names.resolve_model`.

``CUDA_VISIBLE_DEVICES`` may name NVML indices, GPU UUIDs (``GPU-...``) or MIG instance UUIDs
(``MIG-...``). Each MIG instance named there is one device of its own: CUDA enumerates it as
one device and a worker gets exactly that instance. It advertises only the generic type of its
GPU (``A100``, not ``A100-80G``), since a slice has a fraction of the GPU's memory. CUDA lets
one process use a single MIG instance, so requests above 1 GPU only make sense on whole GPUs.
The pre-R470 form ``MIG-GPU-<uuid>/<gi>/<ci>`` and UUID prefixes are not matched.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from accel import names
from accel.families.base import AcceleratorFamily, Device
from accel.families.values import MIB
from accel.family_rules import NVIDIA

if TYPE_CHECKING:
    from accel.probe import HostProbe

logger = logging.getLogger(__name__)

NVIDIA_PCI_VENDOR_ID = 0x10DE
MIG_UUID_PREFIX = "MIG-"

# PCI device id -> canonical type, for ids that name one product (an id shared by two
# products, e.g. 0x25B6 for A2 and A16 or 0x1E30 for Quadro RTX 6000 and 8000, is left to the
# name). Sources: the supported-GPU table of NVIDIA's open-gpu-kernel-modules README (Turing
# and later), NVIDIA's gpu-admin-tools and the PCI ID database (pci-ids.ucw.cz).
PCI_DEVICE_TYPES: Mapping[int, str] = {
    0x102D: "K80",
    0x13F2: "M60",
    0x1BB3: "P4",
    0x1B38: "P40",
    0x15F7: "P100",  # PCIe 12GB
    0x15F8: "P100",  # PCIe 16GB
    0x15F9: "P100",  # SXM2 16GB
    0x1DB1: "V100-16G",  # SXM2
    0x1DB3: "V100-16G",  # FHHL
    0x1DB4: "V100-16G",  # PCIe
    0x1DF5: "V100-16G",  # SXM2
    0x1DB5: "V100-32G",  # SXM2
    0x1DB6: "V100-32G",  # PCIe
    0x1DB8: "V100-32G",  # SXM3
    0x1DF6: "V100-32G",  # V100S PCIe
    0x1EB8: "T4",
    0x1EB4: "T4G",
    0x1E36: "RTX-6000",  # Quadro RTX 6000
    0x2236: "A10",
    0x2237: "A10G",
    0x20B7: "A30",
    0x2235: "A40",
    0x20B0: "A100-40G",  # SXM4
    0x20F1: "A100-40G",  # PCIe
    0x20B2: "A100-80G",  # SXM4
    0x20B5: "A100-80G",  # PCIe
    0x27B8: "L4",
    0x26B5: "L40",
    0x26B9: "L40S",
    0x2330: "H100-80G",  # SXM5, "NVIDIA H100 80GB HBM3"
    0x2331: "H100-80G",  # PCIe
    0x2321: "H100-NVL",
    0x2335: "H200",  # SXM
    0x233B: "H200",  # NVL
    0x2329: "H20",
    0x2342: "GH200",
    0x2901: "B200",
    0x3182: "B300",  # "NVIDIA B300 SXM6 AC"
    0x2941: "GB200",
    0x31C2: "GB300",
    0x2BB1: "RTX-PRO-6000",  # Workstation Edition
    0x2BB5: "RTX-PRO-6000",  # Server Edition
    0x26B1: "RTX-6000-Ada",
    0x2230: "RTX-A6000",
    0x2684: "RTX-4090",
    0x2204: "RTX-3090",
}


def nvidia_type(
    model: str, memory_mib: int | None = None, pci_device_id: int | None = None
) -> str | None:
    """Canonical type of an NVIDIA GPU: by PCI device id, else by NVML name and memory."""
    if pci_device_id is not None and pci_device_id in PCI_DEVICE_TYPES:
        return PCI_DEVICE_TYPES[pci_device_id]
    return names.resolve_type(model, family="nvidia", memory_mib=memory_mib)


class NvidiaGpu(AcceleratorFamily, rules=NVIDIA):
    def probe_devices(self, probe: HostProbe) -> list[Device]:
        nvml = probe.nvml()
        if nvml is None:
            logger.debug("pynvml is not installed: no NVIDIA GPUs")
            return []
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as err:
            logger.debug("NVML did not initialise (%s): no NVIDIA GPUs", err)
            return []
        try:
            gpus = _read_gpus(nvml)
        finally:
            _shutdown(nvml)
        return gpus + self._visible_mig_instances(gpus, probe.env)

    def _visible_mig_instances(
        self, gpus: Sequence[Device], env: Mapping[str, str]
    ) -> list[Device]:
        """MIG instances that ``CUDA_VISIBLE_DEVICES`` names, as devices of their own."""
        visible = self.visible_ids(env) or []
        wanted = {token for token in visible if token.startswith(MIG_UUID_PREFIX)}
        if not wanted:
            return []
        instances: list[Device] = []
        for gpu in gpus:
            for instance in gpu.details.get("mig_devices", ()):
                if instance["uuid"] in wanted:
                    instances.append(_mig_device(len(gpus) + len(instances), gpu, instance))
        return instances


def _read_gpus(nvml: Any) -> list[Device]:
    try:
        count = nvml.nvmlDeviceGetCount()
    except nvml.NVMLError as err:
        logger.warning("NVML could not count the GPUs (%s): no NVIDIA GPUs", err)
        return []
    devices: list[Device] = []
    for index in range(count):
        try:
            devices.append(_read_gpu(nvml, index))
        except nvml.NVMLError as err:
            logger.warning("skipping NVIDIA GPU %d: NVML query failed: %s", index, err)
    return devices


def _read_gpu(nvml: Any, index: int) -> Device:
    """One GPU by NVML index; raises ``NVMLError`` when a required query fails."""
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    model = _text(nvml.nvmlDeviceGetName(handle))
    uuid = _text(nvml.nvmlDeviceGetUUID(handle))
    memory_mib = nvml.nvmlDeviceGetMemoryInfo(handle).total // MIB
    details: dict[str, Any] = {}
    pci_device_id = _read_pci(nvml, handle, details)
    capability = _optional(nvml, nvml.nvmlDeviceGetCudaComputeCapability, handle)
    if capability is not None:
        details["compute_capability"] = f"{capability[0]}.{capability[1]}"
    details.update(_read_mig(nvml, handle))
    device = Device(
        index=index,
        id=str(index),
        model=model,
        accelerator_type=nvidia_type(model, memory_mib, pci_device_id),
        uuid=uuid,
        memory_mib=memory_mib,
        details=details,
    )
    if _is_vgpu(nvml, handle):
        return _as_partition(device, pci_device_id)
    return device


def _is_vgpu(nvml: Any, handle: Any) -> bool:
    query = getattr(nvml, "nvmlDeviceGetVirtualizationMode", None)
    mode = _optional(nvml, query, handle) if query is not None else None
    return mode is not None and mode == getattr(nvml, "NVML_GPU_VIRTUALIZATION_MODE_VGPU", 2)


VGPU_PROFILE = re.compile(r"-\d+[A-Z]$")
"""The profile suffix of a vGPU's NVML name: framebuffer GB and series (``-3Q``, ``-24C``)."""
PARTITION_STEP = 8
"""Partitions are counted in eighths of a GPU (AWS sells 1/8, 1/4 and 1/2 of an L4)."""


def _as_partition(device: Device, pci_device_id: int | None) -> Device:
    """A vGPU as the share of its GPU type its memory is, when that share is below one."""
    model = VGPU_PROFILE.sub("", device.model)
    whole = nvidia_type(model, None, pci_device_id)
    entry = names.get(whole) if whole else None
    partitioned = names.get(f"{whole}-PARTITIONED")
    if entry is None or entry.memory_gib is None or partitioned is None or not device.memory_mib:
        return replace(device, details={**device.details, "vgpu": True})
    steps = round(device.memory_mib / (entry.memory_gib * 1024) * PARTITION_STEP)
    share = max(1, steps) / PARTITION_STEP
    if share >= 1:
        return replace(device, details={**device.details, "vgpu": True})
    return replace(
        device,
        accelerator_type=partitioned.name,
        share=share,
        details={**device.details, "vgpu": True, "partition_of": whole},
    )


def _read_pci(nvml: Any, handle: Any, details: dict[str, Any]) -> int | None:
    """Record the PCI bus id and device id in ``details``; return the NVIDIA device id."""
    pci = _optional(nvml, nvml.nvmlDeviceGetPciInfo, handle)
    if pci is None:
        return None
    details["pci_bus_id"] = _text(pci.busId)
    vendor_id, device_id = pci.pciDeviceId & 0xFFFF, pci.pciDeviceId >> 16
    if vendor_id != NVIDIA_PCI_VENDOR_ID:
        return None
    details["pci_device_id"] = f"0x{device_id:04X}"
    return device_id


def _read_mig(nvml: Any, handle: Any) -> dict[str, Any]:
    """``mig_enabled`` (absent where MIG is unsupported) and, if enabled, ``mig_devices``."""
    mode = _optional(nvml, nvml.nvmlDeviceGetMigMode, handle)
    if mode is None:
        return {}
    if mode[0] != nvml.NVML_DEVICE_MIG_ENABLE:
        return {"mig_enabled": False}
    instances = []
    for slot in range(_optional(nvml, nvml.nvmlDeviceGetMaxMigDeviceCount, handle) or 0):
        mig = _optional(nvml, nvml.nvmlDeviceGetMigDeviceHandleByIndex, handle, slot)
        uuid = _optional(nvml, nvml.nvmlDeviceGetUUID, mig) if mig is not None else None
        if uuid is None:
            continue  # an empty slot: NVML answers "Not Found"
        memory = _optional(nvml, nvml.nvmlDeviceGetMemoryInfo, mig)
        instances.append(
            {
                "uuid": _text(uuid),
                "name": _text(_optional(nvml, nvml.nvmlDeviceGetName, mig) or ""),
                "memory_mib": memory.total // MIB if memory is not None else None,
            }
        )
    return {"mig_enabled": True, "mig_devices": instances}


def _mig_device(index: int, gpu: Device, instance: Mapping[str, Any]) -> Device:
    entry = names.get(gpu.accelerator_type) if gpu.accelerator_type else None
    return Device(
        index=index,
        id=instance["uuid"],
        model=instance["name"] or gpu.model,
        accelerator_type=(entry.generic or entry.name) if entry else gpu.accelerator_type,
        uuid=instance["uuid"],
        memory_mib=instance["memory_mib"],
        details={"mig_parent_index": gpu.index, "mig_parent_uuid": gpu.uuid},
    )


def _optional(nvml: Any, query: Callable[..., Any], *args: Any) -> Any | None:
    """``query(*args)``, or ``None`` when NVML cannot answer it (unsupported, not found...).

    A lost GPU is not an unanswered question: that error propagates so the GPU is skipped.
    """
    try:
        return query(*args)
    except nvml.NVMLError as err:
        if err.value == nvml.NVML_ERROR_GPU_IS_LOST:
            raise
        logger.debug("NVML %s: %s", getattr(query, "__name__", query), err)
        return None


def _shutdown(nvml: Any) -> None:
    try:
        nvml.nvmlShutdown()
    except nvml.NVMLError as err:
        logger.debug("NVML shutdown failed: %s", err)


def _text(value: str | bytes) -> str:
    """NVML strings are ``str`` in current pynvml and ``bytes`` in releases before 11.5."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    return value.strip("\x00 ")
