"""EC2 instance types from ``DescribeInstanceTypes`` records: every type, accelerator or not.

The bundled ``data/aws_instance_types.json`` holds the cloud's own records (the subset of
fields we use) and the zones offering each type; ``data/aws_overrides.yaml`` corrects known
errors in them. Everything here reads records in the API's own shape, so a live refresh and
the bundled snapshot go through the same code.

Zones are stored compactly: ``zone_sets`` lists each distinct ``{region: zone suffixes}`` map
once (``{"us-east-1": ["a", "b", "d"]}`` is us-east-1a, -1b and -1d) and ``zones`` gives each
type the index of its map; a few hundred maps cover well over a thousand types.
"""

from __future__ import annotations

import copy
import fnmatch
import json
from collections.abc import Iterable, Mapping
from dataclasses import replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from accel.family_rules import neuron_logical_cores
from accel.names import resolve_model
from instance_catalog.data import load_bundled_yaml
from instance_catalog.model import AWS, Accelerator, InstanceType, Price
from instance_catalog.prices import aws_prices

Record = dict[str, Any]

DATA_FILE = "aws_instance_types.json"
OVERRIDES_FILE = "aws_overrides.yaml"

ACCELERATOR_SECTIONS = (
    "NeuronInfo",
    "GpuInfo",
    "InferenceAcceleratorInfo",
    "FpgaInfo",
    "MediaAcceleratorInfo",
)
"""In the order they are read: an inf1/inf2 lists its chips under both Neuron and
InferenceAccelerator info, and only the first section that has devices counts."""

KEPT_FIELDS = ("InstanceType", "VCpuInfo", "MemoryInfo", *ACCELERATOR_SECTIONS)

MANUFACTURER_FAMILIES = {"nvidia": "nvidia", "amd": "amd", "habana": "gaudi", "intel": "gaudi"}
"""GpuInfo manufacturer -> the ``accel`` family that detects it (Gaudi is listed as a GPU)."""


def slim(record: Mapping[str, Any]) -> Record:
    """The fields of a ``DescribeInstanceTypes`` record the catalog uses."""
    kept = {key: record[key] for key in KEPT_FIELDS if key in record}
    kept["VCpuInfo"] = {"DefaultVCpus": record.get("VCpuInfo", {}).get("DefaultVCpus")}
    architectures = record.get("ProcessorInfo", {}).get("SupportedArchitectures")
    if architectures:
        kept["ProcessorInfo"] = {"SupportedArchitectures": architectures}
    network = record.get("NetworkInfo", {}).get("NetworkPerformance")
    if network:
        kept["NetworkInfo"] = {"NetworkPerformance": network}
    return kept


def encode_zones(zones: Mapping[str, Mapping[str, Iterable[str]]]) -> dict[str, Any]:
    """``{"zone_sets": [...], "zones": {name: index}}`` from ``{name: {region: [zone]}}``."""
    sets: dict[str, int] = {}
    index: dict[str, int] = {}
    for name, by_region in sorted(zones.items()):
        zone_set = {
            region: sorted(zone.removeprefix(region) for zone in found)
            for region, found in sorted(by_region.items())
        }
        key = json.dumps(zone_set)
        index[name] = sets.setdefault(key, len(sets))
    return {"zone_sets": [json.loads(key) for key in sets], "zones": index}


def decode_zones(snapshot: Mapping[str, Any]) -> dict[str, Mapping[str, tuple[str, ...]]]:
    """``{name: {region: (zone, ...)}}`` from :func:`encode_zones`' form (maps are shared)."""
    sets = [
        {region: tuple(region + suffix for suffix in suffixes) for region, suffixes in s.items()}
        for s in snapshot["zone_sets"]
    ]
    return {name: sets[position] for name, position in snapshot["zones"].items()}


