"""Google TPU chips, found the way libtpu and Ray find them.

v2 to v4 chips are character devices ``/dev/accel<N>``. v5e, v5p, v6e and v7x chips are PCI
functions bound to ``vfio-pci``: ``/dev/vfio/<group>`` for each IOMMU group, and a group is a TPU
only when ``/sys/kernel/iommu_groups/<group>/devices/*`` names a Google (``0x1ae0``) device with
a TPU device id (other ``vfio-pci`` devices, e.g. a BlueField management function, also
appear in ``/dev/vfio``). The generation comes from the PCI device id, else from the pod type.

The slice (pod type, worker id, name, topology) comes from the GKE variables first, then from
the GCE metadata server, which is only asked once chips were found on the host.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from accel.families.base import AcceleratorFamily, Device
from accel.families.sysfs import PCI_DEVICES, linked_pci_address, numbered_nodes, read_hex
from accel.families.values import parse_int
from accel.family_rules import TPU
from accel.tpu_generations import (
    GOOGLE_PCI_VENDOR_ID,
    PodType,
    TpuGeneration,
    generation_for_pci,
    parse_pod_type,
)

if TYPE_CHECKING:
    from accel.probe import HostProbe

CHIPS_PER_HOST_BOUNDS_VAR = "TPU_CHIPS_PER_HOST_BOUNDS"
HOST_BOUNDS_VAR = "TPU_HOST_BOUNDS"
SINGLE_HOST_BOUNDS = "1,1,1"
SUB_HOST_CHIP_BOUNDS = {1: "1,1,1", 2: "1,2,1", 4: "2,2,1"}
"""TPU_CHIPS_PER_HOST_BOUNDS for a worker given part of a host (see jax issue 14977)."""

# GKE sets these in TPU pods; GCE TPU VMs publish the same facts as instance attributes.
GKE_ACCELERATOR_TYPE_VAR = "TPU_ACCELERATOR_TYPE"
GKE_WORKER_ID_VAR = "TPU_WORKER_ID"
GKE_NAME_VAR = "TPU_NAME"
GKE_TOPOLOGY_VAR = "TPU_TOPOLOGY"
GKE_WORKER_HOSTNAMES_VAR = "TPU_WORKER_HOSTNAMES"
GCE_ACCELERATOR_TYPE_KEY = "instance/attributes/accelerator-type"
GCE_WORKER_ID_KEY = "instance/attributes/agent-worker-number"
GCE_NAME_KEY = "instance/attributes/instance-id"
GCE_TPU_ENV_KEY = "instance/attributes/tpu-env"

# Ray's node label keys, so label selectors written for Ray keep working.
LABEL_POD_TYPE = "ray.io/tpu-pod-type"
LABEL_WORKER_ID = "ray.io/tpu-worker-id"
LABEL_SLICE_NAME = "ray.io/tpu-slice-name"
LABEL_TOPOLOGY = "ray.io/tpu-topology"
LABEL_CHIPS_PER_HOST = "tpu-chips-per-host"
LABEL_WORKER_COUNT = "tpu-worker-count"

_TPU_ENV_TOPOLOGY = re.compile(r"^TOPOLOGY:\s*'?([0-9x]+)'?\s*$", re.MULTILINE)
_PCI_BASE = re.compile(r"^(.*)\.\d+$")


@dataclass(frozen=True)
class _Chip:
    device_path: str
    pci_bus_ids: tuple[str, ...]
    generation: TpuGeneration | None
    pci_device_id: str | None
    accel_number: int | None = None
    """``N`` of ``/dev/accel<N>``, the chip's id; vfio chips are numbered by position."""


@dataclass(frozen=True)
class TpuSlice:
    """What this host knows about the slice it belongs to."""

    pod_type: PodType | None
    worker_id: int | None
    name: str | None
    topology: str | None
    worker_hostnames: tuple[str, ...] = ()


