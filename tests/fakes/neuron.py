"""Fake AWS Inferentia / Trainium hosts: ``neuron-ls --json-output``, PCI sysfs and DMI.

The JSON follows what aws-neuronx-tools prints: a list with one object per Neuron device
(``neuron_device``, ``bdf``, ``connected_to`` (null on single-device hosts), ``nc_count``,
``memory_size`` in bytes, ``neuroncore_ids``...). Newer tools add ``instance_type``,
``instance_id``, ``cpu_affinity``, ``numa_node`` and, on Trn2, ``logical_neuroncore_config``;
``modern=False`` writes the older, shorter shape (no instance type, short ``bdf``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.fakes.host import FakeHost
from tests.fakes.pci import add_pci_device

AMAZON_VENDOR = "0x1d0f"
GIB = 2**30


@dataclass(frozen=True)
class NeuronInstance:
    devices: int
    cores_per_device: int
    device_memory_gib: int
    pci_device_id: str
    logical_neuroncore_config: int | None = None


INSTANCES = {
    "inf1.xlarge": NeuronInstance(1, 4, 8, "0x7064"),
    "inf1.6xlarge": NeuronInstance(4, 4, 8, "0x7064"),
    "inf1.24xlarge": NeuronInstance(16, 4, 8, "0x7064"),
    "inf2.xlarge": NeuronInstance(1, 2, 32, "0x7264"),
    "inf2.24xlarge": NeuronInstance(6, 2, 32, "0x7264"),
    "inf2.48xlarge": NeuronInstance(12, 2, 32, "0x7264"),
    "trn1.2xlarge": NeuronInstance(1, 2, 32, "0x7164"),
    "trn1.32xlarge": NeuronInstance(16, 2, 32, "0x7164"),
    "trn1n.32xlarge": NeuronInstance(16, 2, 32, "0x7164"),
    "trn2.3xlarge": NeuronInstance(1, 4, 96, "0x7364", logical_neuroncore_config=2),
    "trn2.48xlarge": NeuronInstance(16, 4, 96, "0x7364", logical_neuroncore_config=2),
}
"""Per instance type: devices, (logical) cores per device, memory per device, PCI id."""


def neuron_ls_json(instance_type: str = "trn1.32xlarge", modern: bool = True) -> list[dict]:
    """What ``neuron-ls --json-output`` prints on ``instance_type``."""
    spec = INSTANCES[instance_type]
    devices = []
    for index in range(spec.devices):
        bus = f"{0x10 + index:02x}:1e.0"
        entry: dict[str, Any] = {
            "neuron_device": index,
            "bdf": f"0000:{bus}" if modern else bus,
            "connected_to": _torus_neighbours(index, spec.devices),
            "nc_count": spec.cores_per_device,
            "memory_size": spec.device_memory_gib * GIB,
            "neuroncore_ids": [
                index * spec.cores_per_device + core for core in range(spec.cores_per_device)
            ],
            "neuron_processes": [],
        }
        if modern:
            entry = {
                "instance_type": instance_type,
                "instance_id": "i-0dcf246b9a7d5f066",
                **entry,
                "cpu_affinity": "0-63,128-191" if index < spec.devices // 2 else "64-127,192-255",
                "numa_node": "0" if index < spec.devices // 2 else "1",
            }
            if spec.logical_neuroncore_config:
                entry["logical_neuroncore_config"] = spec.logical_neuroncore_config
        else:
            del entry["neuroncore_ids"]
        devices.append(entry)
    return devices


def install_neuron(
    fake_host: FakeHost,
    instance_type: str = "trn1.32xlarge",
    modern: bool = True,
    pci: bool = True,
    dmi: bool = True,
    install_dir: str = "/opt/aws/neuron/bin",
) -> list[dict]:
    """A Neuron host: neuron-ls in ``install_dir``, PCI functions and the DMI product name."""
    payload = neuron_ls_json(instance_type, modern)
    fake_host.command("neuron-ls", payload, install_dir=install_dir)
    spec = INSTANCES[instance_type]
    if pci:
        for entry in payload:
            bus_id = entry["bdf"] if modern else f"0000:{entry['bdf']}"
            add_pci_device(fake_host, bus_id, AMAZON_VENDOR, spec.pci_device_id, "0x0000")
    if dmi:
        fake_host.write("/sys/devices/virtual/dmi/id/product_name", instance_type)
        fake_host.write("/sys/devices/virtual/dmi/id/sys_vendor", "Amazon EC2")
    return payload


def _torus_neighbours(index: int, count: int) -> list[int] | None:
    """Neighbours on the 2D torus of 16-device hosts, a ring otherwise; null when alone."""
    if count == 1:
        return None
    if count == 16:
        row, col = divmod(index, 4)
        return [
            ((row - 1) % 4) * 4 + col,
            row * 4 + (col + 1) % 4,
            ((row + 1) % 4) * 4 + col,
            row * 4 + (col - 1) % 4,
        ]
    return sorted({(index - 1) % count, (index + 1) % count})
