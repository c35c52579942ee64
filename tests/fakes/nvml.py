"""A table-driven fake of the pynvml surface NVIDIA detection uses.

Describe GPUs as :class:`GpuSpec` rows (or use a builder such as :func:`a100_80g`), wrap them in
:class:`FakeNvml` and set ``fake_host.nvml`` to it. Failures are the real ``pynvml.NVMLError``
subclasses, built the way pynvml builds them (``pynvml.NVMLError(code)`` returns the subclass),
so detection is exercised against the exceptions it meets on a real host.

Like the real library, every query before ``nvmlInit`` (or after ``nvmlShutdown``) raises
``NVMLError_Uninitialized``; ``init_calls`` and ``shutdown_calls`` count the lifecycle calls.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Any

import pynvml

from tests.fakes.host import FakeHost

MIB = 1024 * 1024
NVIDIA_PCI_VENDOR_ID = 0x10DE
ANY_CALL = "*"
"""Key of :attr:`GpuSpec.errors` that makes every query of that GPU fail."""


@dataclass(frozen=True)
class MigSpec:
    """One MIG instance (GPU instance + compute instance) carved out of a GPU."""

    uuid: str
    memory_mib: int
    name: str = ""


@dataclass(frozen=True)
class GpuSpec:
    """One physical GPU as NVML reports it."""

    name: str
    uuid: str
    memory_mib: int
    pci_bus_id: str
    pci_device_id: int | None
    """16-bit PCI device id (``0x20B2``); ``None`` makes the PCI query unsupported."""
    compute_capability: tuple[int, int] | None = None
    mig_enabled: bool | None = None
    """``None``: the GPU is not MIG capable (``nvmlDeviceGetMigMode`` is unsupported)."""
    mig_instances: tuple[MigSpec, ...] = ()
    max_mig_devices: int = 7
    errors: Mapping[str, int] = field(default_factory=dict)
    """NVML function name (or :data:`ANY_CALL`) -> ``NVML_ERROR_*`` code it raises."""
    bytes_strings: bool = False
    """Return names and UUIDs as ``bytes``, like pynvml releases before 11.5 did."""

    @property
    def memory_bytes(self) -> int:
        return self.memory_mib * MIB


@dataclass(frozen=True)
class ModelSpec:
    """What one GPU model looks like to NVML: name, memory, PCI device id, compute capability."""

    name: str
    memory_mib: int
    pci_device_id: int | None
    compute_capability: tuple[int, int]


# Names and memory totals as nvidia-smi / NVML print them on real hosts.
MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec("NVIDIA A100-SXM4-80GB", 81920, 0x20B2, (8, 0)),
        ModelSpec("NVIDIA A100-SXM4-40GB", 40960, 0x20B0, (8, 0)),
        ModelSpec("NVIDIA A100 80GB PCIe", 81920, 0x20B5, (8, 0)),
        ModelSpec("NVIDIA A10G", 23028, 0x2237, (8, 6)),
        ModelSpec("NVIDIA H100 80GB HBM3", 81559, 0x2330, (9, 0)),
        ModelSpec("NVIDIA H100 PCIe", 81559, 0x2331, (9, 0)),
        ModelSpec("NVIDIA H100 NVL", 95830, 0x2321, (9, 0)),
        ModelSpec("NVIDIA H200", 143771, 0x2335, (9, 0)),
        ModelSpec("NVIDIA B200", 183359, 0x2901, (10, 0)),
        ModelSpec("NVIDIA GB200", 189471, 0x2941, (10, 0)),
        ModelSpec("Tesla T4", 15360, 0x1EB8, (7, 5)),
        ModelSpec("Tesla V100-SXM2-16GB", 16384, 0x1DB1, (7, 0)),
        ModelSpec("NVIDIA L4", 23034, 0x27B8, (8, 9)),
        ModelSpec("NVIDIA L40S", 46068, 0x26B9, (8, 9)),
        ModelSpec("NVIDIA RTX PRO 6000 Blackwell Server Edition", 97887, 0x2BB5, (12, 0)),
        ModelSpec("NVIDIA GeForce RTX 4090", 24564, 0x2684, (8, 9)),
        ModelSpec("Quadro RTX 6000", 24576, 0x1E36, (7, 5)),
        ModelSpec("NVIDIA RTX 6000 Ada Generation", 49140, 0x26B1, (8, 9)),
        ModelSpec("NVIDIA RTX A6000", 49140, 0x2230, (8, 6)),
        ModelSpec("NVIDIA GeForce RTX 3090", 24576, 0x2204, (8, 6)),
    )
}


def fake_uuid(prefix: str, *parts: object) -> str:
    """A stable, real-looking NVML UUID such as ``GPU-1c4f0b9e-...``."""
    return f"{prefix}-{uuid.uuid5(uuid.NAMESPACE_OID, '/'.join(map(str, parts)))}"


def gpus(model: str, count: int, *, first_bus: int = 0x07, **overrides: Any) -> list[GpuSpec]:
    """``count`` identical GPUs of a model from :data:`MODELS`, on consecutive PCI buses."""
    spec = MODELS[model]
    return [
        GpuSpec(
            name=spec.name,
            uuid=fake_uuid("GPU", spec.name, index),
            memory_mib=spec.memory_mib,
            pci_bus_id=f"00000000:{first_bus + index * 0x10:02X}:00.0",
            pci_device_id=spec.pci_device_id,
            compute_capability=spec.compute_capability,
            **overrides,
        )
        for index in range(count)
    ]


def a100_80g(count: int = 8, **overrides: Any) -> list[GpuSpec]:
    return gpus("NVIDIA A100-SXM4-80GB", count, **overrides)


def a100_40g(count: int = 8, **overrides: Any) -> list[GpuSpec]:
    return gpus("NVIDIA A100-SXM4-40GB", count, **overrides)


def h100_sxm(count: int = 8, **overrides: Any) -> list[GpuSpec]:
    return gpus("NVIDIA H100 80GB HBM3", count, **overrides)


def t4(count: int = 1, **overrides: Any) -> list[GpuSpec]:
    return gpus("Tesla T4", count, **overrides)


def with_mig(gpu: GpuSpec, profile: str, memory_mib: int, count: int) -> GpuSpec:
    """``gpu`` in MIG mode with ``count`` instances of one profile (e.g. ``1g.10gb``)."""
    instances = tuple(
        MigSpec(
            uuid=fake_uuid("MIG", gpu.uuid, slot),
            memory_mib=memory_mib,
            name=f"{gpu.name} MIG {profile}",
        )
        for slot in range(count)
    )
    return replace(gpu, mig_enabled=True, mig_instances=instances)


@dataclass(frozen=True)
class _Handle:
    gpu: GpuSpec
    mig: MigSpec | None = None


class FakeNvml:
    """Module-like stand-in for ``pynvml``: the functions detection calls, over a GPU table.

    ``init_error`` (an ``NVML_ERROR_*`` code) makes ``nvmlInit`` fail, e.g. driver not loaded or
    library not found; ``count_error`` makes ``nvmlDeviceGetCount`` fail. Constants and error
    classes not defined here (``NVML_*``, ``NVMLError*``) come from the real pynvml.
    """

    NVMLError = pynvml.NVMLError

    def __init__(
        self,
        gpus: Sequence[GpuSpec] = (),
        init_error: int | None = None,
        count_error: int | None = None,
    ) -> None:
        self.gpus = list(gpus)
        self.init_error = init_error
        self.count_error = count_error
        self.init_calls = 0
        self.shutdown_calls = 0
        self._initialised = 0

    @classmethod
    def from_specs(cls, specs: Sequence[GpuSpec], **kwargs: Any) -> FakeNvml:
        return cls(specs, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith(("NVML_", "NVMLError")):
            return getattr(pynvml, name)
        raise AttributeError(f"FakeNvml does not implement {name}")

    # Lifecycle ------------------------------------------------------------------------
    @property
    def initialised(self) -> bool:
        return self._initialised > 0

    def nvmlInit(self) -> None:
        self.init_calls += 1
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)
        self._initialised += 1

    def nvmlShutdown(self) -> None:
        self.shutdown_calls += 1
        self._require_init()
        self._initialised -= 1

    # System and device queries ---------------------------------------------------------
    def nvmlDeviceGetCount(self) -> int:
        self._require_init()
        if self.count_error is not None:
            raise pynvml.NVMLError(self.count_error)
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:
        self._require_init()
        if not 0 <= index < len(self.gpus):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        gpu = self.gpus[index]
        self._check(gpu, "nvmlDeviceGetHandleByIndex")
        return _Handle(gpu)

    def nvmlDeviceGetName(self, handle: _Handle) -> str | bytes:
        self._check(handle.gpu, "nvmlDeviceGetName")
        name = handle.mig.name if handle.mig else handle.gpu.name
        return name.encode() if handle.gpu.bytes_strings else name

    def nvmlDeviceGetUUID(self, handle: _Handle) -> str | bytes:
        self._check(handle.gpu, "nvmlDeviceGetUUID")
        value = handle.mig.uuid if handle.mig else handle.gpu.uuid
        return value.encode() if handle.gpu.bytes_strings else value

    def nvmlDeviceGetMemoryInfo(self, handle: _Handle) -> SimpleNamespace:
        self._check(handle.gpu, "nvmlDeviceGetMemoryInfo")
        total = handle.mig.memory_mib * MIB if handle.mig else handle.gpu.memory_bytes
        return SimpleNamespace(total=total, free=total, used=0)

    def nvmlDeviceGetPciInfo(self, handle: _Handle) -> SimpleNamespace:
        gpu = handle.gpu
        self._check(gpu, "nvmlDeviceGetPciInfo")
        if gpu.pci_device_id is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        domain, bus, rest = gpu.pci_bus_id.split(":")
        return SimpleNamespace(
            busId=gpu.pci_bus_id,
            busIdLegacy=gpu.pci_bus_id[4:],
            domain=int(domain, 16),
            bus=int(bus, 16),
            device=int(rest.split(".")[0], 16),
            pciDeviceId=(gpu.pci_device_id << 16) | NVIDIA_PCI_VENDOR_ID,
            pciSubSystemId=0,
        )

    def nvmlDeviceGetCudaComputeCapability(self, handle: _Handle) -> tuple[int, int]:
        self._check(handle.gpu, "nvmlDeviceGetCudaComputeCapability")
        if handle.gpu.compute_capability is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return handle.gpu.compute_capability

    # MIG ------------------------------------------------------------------------------
    def nvmlDeviceGetMigMode(self, handle: _Handle) -> list[int]:
        self._check(handle.gpu, "nvmlDeviceGetMigMode")
        if handle.gpu.mig_enabled is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        mode = pynvml.NVML_DEVICE_MIG_ENABLE if handle.gpu.mig_enabled else 0
        return [mode, mode]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: _Handle) -> int:
        self._check(handle.gpu, "nvmlDeviceGetMaxMigDeviceCount")
        return handle.gpu.max_mig_devices if handle.gpu.mig_enabled else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: _Handle, index: int) -> _Handle:
        self._check(handle.gpu, "nvmlDeviceGetMigDeviceHandleByIndex")
        if index >= len(handle.gpu.mig_instances):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return _Handle(handle.gpu, handle.gpu.mig_instances[index])

    # Helpers ----------------------------------------------------------------------------
    def _require_init(self) -> None:
        if not self.initialised:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)

    def _check(self, gpu: GpuSpec, function: str) -> None:
        self._require_init()
        code = gpu.errors.get(function, gpu.errors.get(ANY_CALL))
        if code is not None:
            raise pynvml.NVMLError(code)


def install_nvidia(
    fake_host: FakeHost, count: int = 8, model: str = "NVIDIA A100-SXM4-80GB"
) -> FakeNvml:
    """Give ``fake_host`` ``count`` GPUs of ``model`` (a :data:`MODELS` name) behind NVML."""
    fake = FakeNvml(gpus(model, count))
    fake_host.nvml = fake
    return fake
