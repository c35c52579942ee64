"""Fake Google TPU hosts: device nodes, PCI sysfs, GKE variables and GCE metadata.

PCI ids are the real ones (Google vendor ``0x1ae0``; device ``0x0027`` v2/v3 told apart by
subsystem ``0x004e``/``0x004f``, ``0x005e`` v4, ``0x0062`` v5p, ``0x0063`` v5e, ``0x006f`` v6e,
``0x0076`` v7x), as tpu-info reads them. v2-v4 chips are ``/dev/accel<N>``; later generations are
``vfio-pci`` functions behind ``/dev/vfio/<iommu group>``.
"""

from __future__ import annotations

from collections.abc import Sequence

from tests.fakes.host import FakeHost
from tests.fakes.pci import add_pci_device, link_pci_device

GOOGLE_VENDOR = "0x1ae0"
TPU_PCI_IDS = {
    "v2": ("0x0027", "0x004e"),
    "v3": ("0x0027", "0x004f"),
    "v4": ("0x005e", "0x0000"),
    "v5p": ("0x0062", "0x0000"),
    "v5litepod": ("0x0063", "0x0000"),
    "v5e": ("0x0063", "0x0000"),
    "v6e": ("0x006f", "0x0000"),
    "v7x": ("0x0076", "0x0000"),
    "tpu7x": ("0x0076", "0x0000"),
}
ACCEL_NODE_GENERATIONS = ("v2", "v3", "v4")


def add_vfio_group(fake_host: FakeHost, group: int) -> None:
    """``/dev/vfio/<group>`` next to the ``/dev/vfio/vfio`` container node."""
    fake_host.write("/dev/vfio/vfio")
    fake_host.write(f"/dev/vfio/{group}")


def install_tpu_host(
    fake_host: FakeHost,
    accelerator_type: str = "v4-16",
    worker_id: int = 0,
    chips: int = 4,
    slice_name: str | None = "my-tpu",
    topology: str | None = None,
    via: str | None = "gke",
    worker_hostnames: Sequence[str] = (),
    first_group: int = 0,
    functions_per_chip: int = 1,
    pci: bool = True,
) -> None:
    """One host of a TPU slice.

    ``via`` says where the slice facts live: ``"gke"`` (``TPU_*`` variables), ``"gce"`` (the
    metadata server's instance attributes) or ``None``. ``pci=False`` leaves out the sysfs
    PCI tree (a container without ``/sys``), so only the device nodes remain.
    """
    generation = accelerator_type.split("-", 1)[0]
    device_id, subsystem = TPU_PCI_IDS[generation]
    for chip in range(chips):
        slot = f"0000:00:{4 + chip:02x}"
        if generation in ACCEL_NODE_GENERATIONS:
            _install_accel_chip(fake_host, chip, f"{slot}.0", device_id, subsystem, pci)
            continue
        for function in range(functions_per_chip):
            group = first_group + chip * functions_per_chip + function
            add_vfio_group(fake_host, group)
            if pci:
                add_pci_device(
                    fake_host, f"{slot}.{function}", GOOGLE_VENDOR, device_id, subsystem, group
                )
    if via == "gke":
        _gke_env(fake_host, accelerator_type, worker_id, slice_name, topology, worker_hostnames)
    elif via == "gce":
        _gce_metadata(fake_host, accelerator_type, worker_id, slice_name, topology)


def _install_accel_chip(
    fake_host: FakeHost, chip: int, bus_id: str, device_id: str, subsystem: str, pci: bool
) -> None:
    fake_host.write(f"/dev/accel{chip}")
    if pci:
        add_pci_device(fake_host, bus_id, GOOGLE_VENDOR, device_id, subsystem)
        link_pci_device(fake_host, f"/sys/class/accel/accel{chip}/device", bus_id)


def _gke_env(
    fake_host: FakeHost,
    accelerator_type: str,
    worker_id: int,
    slice_name: str | None,
    topology: str | None,
    worker_hostnames: Sequence[str],
) -> None:
    fake_host.env["TPU_ACCELERATOR_TYPE"] = accelerator_type
    fake_host.env["TPU_WORKER_ID"] = str(worker_id)
    if slice_name:
        fake_host.env["TPU_NAME"] = slice_name
    if topology:
        fake_host.env["TPU_TOPOLOGY"] = topology
    if worker_hostnames:
        fake_host.env["TPU_WORKER_HOSTNAMES"] = ",".join(worker_hostnames)


def _gce_metadata(
    fake_host: FakeHost,
    accelerator_type: str,
    worker_id: int,
    slice_name: str | None,
    topology: str | None,
) -> None:
    attributes = "instance/attributes"
    fake_host.metadata[f"{attributes}/accelerator-type"] = accelerator_type
    fake_host.metadata[f"{attributes}/agent-worker-number"] = str(worker_id)
    if slice_name:
        fake_host.metadata[f"{attributes}/instance-id"] = slice_name
    tpu_env = [
        f"ACCELERATOR_TYPE: '{accelerator_type}'",
        "CHIPS_PER_HOST_BOUNDS: '2,2,1'",
        f"WORKER_ID: '{worker_id}'",
        "ZONE: 'us-central2-b'",
    ]
    if topology:
        tpu_env.insert(2, f"TOPOLOGY: '{topology}'")
    fake_host.metadata[f"{attributes}/tpu-env"] = "\n".join(tpu_env) + "\n"