class GoogleTpu(AcceleratorFamily, rules=TPU):
    # Detection ------------------------------------------------------------------------
    def probe_devices(self, probe: HostProbe) -> list[Device]:
        chips = _accel_chips(probe) or _vfio_chips(probe)
        if not chips:
            return []
        fallback = None
        if any(chip.generation is None for chip in chips):
            pod_type = parse_pod_type(
                _gke_or_gce(probe, GKE_ACCELERATOR_TYPE_VAR, GCE_ACCELERATOR_TYPE_KEY)
            )
            fallback = pod_type.generation if pod_type else None
        return [
            _device(position, chip, chip.generation or fallback)
            for position, chip in enumerate(chips)
        ]

    def extra_resources(
        self, probe: HostProbe, devices: Sequence[Device]
    ) -> tuple[dict[str, float], dict[str, str]]:
        """The slice-name resource on every host and ``TPU-<pod type>-head`` on worker 0.

        As in Ray, both need the pod type, the worker id and the slice name; the labels carry
        whatever is known.
        """
        tpu_slice = read_slice(probe)
        pod_type = tpu_slice.pod_type
        resources: dict[str, float] = {}
        if pod_type and tpu_slice.name and tpu_slice.worker_id is not None:
            resources[tpu_slice.name] = 1.0
            if tpu_slice.worker_id == 0:
                resources[f"TPU-{pod_type.name}-head"] = 1.0
        return resources, _labels(tpu_slice, len(devices))

    # Requests and workers --------------------------------------------------------------
    def visible_devices_env(
        self, ids: Sequence[str], node_device_count: int
    ) -> dict[str, str | None]:
        """TPU_VISIBLE_CHIPS, plus the chip and host bounds libtpu needs for part of a host.

        A worker given every chip of the host keeps libtpu's default bounds (unset).
        """
        env: dict[str, str | None] = {self.visible_env_var: ",".join(ids)}
        bounds = None if len(ids) >= node_device_count else SUB_HOST_CHIP_BOUNDS.get(len(ids))
        env[CHIPS_PER_HOST_BOUNDS_VAR] = bounds
        env[HOST_BOUNDS_VAR] = SINGLE_HOST_BOUNDS if bounds else None
        return env


def read_slice(probe: HostProbe) -> TpuSlice:
    """The host's slice from the GKE variables, else the GCE metadata server."""
    worker_id = _gke_or_gce(probe, GKE_WORKER_ID_VAR, GCE_WORKER_ID_KEY)
    hostnames = probe.env.get(GKE_WORKER_HOSTNAMES_VAR, "")
    return TpuSlice(
        pod_type=parse_pod_type(
            _gke_or_gce(probe, GKE_ACCELERATOR_TYPE_VAR, GCE_ACCELERATOR_TYPE_KEY)
        ),
        worker_id=parse_int(worker_id),
        name=_gke_or_gce(probe, GKE_NAME_VAR, GCE_NAME_KEY),
        topology=_topology(probe),
        worker_hostnames=tuple(h.strip() for h in hostnames.split(",") if h.strip()),
    )


def _gke_or_gce(probe: HostProbe, env_var: str, metadata_key: str) -> str | None:
    value = probe.env.get(env_var, "").strip()
    if value:
        return value
    return (probe.gce_metadata(metadata_key) or "").strip() or None


def _topology(probe: HostProbe) -> str | None:
    topology = probe.env.get(GKE_TOPOLOGY_VAR, "").strip()
    if topology:
        return topology.lower()
    match = _TPU_ENV_TOPOLOGY.search(probe.gce_metadata(GCE_TPU_ENV_KEY) or "")
    return match.group(1).lower() if match else None


def _labels(tpu_slice: TpuSlice, device_count: int) -> dict[str, str]:
    pod_type = tpu_slice.pod_type
    labels = {
        LABEL_POD_TYPE: pod_type.name if pod_type else None,
        LABEL_WORKER_ID: None if tpu_slice.worker_id is None else str(tpu_slice.worker_id),
        LABEL_SLICE_NAME: tpu_slice.name,
        LABEL_TOPOLOGY: tpu_slice.topology,
        LABEL_CHIPS_PER_HOST: str(pod_type.chips_per_host if pod_type else device_count),
    }
    workers = len(tpu_slice.worker_hostnames) or (pod_type.hosts if pod_type else 0)
    if workers:
        labels[LABEL_WORKER_COUNT] = str(workers)
    return {key: value for key, value in labels.items() if value}


