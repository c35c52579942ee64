"""Simulated accelerator hosts for the embedded local cloud.

A simulated host is a directory tree laid out like a real machine (``/sys`` and ``/proc``
facts, ``/dev`` nodes, vendor tools such as ``neuron-ls`` and ``hl-smi`` as small scripts)
plus environment variables (``AUTOSCALE_HOST_ROOT``, the GKE ``TPU_*`` variables, and
``AUTOSCALE_SIMULATED_NVML`` pointing at a GPU table that the ``pynvml`` stand-in in
``standins/python`` serves in place of the NVIDIA driver).
The ordinary detection code reads it exactly as it reads a real host.
"""

from __future__ import annotations

import importlib.util
import json
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from accel.probe import HOST_ROOT_ENV_VAR, HostProbe

SIMULATED_NVML_ENV_VAR = "AUTOSCALE_SIMULATED_NVML"
NEURON_BIN = "/opt/aws/neuron/bin"
HABANA_BIN = "/usr/bin"
STANDIN_PYTHON = Path(__file__).parent / "standins" / "python"
"""Put first on a simulated host's ``PYTHONPATH``: the ``pynvml`` stand-in."""


@dataclass(frozen=True)
class SimulatedHost:
    """What one simulated host has."""

    instance_type: str
    cpus: int
    memory_bytes: int
    family: str | None = None
    """``nvidia``, ``amd``, ``neuron``, ``tpu`` or ``gaudi``; None for a CPU host."""
    accelerator_type: str | None = None
    devices: int = 0
    """GPUs, Neuron devices, TPU chips on this host, or Gaudi cards."""
    device_memory_mib: int | None = None
    cores_per_device: int = 1
    tpu_pod_type: str | None = None
    tpu_worker_id: int = 0
    tpu_slice_name: str | None = None
    tpu_topology: str | None = None
    """The slice's chip topology (e.g. ``2x2x2``), set as GKE sets ``TPU_TOPOLOGY``: without
    it, detection asks the GCE metadata server, which a simulated host does not have."""


def build(root: Path, host: SimulatedHost) -> dict[str, str]:
    """Lay ``host`` out below ``root``; returns the environment a process on it sees."""
    env = {HOST_ROOT_ENV_VAR: str(root)}
    _write(root, "/sys/devices/system/cpu/online", f"0-{host.cpus - 1}")
    _write(root, "/proc/meminfo", f"MemTotal:       {host.memory_bytes // 1024} kB")
    _write(root, "/sys/devices/virtual/dmi/id/product_name", host.instance_type)
    builders = {"nvidia": _nvidia, "amd": _amd, "neuron": _neuron, "tpu": _tpu, "gaudi": _gaudi}
    builder = builders.get(host.family or "")
    if builder is not None:
        env.update(builder(root, host))
    return env


def _write(root: Path, host_path: str, text: str, executable: bool = False) -> Path:
    path = root / host_path.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    if executable:
        path.chmod(0o755)
    return path


def _nvidia(root: Path, host: SimulatedHost) -> dict[str, str]:
    """An NVML table; a partitioned type (g6f) is a vGPU of its whole GPU with a profile
    name (``NVIDIA L4-3Q``) and the partition's memory, as NVML shows it in the guest."""
    from accel.families.nvidia import PCI_DEVICE_TYPES
    from accel.names import get

    entry = get(host.accelerator_type or "")
    whole = host.accelerator_type or ""
    name = f"NVIDIA {whole.replace('-', ' ')}"
    memory = host.device_memory_mib or 16384
    if entry is not None and entry.partitioned:
        whole = whole.removesuffix("-PARTITIONED")
        name = f"NVIDIA {whole}-{round(memory / 1024)}Q"
    pci_id = next((i for i, t in PCI_DEVICE_TYPES.items() if t == whole), 0)
    gpus = [
        {
            "name": name,
            "uuid": f"GPU-{zlib.crc32(f'{root}/{index}'.encode()):08x}-5117-{index:04x}",
            "memory_mib": memory,
            "pci_device_id": pci_id,
            "bus_id": f"00000000:{0x10 + index:02X}:00.0",
            "vgpu": bool(entry and entry.partitioned),
        }
        for index in range(host.devices)
    ]
    table = _write(root, "/etc/simulated-nvml.json", json.dumps(gpus))
    return {SIMULATED_NVML_ENV_VAR: str(table), "PYTHONPATH": str(STANDIN_PYTHON)}


