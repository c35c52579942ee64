"""Build the GCP facts snapshot from Google's own API answers.

Three tables, each zone by zone: Compute Engine machine types (``machineTypes.aggregatedList``:
vCPUs, memory, built-in GPUs), accelerator types (``acceleratorTypes.aggregatedList``: the
most cards one VM takes) and Cloud TPU accelerator types (the TPU API's
``list_accelerator_types`` in every TPU location). ``autoscale catalog refresh --cloud gcp``
writes it to the user's catalog folder (``gcp_compute.json``), where ``instance_catalog.gcp``
reads each type's zones from it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
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
