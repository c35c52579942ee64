"""GCP instance types: Compute Engine machine types and Cloud TPU slice types.

Facts come from ``data/gcp.yaml`` (see its header for the Google pages they were taken from),
zones from a snapshot of Google's API answers (the user's ``autoscale catalog refresh --cloud
gcp``, else the bundled ``data/gcp_compute_snapshot.json`` with ``data/gcp_overrides.yaml``; TPU
generations it lacks keep their zones from Google's pages), prices from
``instance_catalog.prices.gcp_prices``:

* CPU machine types: the ``machine`` price.
* Machine types with built-in GPUs (A2, A3, A4, G2, G4): Google bills the VM and its GPUs as
  separate SKUs, so the price is the ``machine`` price plus ``count`` times the ``gpu`` price
  of the built-in GPU, in each region where both are known.
* N1 types list the GPUs that can be attached (``attachable_gpus``); the attached GPUs' price
  is :func:`attached_gpu_price`, on top of the N1 price.
* TPU slice types: the ``tpu`` price of the whole slice, by its normalised name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import cache, partial
from importlib import resources

from accel.names import get as get_accelerator_type
from accel.names import resolve_model
from accel.tpu_generations import TpuGeneration, generation
from instance_catalog.built_on_demand import BuiltOnDemand
from instance_catalog.data import load_bundled_yaml
from instance_catalog.model import (
    GCP,
    Accelerator,
    GpuAttachment,
    InstanceType,
    Price,
    TpuSlice,
)
from instance_catalog.prices import gcp_price_regions, gcp_prices
from instance_catalog.tpu import gcp_data, host_shape, tpu_slice, tpu_slice_types, tpu_zones

NVIDIA = "NVIDIA"
GOOGLE = "Google"


def _mib(gb: float) -> int:
    """GCE "GB" are GiB."""
    return round(gb * 1024)


def _regions(
    prices: Mapping[str, Price], name: str | None = None, table: str = "machine_types"
) -> dict[str, tuple[str, ...]]:
    """Regions with a price, each with its zones where the snapshot has them."""
    known = {
        r: tuple(z) for r, z in _snapshot().get(table, {}).get(name, {}).get("zones", {}).items()
    }
    return {region: known.get(region, ()) for region in sorted({*prices, *known})}


def zones_from_api(name: str | None = None, table: str = "machine_types") -> bool:
    """Whether zone facts come from Google's API answers (the user's refreshed snapshot, else
    the bundled recording of one), not from its pages; with ``name``, whether they do for that
    entry of ``table`` (``machine_types``, ``accelerator_types``, ``tpu_accelerator_types``)."""
    snapshot = _snapshot()
    if name is None:
        return bool(snapshot.get("machine_types"))
    return bool(snapshot.get(table, {}).get(name, {}).get("zones"))


@cache
def zone_fact_regions(table: str = "machine_types") -> frozenset[str] | None:
    """Regions the snapshot's ``table`` speaks for (any entry has zones there); None without
    a snapshot. Elsewhere (a region the recording's project could not see, such as the
    restricted Cloud TPU region us-central2 for Compute Engine) zones are unknown. Cached
    as the snapshot is (asked once per node type, it read every entry each time)."""
    entries = _snapshot().get(table)
    if not entries:
        return None
    return frozenset(region for facts in entries.values() for region in facts.get("zones", {}))


def snapshot_source() -> str:
    """Where the zone facts in use come from."""
    return str(_snapshot().get("source", "Google's pages (data/gcp.yaml)"))


def _snapshot() -> dict:
    """The user's refreshed snapshot if there is one, else the bundled one."""
    return _refreshed() or _bundled()