# Chip discovery ---------------------------------------------------------------------
def _accel_chips(probe: HostProbe) -> list[_Chip]:
    """``/dev/accel<N>`` character devices (v2-v4).

    ``/dev/accel/`` as a *directory* is the kernel's compute-accelerator subsystem (Gaudi,
    NVIDIA 570+ drivers, Intel NPU), not a TPU; a node whose PCI function is not Google's is
    skipped too.
    """
    chips: list[_Chip] = []
    for number, name in numbered_nodes(probe, "/dev", "accel"):
        if probe.is_dir(f"/dev/{name}"):
            continue
        pci_dir = f"/sys/class/accel/{name}/device"
        vendor = read_hex(probe, f"{pci_dir}/vendor")
        if vendor is not None and vendor != GOOGLE_PCI_VENDOR_ID:
            continue
        bus_id = linked_pci_address(probe, pci_dir) if vendor else None
        bus_ids = (bus_id,) if bus_id else ()
        chips.append(_pci_chip(probe, f"/dev/{name}", pci_dir, bus_ids, accel_number=number))
    return chips


def _vfio_chips(probe: HostProbe) -> list[_Chip]:
    """Google TPU functions behind ``/dev/vfio/<group>`` (v5e, v5p, v6e, v7x).

    Functions sharing a PCI slot (``0000:00:04.0`` and ``.1``) are one chip.
    """
    by_slot: dict[str, list[tuple[int, str]]] = {}
    for group, _ in numbered_nodes(probe, "/dev/vfio"):
        for bus_id in probe.listdir(f"/sys/kernel/iommu_groups/{group}/devices"):
            if read_hex(probe, f"{PCI_DEVICES}/{bus_id}/vendor") == GOOGLE_PCI_VENDOR_ID:
                slot = _PCI_BASE.sub(r"\1", bus_id)
                by_slot.setdefault(slot, []).append((group, bus_id))
    chips: dict[int, _Chip] = {}
    for functions in by_slot.values():
        group = min(g for g, _ in functions)
        bus_ids = tuple(sorted(bus_id for _, bus_id in functions))
        pci_dir = f"{PCI_DEVICES}/{bus_ids[0]}"
        chips[group] = _pci_chip(probe, f"/dev/vfio/{group}", pci_dir, bus_ids)
    return [chips[group] for group in sorted(chips)]


def _pci_chip(
    probe: HostProbe,
    path: str,
    pci_dir: str,
    bus_ids: tuple[str, ...],
    accel_number: int | None = None,
) -> _Chip:
    device_id = probe.read_text(f"{pci_dir}/device")
    gen = None
    if device_id:
        gen = generation_for_pci(device_id, probe.read_text(f"{pci_dir}/subsystem_device"))
    return _Chip(path, bus_ids, gen, device_id.lower() if device_id else None, accel_number)


def _device(position: int, chip: _Chip, gen: TpuGeneration | None) -> Device:
    details: dict[str, object] = {"device_path": chip.device_path}
    if chip.pci_bus_ids:
        details["pci_bus_id"] = chip.pci_bus_ids[0]
    if len(chip.pci_bus_ids) > 1:
        details["pci_functions"] = list(chip.pci_bus_ids)
    if chip.pci_device_id:
        details["pci_device_id"] = chip.pci_device_id
    if gen:
        details["cores_per_chip"] = gen.cores_per_chip
    return Device(
        index=position,
        id=str(position if chip.accel_number is None else chip.accel_number),
        model=f"TPU {gen.name}" if gen else "Google TPU",
        accelerator_type=gen.accelerator_type if gen else None,
        memory_mib=gen.hbm_gib * 1024 if gen else None,
        details=details,
    )
