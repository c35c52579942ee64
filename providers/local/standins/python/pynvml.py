"""A stand-in for NVIDIA's ``pynvml`` on a simulated host of the local cloud.

The local cloud puts this folder first on a simulated host's ``PYTHONPATH``, so the ordinary
NVIDIA detection imports it instead of the driver's bindings and reads the host's GPU table
(``$AUTOSCALE_SIMULATED_NVML``, written by ``providers.local.hosts``). Only the calls
detection makes are here, with pynvml's names and error codes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

TABLE_ENV_VAR = "AUTOSCALE_SIMULATED_NVML"
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_GPU_IS_LOST = 15
NVML_DEVICE_MIG_ENABLE = 1
NVML_GPU_VIRTUALIZATION_MODE_NONE = 0
NVML_GPU_VIRTUALIZATION_MODE_VGPU = 2

_gpus: list[dict[str, Any]] = []
table_path: str | None = None
"""The GPU table to read; unset, ``$AUTOSCALE_SIMULATED_NVML``."""


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value


def nvmlInit() -> None:
    table = table_path or os.environ.get(TABLE_ENV_VAR)
    if not table:
        raise NVMLError(NVML_ERROR_UNINITIALIZED)
    _gpus[:] = json.loads(Path(table).read_text())


def nvmlShutdown() -> None:
    _gpus.clear()


def nvmlDeviceGetCount() -> int:
    return len(_gpus)


def nvmlDeviceGetHandleByIndex(index: int) -> int:
    return index


def nvmlDeviceGetName(handle: int) -> str:
    return _gpus[handle]["name"]


def nvmlDeviceGetUUID(handle: int) -> str:
    return _gpus[handle]["uuid"]


def nvmlDeviceGetMemoryInfo(handle: int) -> SimpleNamespace:
    total = _gpus[handle]["memory_mib"] * 2**20
    return SimpleNamespace(total=total, free=total, used=0)


def nvmlDeviceGetPciInfo(handle: int) -> SimpleNamespace:
    gpu = _gpus[handle]
    return SimpleNamespace(busId=gpu["bus_id"], pciDeviceId=(gpu["pci_device_id"] << 16) | 0x10DE)


def nvmlDeviceGetCudaComputeCapability(handle: int) -> tuple[int, int]:
    return (8, 0)


def nvmlDeviceGetVirtualizationMode(handle: int) -> int:
    """A partition a cloud sells as a GPU (g6f) is a vGPU in its guest."""
    vgpu = _gpus[handle].get("vgpu")
    return NVML_GPU_VIRTUALIZATION_MODE_VGPU if vgpu else NVML_GPU_VIRTUALIZATION_MODE_NONE


def nvmlDeviceGetMigMode(handle: int) -> tuple[int, int]:
    raise NVMLError(NVML_ERROR_NOT_SUPPORTED)


def nvmlDeviceGetMaxMigDeviceCount(handle: int) -> int:
    return 0


def nvmlDeviceGetMigDeviceHandleByIndex(handle: int, index: int) -> int:
    raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