@cache
def _refreshed() -> dict:
    """The user's ``gcp_compute.json`` from ``autoscale catalog refresh --cloud gcp``, if any."""
    import json

    from instance_catalog.gcp_refresh import SNAPSHOT_FILE, unpack_snapshot
    from instance_catalog.user_catalog import user_catalog_dir

    path = user_catalog_dir() / SNAPSHOT_FILE
    try:
        return unpack_snapshot(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {}


OVERRIDES_FILE = "gcp_overrides.yaml"


@cache
def gcp_overrides() -> dict:
    """The parsed ``data/gcp_overrides.yaml`` (do not mutate)."""
    return load_bundled_yaml(OVERRIDES_FILE) or {}


@cache
def _bundled() -> dict:
    """``data/gcp_compute_snapshot.json`` with ``data/gcp_overrides.yaml``'s corrections."""
    import json

    from instance_catalog.gcp_refresh import BUNDLED_SNAPSHOT, unpack_snapshot

    try:
        text = resources.files("instance_catalog.data").joinpath(BUNDLED_SNAPSHOT).read_text()
    except OSError:
        return {}
    snapshot = unpack_snapshot(json.loads(text))
    for fix in gcp_overrides().get("corrections", ()):
        table, name = next(
            (t, fix[k])
            for k, t in (
                ("machine_type", "machine_types"),
                ("accelerator_type", "accelerator_types"),
                ("tpu_type", "tpu_accelerator_types"),
            )
            if k in fix
        )
        entry = snapshot[table].get(name)
        if entry is None:
            continue
        drop = set(fix.get("remove_zones", ()))
        zones = {r: [z for z in names if z not in drop] for r, names in entry["zones"].items()}
        snapshot[table][name] = {**entry, "zones": {r: z for r, z in zones.items() if z}}
    return snapshot


# GPUs -----------------------------------------------------------------------------------------
def canonical_gpu_name(gce_name: str) -> str:
    """Canonical type (``accel.names``) of a GCE accelerator type; the GCE name if unknown."""
    facts = gcp_data()["gpus"].get(gce_name, {})
    canonical = facts.get("canonical")
    if canonical and get_accelerator_type(canonical) is not None:
        return canonical
    memory = _mib(facts["memory_gb"]) if "memory_gb" in facts else None
    resolved = resolve_model(gce_name.replace("-", " "), family="nvidia", memory_mib=memory)
    return resolved.name if resolved else gce_name


def gpu_accelerator(gce_name: str, count: float) -> Accelerator:
    """The Accelerator record of ``count`` GPUs of GCE type ``gce_name``."""
    facts = gcp_data()["gpus"].get(gce_name, {})
    memory = facts.get("memory_gb")
    return Accelerator(
        name=canonical_gpu_name(gce_name),
        manufacturer=NVIDIA,
        count=count,
        memory_mib=_mib(memory) if memory is not None else None,
        family="nvidia",
        cloud_name=gce_name,
    )


@cache
def _gce_gpu_names() -> dict[str, str]:
    """Canonical or GCE spelling (lower case) -> GCE accelerator type."""
    index: dict[str, str] = {}
    for gce_name in gcp_data()["gpus"]:
        index.setdefault(gce_name.lower(), gce_name)
    for gce_name in gcp_data()["n1_attachable_gpus"]:
        index.setdefault(canonical_gpu_name(gce_name).lower(), gce_name)
    return index


def attached_gpu_price(
    gpu_name: str | None, count: int, region: str | None = None, spot: bool = False
) -> float | None:
    """Hourly price of ``count`` GPUs attached to an N1 VM (``nvidia-tesla-t4`` or ``T4``).

    ``region`` None gives the cheapest region's. None when the price is unknown.
    """
    if not gpu_name:
        return None
    gce_name = _gce_gpu_names().get(gpu_name.lower(), gpu_name)
    per_region = gcp_prices("gpu", gce_name)
    candidates = list(per_region.values()) if region is None else [per_region.get(region)]
    values = [getattr(p, "spot" if spot else "on_demand") for p in candidates if p is not None]
    known = [v for v in values if v is not None]
    return min(known) * count if known else None


def _with_gpus(machine: Price, gpu: Price | None, count: int) -> Price:
    def add(host: float | None, each: float | None) -> float | None:
        return None if host is None or each is None else host + each * count

    if gpu is None:
        return Price(None, None)
    return replace(
        machine,
        on_demand=add(machine.on_demand, gpu.on_demand),
        spot=add(machine.spot, gpu.spot),
        note="; ".join(note for note in (machine.note, gpu.note) if note) or None,
    )


# Machine types --------------------------------------------------------------------------------
def _gpu_machine_type(
    name: str, vcpus: int, memory_gb: float, gce_gpu: str, count: int
) -> InstanceType:
    per_gpu = gcp_prices("gpu", gce_gpu)
    prices = {
        region: _with_gpus(p, per_gpu.get(region), count)
        for region, p in gcp_prices("machine", name).items()
    }
    return InstanceType(
        name=name,
        cloud=GCP,
        vcpus=vcpus,
        memory_mib=_mib(memory_gb),
        accelerator=gpu_accelerator(gce_gpu, count),
        zones=_regions(prices, name),
        prices=prices,
    )


def _cpu_shapes() -> dict[str, tuple[int, float]]:
    """Machine type name -> (vCPUs, memory GB) of every CPU machine type."""
    data = gcp_data()
    shapes: dict[str, tuple[int, float]] = {}
    for family, facts in data["cpu_families"].items():
        irregular = facts.get("memory_gb", {})
        for vcpus in facts["vcpus"]:
            memory = irregular.get(vcpus, vcpus * facts["memory_gb_per_vcpu"])
            shapes[f"{family}-{vcpus}"] = (vcpus, memory)
    for name, (vcpus, memory) in data.get("extra_machine_types", {}).items():
        shapes[name] = (vcpus, memory)
    gpu_hosts = data["gpu_machine_types"]
    for name, facts in _snapshot().get("machine_types", {}).items():
        # Families the page-derived table lacks (N4, T2D, C2D, M1...): Google's own answer.
        if name not in shapes and name not in gpu_hosts and not facts.get("accelerators"):
            shapes[name] = (int(facts["guestCpus"]), facts["memoryMb"] / 1024)
    return shapes


def n1_gpu_counts(gce_gpu: str, vcpus: int, memory_gb: float) -> tuple[int, ...]:
    """GPU counts of ``gce_gpu`` allowed on an N1 host of that size (empty if none)."""
    rules = gcp_data()["n1_attachable_gpus"].get(gce_gpu, [])
    return tuple(
        rule["count"]
        for rule in rules
        if vcpus <= rule["max_vcpus"] and memory_gb <= rule["max_memory_gb"]
    )


def _attachable(name: str, vcpus: int, memory_gb: float) -> tuple[GpuAttachment, ...]:
    data = gcp_data()
    if not any(name.startswith(f"{family}-") for family in data["n1_gpu_hosts"]):
        return ()
    return _n1_attachments(vcpus, memory_gb)


def _n1_attachments(vcpus: int, memory_gb: float) -> tuple[GpuAttachment, ...]:
    data = gcp_data()
    attachments = []
    for gce_gpu in data["n1_attachable_gpus"]:
        counts = n1_gpu_counts(gce_gpu, vcpus, memory_gb)
        if counts:
            retired = not_launchable("gpus").get(gce_gpu)
            attachments.append(GpuAttachment(gpu_accelerator(gce_gpu, 1), counts, retired))
    return tuple(attachments)


def _cpu_machine_type(name: str, vcpus: int, memory_gb: float) -> InstanceType:
    prices = gcp_prices("machine", name)
    return InstanceType(
        name=name,
        cloud=GCP,
        vcpus=vcpus,
        memory_mib=_mib(memory_gb),
        zones=_regions(prices, name),
        prices=dict(prices),
        attachable_gpus=_attachable(name, vcpus, memory_gb),
    )


_CUSTOM = re.compile(r"^(?:(?P<family>[a-z0-9]+)-)?custom-(?P<vcpus>\d+)-(?P<memory>\d+)(-ext)?$")


def custom_machine_type(name: str) -> InstanceType | None:
    """A custom machine type (``custom-6-16384``, ``n2-custom-8-32768``: vCPUs and MiB); an
    N1 one (no family prefix, or ``n1-``) takes attached GPUs. No catalog price: custom
    shapes are billed per vCPU and GB, so the node type needs ``cost_per_hour``."""
    match = _CUSTOM.match(name)
    if match is None:
        return None
    vcpus, memory_mib = int(match["vcpus"]), int(match["memory"])
    n1 = match["family"] in (None, "n1")
    return InstanceType(
        name=name,
        cloud=GCP,
        vcpus=vcpus,
        memory_mib=memory_mib,
        attachable_gpus=_n1_attachments(vcpus, memory_mib / 1024) if n1 else (),
    )


# TPU slice types ------------------------------------------------------------------------------
def _tpu_type(pod_name: str, shape: TpuSlice, gen: TpuGeneration, host: dict) -> InstanceType:
    prices = dict(gcp_prices("tpu", pod_name))
    if zones_from_api(pod_name, "tpu_accelerator_types"):
        zones = _regions(prices, pod_name, "tpu_accelerator_types")
    else:  # the generation's zones from Google's pages
        zones = {**_regions(prices), **tpu_zones(gen.name)}
    return InstanceType(
        name=pod_name,
        cloud=GCP,
        vcpus=host["vcpus"],
        memory_mib=_mib(host["memory_gb"]),
        accelerator=Accelerator(
            name=gen.accelerator_type,
            manufacturer=GOOGLE,
            count=shape.chips_per_host,
            memory_mib=gen.hbm_gib * 1024,
            family="tpu",
            cores_per_device=gen.cores_per_chip,
        ),
        zones=dict(sorted(zones.items())),
        prices=prices,
        tpu=shape,
        unavailable=not_launchable("tpu_generations").get(gen.name),
    )


def _tpu_builders() -> dict[str, Callable[[], InstanceType]]:
    """Published slice types whose generation and host VM are known."""
    builders = {}
    for pod_name in tpu_slice_types():
        shape = tpu_slice(pod_name)
        gen = generation(shape.generation) if shape else None
        host = host_shape(shape.generation, shape.chips_per_host) if shape else None
        if shape is not None and gen is not None and host is not None:
            builders[pod_name] = partial(_tpu_type, pod_name, shape, gen, host)
    return builders


def not_launchable(kind: str) -> dict[str, str]:
    """Name -> why it cannot be launched, for ``tpu_generations`` or ``gpus`` (gcp.yaml)."""
    return {
        name: " ".join(reason.split())
        for name, reason in gcp_data().get("not_launchable", {}).get(kind, {}).items()
    }


@cache
def _all_types() -> BuiltOnDemand:
    """Every catalogued type by name (GPU machine types, CPU ones, TPU slices), each built
    when first looked up."""
    builders: dict[str, Callable[[], InstanceType]] = {
        **{
            name: partial(_gpu_machine_type, name, *facts)
            for name, facts in gcp_data()["gpu_machine_types"].items()
        },
        **{name: partial(_cpu_machine_type, name, *shape) for name, shape in _cpu_shapes().items()},
        **_tpu_builders(),
    }
    return BuiltOnDemand(builders, lambda name: builders[name]())


def gcp_types_by_name() -> Mapping[str, InstanceType]:
    """Every catalogued GCE machine type and Cloud TPU slice type, by name."""
    return _all_types()


def gcp_instance_types() -> list[InstanceType]:
    """Every catalogued GCE machine type and Cloud TPU slice type."""
    return list(_all_types().values())


ZONE_TABLES = ("machine_types", "accelerator_types", "tpu_accelerator_types")
"""The snapshot's tables that list zones."""


@cache
def known_regions() -> frozenset[str]:
    """Every region the catalog knows: those with a price, and those of its zone lists (the
    snapshot's, and each TPU generation's). These are the regions of every type it builds,
    read from the data: building every type to read its regions was most of the time a
    GCP cluster config took to load."""
    listed = {
        region
        for table in ZONE_TABLES
        for facts in _snapshot().get(table, {}).values()
        for region in facts.get("zones", {})
    }
    listed.update(
        region for facts in gcp_data()["tpu"].values() for region in facts.get("zones", {})
    )
    return gcp_price_regions() | listed


def accelerator_zones(gce_name: str) -> dict[str, tuple[str, ...]]:
    """Region -> zones offering the GCE accelerator type: those of the machine types it is
    built into, or (attachable N1 GPUs) the regions with its price (zones unknown)."""
    zones: dict[str, set[str]] = {}
    types = _all_types()
    for name, (_, _, built_in, _) in gcp_data()["gpu_machine_types"].items():
        if built_in == gce_name:  # only these types carry a GCE accelerator
            for region, names in types[name].zones.items():
                zones.setdefault(region, set()).update(names)
    for region, names in _regions(
        gcp_prices("gpu", gce_name), gce_name, "accelerator_types"
    ).items():
        zones.setdefault(region, set()).update(names)
    return {region: tuple(sorted(names)) for region, names in sorted(zones.items())}


EMULATED_ZONE_LETTERS = ("a", "b", "c")
"""Zones the embedded Compute Engine serves in a region whose zones the catalog lacks."""


def compute_zone_tables() -> tuple[dict[str, dict[str, dict]], dict[str, dict[str, dict]]]:
    """(zone -> machine types, zone -> accelerator types) in ``machineTypes`` and
    ``acceleratorTypes`` API shape: the world the embedded Compute Engine serves, built from
    the catalog (its zones, else zones ``a``-``c`` of each priced region)."""
    machines: dict[str, dict[str, dict]] = {}
    gpus: dict[str, dict[str, dict]] = {}

    def zones_of(by_region: Mapping[str, tuple[str, ...]]) -> list[str]:
        return [
            zone
            for region, names in by_region.items()
            for zone in names or [f"{region}-{letter}" for letter in EMULATED_ZONE_LETTERS]
        ]

    for entry in _all_types().values():
        if entry.tpu is not None:
            continue
        facts: dict = {"guestCpus": entry.vcpus, "memoryMb": entry.memory_mib}
        if entry.accelerator is not None:
            facts["accelerators"] = [
                {
                    "guestAcceleratorType": entry.accelerator.cloud_name,
                    "guestAcceleratorCount": int(entry.accelerator.count),
                }
            ]
        for zone in zones_of(entry.zones):
            machines.setdefault(zone, {})[entry.name] = facts
    for gce_name in gcp_data()["gpus"]:
        most = max([r["count"] for r in gcp_data()["n1_attachable_gpus"].get(gce_name, [])] or [8])
        for zone in zones_of(accelerator_zones(gce_name)):
            gpus.setdefault(zone, {})[gce_name] = {
                "description": canonical_gpu_name(gce_name),
                "maximumCardsPerInstance": most,
            }
    return machines, gpus