def accelerator_of(record: Mapping[str, Any]) -> Accelerator | None:
    """The instance's accelerator, counted once, with its canonical type name."""
    neuron = record.get("NeuronInfo", {}).get("NeuronDevices") or []
    if neuron:
        device = neuron[0]
        accelerator = _accelerator(
            device["Name"],
            "AWS",
            device["Count"],
            device.get("MemoryInfo", {}).get("SizeInMiB"),
            family="neuron",
        )
        # The cloud counts physical NeuronCores; a node exposes logical ones (Trainium2: LNC 2).
        physical = device.get("CoreInfo", {}).get("Count")
        cores = neuron_logical_cores(accelerator.name, physical) if physical else None
        return replace(accelerator, cores_per_device=cores)
    gpus = record.get("GpuInfo", {}).get("Gpus") or []
    if gpus:
        return _gpu(gpus[0])
    for section, key in (
        ("InferenceAcceleratorInfo", "Accelerators"),
        ("FpgaInfo", "Fpgas"),
        ("MediaAcceleratorInfo", "Accelerators"),
    ):
        devices = record.get(section, {}).get(key) or []
        if devices:
            device = devices[0]
            return _accelerator(
                device["Name"],
                device.get("Manufacturer", ""),
                device["Count"],
                device.get("MemoryInfo", {}).get("SizeInMiB"),
            )
    return None


def _gpu(gpu: Mapping[str, Any]) -> Accelerator:
    manufacturer = gpu.get("Manufacturer", "")
    family = MANUFACTURER_FAMILIES.get(manufacturer.lower())
    partition = float(gpu.get("GpuPartitionSize", 1.0) or 1.0)
    memory = gpu.get("MemoryInfo", {}).get("SizeInMiB")
    if partition < 1:
        # A fraction of one GPU (g6f, gr6f): never a whole GPU of the type. It gets the
        # type's "-PARTITIONED" name, which has no generic parent, and a fractional count.
        whole = _canonical(gpu["Name"], family, None)
        return Accelerator(
            name=f"{whole}-PARTITIONED",
            manufacturer=manufacturer,
            count=partition * int(gpu.get("LogicalGpuCount", 1) or 1),
            memory_mib=memory,
            family=family,
            cloud_name=gpu["Name"],
        )
    return _accelerator(gpu["Name"], manufacturer, gpu["Count"], memory, family=family)


def _accelerator(
    cloud_name: str,
    manufacturer: str,
    count: float,
    memory_mib: int | None,
    family: str | None = None,
    cores: int | None = None,
) -> Accelerator:
    return Accelerator(
        name=_canonical(cloud_name, family, memory_mib),
        manufacturer=manufacturer,
        count=count,
        memory_mib=memory_mib,
        family=family,
        cores_per_device=cores,
        cloud_name=cloud_name,
    )


def _canonical(cloud_name: str, family: str | None, memory_mib: int | None) -> str:
    resolved = resolve_model(cloud_name, family=family, memory_mib=memory_mib)
    return resolved.name if resolved else cloud_name


def instance_type(
    record: Mapping[str, Any], zones: Mapping[str, tuple[str, ...]], prices: Mapping[str, Price]
) -> InstanceType:
    name = record["InstanceType"]
    return InstanceType(
        name=name,
        cloud=AWS,
        vcpus=int(record["VCpuInfo"]["DefaultVCpus"]),
        memory_mib=int(record["MemoryInfo"]["SizeInMiB"]),
        accelerator=accelerator_of(record),
        zones=zones,
        prices=prices,
        architectures=tuple(record.get("ProcessorInfo", {}).get("SupportedArchitectures", ())),
        network=record.get("NetworkInfo", {}).get("NetworkPerformance"),
    )


# The bundled (or refreshed) snapshot and its overrides -------------------------------
def snapshot_path() -> Path | None:
    """A user-refreshed snapshot (``autoscale catalog refresh``), if one exists."""
    from instance_catalog.user_catalog import user_catalog_dir

    path = user_catalog_dir() / DATA_FILE
    return path if path.exists() else None


@cache
def raw_snapshot() -> dict[str, Any]:
    """``{"source": ..., "instance_types": {name: record}, "zone_sets": ..., "zones": ...}``."""
    path = snapshot_path()
    if path is not None:
        return json.loads(path.read_text())
    return json.loads(resources.files("instance_catalog.data").joinpath(DATA_FILE).read_text())