def _neuron(root: Path, host: SimulatedHost) -> dict[str, str]:
    from accel.family_rules import NEURON_DEFAULT_LNC

    memory = (host.device_memory_mib or 32768) * 2**20
    lnc = NEURON_DEFAULT_LNC.get(host.accelerator_type or "")
    devices = [
        {
            "neuron_device": index,
            "bdf": f"0000:{0x10 + index:02x}:1e.0",
            "nc_count": host.cores_per_device,
            "memory_size": memory,
            "neuroncore_ids": [
                index * host.cores_per_device + c for c in range(host.cores_per_device)
            ],
            "instance_type": host.instance_type,
            "neuron_processes": [],
            **({"logical_neuroncore_config": lnc} if lnc else {}),
        }
        for index in range(host.devices)
    ]
    data = _write(root, "/opt/aws/neuron/neuron-ls.json", json.dumps(devices))
    _write(root, f"{NEURON_BIN}/neuron-ls", f"#!/bin/sh\ncat '{data}'", executable=True)
    return {}


def _amd(root: Path, host: SimulatedHost) -> dict[str, str]:
    """The KFD topology ROCm reads: node 0 the CPU, then one node per GPU."""
    from accel.families.amd import AMD_DEVICE_TYPES, AMD_VENDOR_ID, KFD_NODES

    device_id = next((i for i, t in AMD_DEVICE_TYPES.items() if t == host.accelerator_type), 0)
    _write(root, f"{KFD_NODES}/0/properties", "simd_count 0")
    memory = (host.device_memory_mib or 8192) * 2**20
    for index in range(host.devices):
        node = f"{KFD_NODES}/{index + 1}"
        properties = {
            "simd_count": 144,
            "vendor_id": AMD_VENDOR_ID,
            "device_id": device_id,
            "unique_id": zlib.crc32(f"{root}/{index}".encode()),
            "location_id": (0x10 + index) << 8,
        }
        _write(root, f"{node}/properties", "\n".join(f"{k} {v}" for k, v in properties.items()))
        _write(root, f"{node}/mem_banks/0/properties", f"heap_type 1\nsize_in_bytes {memory}")
    return {}


def _gaudi(root: Path, host: SimulatedHost) -> dict[str, str]:
    rows = [
        f"{index}, {index}, 0000:{0x19 + index:02x}:00.0, HL-205, "
        f"{host.device_memory_mib or 32768} MiB, sim-{index:04d}, AM{index:08d}"
        for index in range(host.devices)
    ]
    data = _write(root, "/etc/simulated-hl-smi.csv", "\n".join(rows))
    _write(root, f"{HABANA_BIN}/hl-smi", f"#!/bin/sh\ncat '{data}'", executable=True)
    return {"PATH": f"{root / HABANA_BIN.lstrip('/')}{os.pathsep}{os.environ.get('PATH', '')}"}


def _tpu(root: Path, host: SimulatedHost) -> dict[str, str]:
    for chip in range(host.devices):
        _write(root, f"/dev/accel{chip}", "")
    env = {"TPU_WORKER_ID": str(host.tpu_worker_id)}
    if host.tpu_pod_type:
        env["TPU_ACCELERATOR_TYPE"] = host.tpu_pod_type
    if host.tpu_slice_name:
        env["TPU_NAME"] = host.tpu_slice_name
    if host.tpu_topology:
        env["TPU_TOPOLOGY"] = host.tpu_topology
    return env


def host_probe(env: dict[str, str]) -> HostProbe:
    """A probe in this process that sees what a process on the host with ``env`` sees."""
    table = env.get(SIMULATED_NVML_ENV_VAR)
    return HostProbe(
        root=env[HOST_ROOT_ENV_VAR],
        env=env,
        nvml_loader=(lambda: simulated_nvml(table)) if table else None,
    )


def simulated_nvml(table: str) -> ModuleType:
    """The ``pynvml`` stand-in answering from GPU table ``table`` (for a probe in this
    process; processes on a simulated host import it from ``PYTHONPATH``)."""
    name = f"simulated_pynvml_{zlib.crc32(table.encode()):08x}"
    spec = importlib.util.spec_from_file_location(name, STANDIN_PYTHON / "pynvml.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.table_path = table
    return module
