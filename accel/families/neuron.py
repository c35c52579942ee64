"""AWS Inferentia and Trainium NeuronCores, found with ``neuron-ls --json-output``.

The schedulable unit is the NeuronCore (Ray's ``neuron_cores``), numbered across the host as
``NEURON_RT_VISIBLE_CORES`` numbers them: ``neuroncore_ids`` where neuron-ls reports them (on
Trn2 these are logical cores, two physical cores each by default), else consecutive per
device. Each core's details name its Neuron device.

Trainium2 groups its eight physical NeuronCores into logical ones (Logical NeuronCore
configuration, LNC): two per logical core by default, so a chip exposes four (64 on
trn2.48xlarge). A process's ``NEURON_LOGICAL_NC_CONFIG`` (1 or 2) chooses; detection counts the
cores the node's workers will get under the node's setting (else the default), converting
from the LNC neuron-ls reports it counted with (``logical_neuroncore_config``). The catalog
promises the default (AWS Neuron docs, "Logical NeuronCore configuration").

The generation comes from the device's PCI id (Amazon ``0x1d0f``), else from the instance type
(neuron-ls's ``instance_type``, else DMI ``product_name``, which EC2 Nitro sets to e.g.
``trn1.32xlarge``). Unknown generations advertise only the generic ``aws-neuron-core``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from accel.families.base import AcceleratorFamily, Device, parse_id_ranges
from accel.families.sysfs import PCI_DEVICES, pci_device_id
from accel.families.tools import run_json
from accel.families.values import bytes_to_mib, parse_int, pci_address
from accel.family_rules import NEURON, NEURON_LNC_CHOICES, neuron_logical_cores

if TYPE_CHECKING:
    from accel.probe import HostProbe

NEURON_BIN_DIR = "/opt/aws/neuron/bin"
DMI_PRODUCT_NAME = "/sys/devices/virtual/dmi/id/product_name"
AMAZON_PCI_VENDOR_ID = 0x1D0F
GENERIC_TYPE = "aws-neuron-core"

NEURON_PCI_TYPES = {
    0x7064: "Inferentia",
    0x7065: "Inferentia",
    0x7066: "Inferentia",
    0x7067: "Inferentia",
    0x7164: "Trainium",
    0x7264: "Inferentia2",
    0x7364: "Trainium2",
    0x7564: "Trainium3",
    0x7565: "Trainium3",
}
"""Neuron driver PCI device ids (``neuron_device.h``) -> canonical type."""

INSTANCE_FAMILY_TYPES = {
    "inf1": "Inferentia",
    "inf2": "Inferentia2",
    "trn1": "Trainium",
    "trn1n": "Trainium",
    "trn2": "Trainium2",
    "trn2n": "Trainium2",
    "trn2u": "Trainium2",
    "trn3": "Trainium3",
}
"""EC2 instance family (``trn1`` of ``trn1.32xlarge``) -> canonical type."""

LNC_ENV_VAR = "NEURON_LOGICAL_NC_CONFIG"


def logical_cores(type_name: str | None, physical: int, env: Mapping[str, str]) -> int:
    """Logical NeuronCores of a device with ``physical`` cores under ``env``'s LNC setting
    (``NEURON_LOGICAL_NC_CONFIG``; the type's default when unset or invalid)."""
    return neuron_logical_cores(type_name, physical, parse_int(env.get(LNC_ENV_VAR)))


class AwsNeuron(AcceleratorFamily, rules=NEURON):
    def probe_devices(self, probe: HostProbe) -> list[Device]:
        neuron_devices = _neuron_ls(probe)
        if not neuron_devices:
            return []
        instance_type = _instance_type(probe, neuron_devices)
        cores: list[Device] = []
        for neuron_device in neuron_devices:
            cores.extend(_cores(probe, neuron_device, instance_type, first=len(cores)))
        return cores

    def visible_ids(self, env: Mapping[str, str]) -> list[str] | None:
        """``NEURON_RT_VISIBLE_CORES`` takes ranges (``0-3``) and lists (``0,2,5``)."""
        if self.visible_env_var not in env:
            return None
        return parse_id_ranges(env[self.visible_env_var])

    def visible_devices_env(
        self, ids: Sequence[str], node_device_count: int
    ) -> dict[str, str | None]:
        """A range (``4-7``) for consecutive cores, the form every runtime accepts; else a list."""
        return {self.visible_env_var: format_core_ids(ids)}


def format_core_ids(ids: Sequence[str]) -> str:
    """``["4", "5", "6", "7"]`` -> ``"4-7"``; anything not consecutive stays a comma list."""
    numbers = [n for i in ids if (n := parse_int(i)) is not None]
    consecutive = len(numbers) == len(ids) > 1 and numbers == list(
        range(numbers[0], numbers[0] + len(numbers))
    )
    return f"{numbers[0]}-{numbers[-1]}" if consecutive else ",".join(ids)


def _neuron_ls(probe: HostProbe) -> list[Mapping[str, Any]]:
    """neuron-ls's devices in device order; empty when it is missing, fails or talks nonsense."""
    data = run_json(probe, "neuron-ls", ("--json-output",), (NEURON_BIN_DIR,))
    if not isinstance(data, list):
        return []
    devices = [
        d for d in data if isinstance(d, dict) and parse_int(d.get("neuron_device")) is not None
    ]
    return sorted(devices, key=lambda d: parse_int(d["neuron_device"]))


def _instance_type(probe: HostProbe, neuron_devices: Sequence[Mapping[str, Any]]) -> str | None:
    for neuron_device in neuron_devices:
        if isinstance(neuron_device.get("instance_type"), str):
            return neuron_device["instance_type"].strip().lower() or None
    product = probe.read_text(DMI_PRODUCT_NAME)
    return product.strip().lower() if product and "." in product else None


def _cores(
    probe: HostProbe, neuron_device: Mapping[str, Any], instance_type: str | None, first: int
) -> list[Device]:
    bus_id = pci_address(neuron_device.get("bdf"))
    type_name = _type_name(probe, bus_id, instance_type)
    core_ids = _core_ids(neuron_device, first)
    reported_lnc = parse_int(neuron_device.get("logical_neuroncore_config"))
    if reported_lnc in NEURON_LNC_CHOICES:
        wanted = logical_cores(type_name, len(core_ids) * reported_lnc, probe.env)
        if wanted != len(core_ids):
            core_ids = list(range(first, first + wanted))
    memory = parse_int(neuron_device.get("memory_size"))
    details = _device_details(neuron_device, bus_id, instance_type, len(core_ids), memory)
    return [
        Device(
            index=first + position,
            id=str(core_id),
            model=f"AWS {type_name} NeuronCore" if type_name else "AWS NeuronCore",
            accelerator_type=type_name or GENERIC_TYPE,
            memory_mib=bytes_to_mib(memory // len(core_ids)) if memory else None,
            details={**details, "core_in_device": position},
        )
        for position, core_id in enumerate(core_ids)
    ]


def _core_ids(neuron_device: Mapping[str, Any], first: int) -> list[int]:
    """The device's ``neuroncore_ids``, else ``nc_count`` cores numbered on from ``first``."""
    count = parse_int(neuron_device.get("nc_count"))
    listed = neuron_device.get("neuroncore_ids")
    if isinstance(listed, list) and listed and count in (None, len(listed)):
        ids = [parse_int(core_id) for core_id in listed]
        if all(core_id is not None for core_id in ids):
            return ids
    return list(range(first, first + (count or 0)))


def _type_name(probe: HostProbe, bus_id: str | None, instance_type: str | None) -> str | None:
    if bus_id:
        found = NEURON_PCI_TYPES.get(
            pci_device_id(probe, f"{PCI_DEVICES}/{bus_id}", AMAZON_PCI_VENDOR_ID)
        )
        if found:
            return found
    family = (instance_type or "").split(".", 1)[0]
    return INSTANCE_FAMILY_TYPES.get(family)


def _device_details(
    neuron_device: Mapping[str, Any],
    bus_id: str | None,
    instance_type: str | None,
    count: int,
    memory: int | None,
) -> dict[str, Any]:
    details: dict[str, Any] = {
        "neuron_device": parse_int(neuron_device["neuron_device"]),
        "cores_per_device": count,
    }
    optional = {
        "pci_bus_id": bus_id,
        "device_memory_mib": bytes_to_mib(memory),
        "connected_devices": neuron_device.get("connected_to") or None,
        "logical_neuroncore_config": parse_int(neuron_device.get("logical_neuroncore_config")),
        "numa_node": neuron_device.get("numa_node"),
        "instance_type": instance_type,
    }
    details.update({key: value for key, value in optional.items() if value is not None})
    return details
