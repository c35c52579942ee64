"""Build the GCP facts snapshot from Google's own API answers.

Three tables, each zone by zone: Compute Engine machine types (``machineTypes.aggregatedList``:
vCPUs, memory, built-in GPUs), accelerator types (``acceleratorTypes.aggregatedList``: the
most cards one VM takes) and Cloud TPU accelerator types (the TPU API's
``list_accelerator_types`` in every TPU location). ``autoscale catalog refresh --cloud gcp``
writes it to the user's catalog folder (``gcp_compute.json``), where ``instance_catalog.gcp``
reads each type's zones from it. Without one, the catalog reads the bundled snapshot
(``data/gcp_compute_snapshot.json``), built by ``python -m instance_catalog.gcp_refresh
--from-skypilot-csv FILE`` from a recorded copy of the same API answers.
"""

from __future__ import annotations

import argparse
import csv
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

SNAPSHOT_FILE = "gcp_compute.json"


def build_snapshot(
    machine_types: Iterable[tuple[str, Mapping[str, Any]]],
    accelerator_types: Iterable[tuple[str, Mapping[str, Any]]],
    tpu_types: Iterable[tuple[str, str]],
    source: str,
) -> dict[str, Any]:
    """The snapshot from (zone, ``MachineType``), (zone, ``AcceleratorType``) records in the
    API's JSON shape and (zone, TPU accelerator type) pairs."""
    machines: dict[str, dict[str, Any]] = {}
    gpus: dict[str, dict[str, Any]] = {}
    zones: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for zone, record in machine_types:
        name = record["name"]
        machines.setdefault(
            name,
            {
                "guestCpus": int(record.get("guestCpus", 0)),
                "memoryMb": int(record.get("memoryMb", 0)),
                "accelerators": [
                    {
                        "guestAcceleratorType": a["guestAcceleratorType"],
                        "guestAcceleratorCount": int(a["guestAcceleratorCount"]),
                    }
                    for a in record.get("accelerators") or ()
                ],
            },
        )
        zones[f"machine:{name}"][_region(zone)].add(zone)
    for zone, record in accelerator_types:
        name = record["name"]
        entry = gpus.setdefault(
            name, {"description": record.get("description", ""), "maximumCardsPerInstance": 0}
        )
        most = int(record.get("maximumCardsPerInstance", 0))
        entry["maximumCardsPerInstance"] = max(entry["maximumCardsPerInstance"], most)
        zones[f"gpu:{name}"][_region(zone)].add(zone)
    tpus: dict[str, dict[str, Any]] = {}
    for zone, name in tpu_types:
        tpus.setdefault(name, {})
        zones[f"tpu:{name}"][_region(zone)].add(zone)

    def with_zones(kind: str, table: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return {
            name: {
                **facts,
                "zones": {r: sorted(z) for r, z in sorted(zones[f"{kind}:{name}"].items())},
            }
            for name, facts in sorted(table.items())
        }

    return {
        "source": source,
        "generated_at": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "machine_types": with_zones("machine", machines),
        "accelerator_types": with_zones("gpu", gpus),
        "tpu_accelerator_types": with_zones("tpu", tpus),
    }


def _region(zone: str) -> str:
    return zone.rsplit("-", 1)[0]


# Recorded data -----------------------------------------------------------------------------------
# A second input: a catalog recorded in SkyPilot's ``vms.csv`` format
# (skypilot-org/skypilot-catalog, ``catalogs/v7/gcp/vms.csv``), which SkyPilot's fetcher builds
# from the same Google APIs. Only its facts are read: one row per (machine type, zone) with
# vCPUs and memory (GiB), and rows with an empty InstanceType per (accelerator, count, zone):
# GPUs attachable in that zone, and Cloud TPU slice types (``tpu-v5p-8``). Prices are ignored.
# The CSV names GPUs its own way; these are the Compute Engine accelerator types they stand for.
RECORDED_GPU_NAMES = {
    "A100": "nvidia-tesla-a100",
    "A100-80GB": "nvidia-a100-80gb",
    "B200": "nvidia-b200",
    "GB200": "nvidia-gb200",
    "H100": "nvidia-h100-80gb",
    "H100-MEGA": "nvidia-h100-mega-80gb",
    "H200": "nvidia-h200-141gb",
    "K80": "nvidia-tesla-k80",
    "L4": "nvidia-l4",
    "P100": "nvidia-tesla-p100",
    "P4": "nvidia-tesla-p4",
    "T4": "nvidia-tesla-t4",
    "V100": "nvidia-tesla-v100",
}
BUNDLED_SNAPSHOT = "gcp_compute_snapshot.json"
"""The snapshot bundled in ``instance_catalog/data`` (packed: zone lists shared by key)."""


def records_from_catalog_csv(
    rows: Iterable[Mapping[str, str]],
) -> tuple[
    list[tuple[str, dict[str, Any]]],
    list[tuple[str, dict[str, Any]]],
    list[tuple[str, str]],
    list[str],
]:
    """(machine type, accelerator type, TPU type) records as :func:`build_snapshot` takes them,
    from rows of a recorded catalog, and notes on what was left out.

    Machine types come without built-in GPUs (the CSV leaves them blank); ``*-tpu`` rows are
    the recorder's TPU-host shapes, not Compute Engine machine types, and are skipped.
    """
    machines: list[tuple[str, dict[str, Any]]] = []
    gpus: list[tuple[str, dict[str, Any]]] = []
    tpus: list[tuple[str, str]] = []
    skipped: set[str] = set()
    for row in rows:
        zone = (row.get("AvailabilityZone") or "").strip()
        name = (row.get("InstanceType") or "").strip()
        accelerator = (row.get("AcceleratorName") or "").strip()
        if not zone:
            continue
        if name:
            if name.endswith("-tpu"):
                skipped.add(f"{name} (a TPU host shape, not a machine type)")
                continue
            machines.append(
                (
                    zone,
                    {
                        "name": name,
                        "guestCpus": round(float(row["vCPUs"])),
                        "memoryMb": round(float(row["MemoryGiB"]) * 1024),
                    },
                )
            )
        elif accelerator.startswith("tpu-"):
            tpus.append((zone, accelerator.removeprefix("tpu-")))
        elif accelerator in RECORDED_GPU_NAMES:
            count = round(float(row.get("AcceleratorCount") or 0))
            gce_name = RECORDED_GPU_NAMES[accelerator]
            gpus.append(
                (
                    zone,
                    {
                        "name": gce_name,
                        "description": accelerator,
                        "maximumCardsPerInstance": count,
                    },
                )
            )
        elif accelerator:
            skipped.add(f"{accelerator} (no known Compute Engine accelerator type)")
    return machines, gpus, tpus, sorted(skipped)


def snapshot_from_catalog_csv(path: str | Path, source: str) -> dict[str, Any]:
    """The snapshot (:func:`build_snapshot`'s shape) of a catalog recorded in SkyPilot's
    ``vms.csv`` format; ``source`` says where the file came from and when."""
    with open(path, newline="") as handle:
        machines, gpus, tpus, skipped = records_from_catalog_csv(csv.DictReader(handle))
    snapshot = build_snapshot(machines, gpus, tpus, source)
    snapshot["notes"] = [
        "Built-in GPUs of machine types are not in the recorded data (the CSV leaves them "
        "blank): machine_types[*].accelerators is empty; the catalog takes them from gcp.yaml.",
        "accelerator_types[*].maximumCardsPerInstance is the largest count recorded for the GPU.",
        *(f"skipped: {item}" for item in skipped),
    ]
    return snapshot


def pack_snapshot(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """The snapshot with each distinct zone table stored once under ``zone_sets`` and
    referred to by key: the bundled file's form (:func:`unpack_snapshot` reverses it)."""
    keys: dict[str, str] = {}
    sets: dict[str, Any] = {}
    packed: dict[str, Any] = {k: v for k, v in snapshot.items() if k not in TABLES}
    for table in TABLES:
        packed[table] = {}
        for name, facts in sorted(snapshot.get(table, {}).items()):
            zones = json.dumps(facts.get("zones", {}), sort_keys=True)
            if zones not in keys:
                keys[zones] = f"z{len(keys)}"
                sets[keys[zones]] = json.loads(zones)
            packed[table][name] = {**facts, "zones": keys[zones]}
    packed["zone_sets"] = sets
    return packed


def unpack_snapshot(data: Mapping[str, Any]) -> dict[str, Any]:
    """A snapshot in :func:`build_snapshot`'s shape from either form."""
    sets = data.get("zone_sets", {})
    snapshot: dict[str, Any] = {k: v for k, v in data.items() if k != "zone_sets"}
    for table in TABLES:
        snapshot[table] = {
            name: {**facts, "zones": sets[z] if isinstance(z := facts.get("zones"), str) else z}
            for name, facts in data.get(table, {}).items()
        }
    return snapshot


TABLES = ("machine_types", "accelerator_types", "tpu_accelerator_types")


def dump_compact(snapshot: Mapping[str, Any]) -> str:
    """Sorted, one table entry per line: small, and diffs stay readable."""
    lines = ["{"]
    items = list(snapshot.items())
    for i, (key, value) in enumerate(items):
        end = "," if i < len(items) - 1 else ""
        if isinstance(value, dict) and value and key in (*TABLES, "zone_sets"):
            lines.append(f"{json.dumps(key)}: {{")
            entries = sorted(value.items())
            for j, (name, facts) in enumerate(entries):
                sep = "," if j < len(entries) - 1 else ""
                lines.append(f"  {json.dumps(name)}: {json.dumps(facts, sort_keys=True)}{sep}")
            lines.append("}" + end)
        else:
            lines.append(f"{json.dumps(key)}: {json.dumps(value)}{end}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m instance_catalog.gcp_refresh",
        description="Build the bundled GCP snapshot from a catalog recorded in SkyPilot's "
        "vms.csv format (the live refresh is `autoscale catalog refresh --cloud gcp`).",
    )
    parser.add_argument("--from-skypilot-csv", required=True, metavar="FILE")
    parser.add_argument(
        "--source", required=True, help="where FILE came from (repo, path, commit, date)"
    )
    parser.add_argument(
        "--out", default=str(Path(__file__).parent / "data" / BUNDLED_SNAPSHOT), metavar="PATH"
    )
    args = parser.parse_args(argv)
    snapshot = snapshot_from_catalog_csv(args.from_skypilot_csv, args.source)
    Path(args.out).write_text(dump_compact(pack_snapshot(snapshot)))
    counts = {table: len(snapshot[table]) for table in TABLES}
    print(f"wrote {args.out}: {counts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