@cache
def overrides() -> list[dict[str, Any]]:
    return load_bundled_yaml(OVERRIDES_FILE)


def apply_overrides(
    records: Mapping[str, Record],
    zones: Mapping[str, Mapping[str, tuple[str, ...]]],
    entries: Iterable[Mapping[str, Any]],
) -> tuple[dict[str, Record], dict[str, Mapping[str, tuple[str, ...]]]]:
    """Records and zones after the override file's corrections (the inputs are untouched).

    An entry names ``instance_type`` (a glob) and a ``reason``, then ``set`` (fields merged
    into the record), ``remove`` (fields dropped) or ``add`` (a whole record the source
    lacks, with ``regions``).
    """
    records, zones = dict(records), dict(zones)
    for entry in entries:
        pattern = entry["instance_type"]
        if "add" in entry:
            records[pattern] = {"InstanceType": pattern, **copy.deepcopy(entry["add"])}
            zones[pattern] = {region: () for region in entry.get("regions", [])}
            continue
        for name in _matching(records, pattern):
            record = copy.deepcopy(records[name])
            _merge(record, entry.get("set", {}))
            for field in entry.get("remove", []):
                record.pop(field, None)
            records[name] = record
    return records, zones


def _matching(records: Mapping[str, Record], pattern: str) -> list[str]:
    """The names ``pattern`` (a glob) matches; a plain name is looked up, not matched
    against every record (most entries name one type)."""
    if any(char in pattern for char in "*?["):
        return fnmatch.filter(records, pattern)
    return [pattern] if pattern in records else []


def _merge(target: dict[str, Any], changes: Mapping[str, Any]) -> None:
    for key, value in changes.items():
        if isinstance(value, Mapping) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


@cache
def corrected_records() -> tuple[dict[str, Record], dict[str, Mapping[str, tuple[str, ...]]]]:
    """The snapshot's records and zones with the overrides applied."""
    snapshot = raw_snapshot()
    return apply_overrides(snapshot["instance_types"], decode_zones(snapshot), overrides())


def aws_type_names() -> list[str]:
    """Every catalogued EC2 instance type's name."""
    return list(corrected_records()[0])


def aws_instance_type(name: str) -> InstanceType:
    """The catalogued EC2 instance type ``name`` (``KeyError`` when there is none)."""
    records, zones = corrected_records()
    return instance_type(records[name], zones.get(name, {}), aws_prices(name))


# Ray's per-family EC2 hooks ------------------------------------------------------------
def _record(instance_type: str, instances: Mapping[str, Mapping] | None) -> Mapping | None:
    return (instances if instances is not None else corrected_records()[0]).get(instance_type)


def get_ec2_num_accelerators(
    instance_type: str, instances: Mapping[str, Mapping] | None = None, family: str | None = None
) -> float | None:
    """Accelerators of ``family`` (any family when None) on an EC2 instance type.

    ``instances`` are ``DescribeInstanceTypes`` records by name (the bundled snapshot when
    None). Neuron counts NeuronCores, the unit its resource schedules.
    """
    record = _record(instance_type, instances)
    accelerator = accelerator_of(record) if record else None
    if accelerator is None or (family is not None and accelerator.family != family):
        return None
    if accelerator.family == "neuron":
        return accelerator.count * (accelerator.cores_per_device or 1)
    return accelerator.count


def get_ec2_accelerator_type(
    instance_type: str, instances: Mapping[str, Mapping] | None = None, family: str | None = None
) -> str | None:
    """Canonical accelerator type of an EC2 instance type (for ``family``, if given)."""
    record = _record(instance_type, instances)
    accelerator = accelerator_of(record) if record else None
    if accelerator is None or (family is not None and accelerator.family != family):
        return None
    return accelerator.name


def unresolved_accelerators(records: Mapping[str, Record]) -> list[tuple[str, str]]:
    """(instance type, cloud name) of accelerators with no canonical type name."""
    from accel.names import get

    found = []
    for name, record in records.items():
        accelerator = accelerator_of(record)
        if accelerator is not None and get(accelerator.name) is None:
            found.append((name, accelerator.cloud_name or accelerator.name))
    return found
