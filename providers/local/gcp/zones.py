"""The zones the local Compute Engine serves, and the machine types in each.

The catalog's machine-type listing (``compute_zone_tables``) covers the zones Google's API
snapshot lists; the GCP facts also know zones only from their TPUs or GPUs (us-central2-b,
home of TPU v4, lists no machine types there, yet Ray's TPU pod example puts its head VM in
it). Such a zone serves every catalogued machine type without accelerators, so a head or
CPU VM beside a zone's TPUs launches as it does on Google's cloud.
"""

from __future__ import annotations

from instance_catalog.gcp import compute_zone_tables
from instance_catalog.tpu import gcp_data, tpu_zones


def _tpu_zones() -> set[str]:
    return {
        zone
        for generation in gcp_data()["tpu"]
        for names in tpu_zones(generation).values()
        for zone in names
    }


def served_zone_tables() -> tuple[dict[str, dict[str, dict]], dict[str, dict[str, dict]]]:
    """(zone -> machine types, zone -> accelerator types) in API shape, for every zone the
    catalog and the GCP facts know."""
    machines, gpus = compute_zone_tables()
    cpu_only: dict[str, dict] = {}
    for types in machines.values():
        cpu_only.update({n: f for n, f in types.items() if not f.get("accelerators")})
    for zone in (_tpu_zones() | set(gpus)) - set(machines):
        machines[zone] = dict(cpu_only)
    return machines, gpus
