"""Where a GCP node type launches: its region and zones in order of preference.

A node type's own ``region`` / ``availability_zone`` (our keys in its node_config) win over
the provider's. Without zones, every zone of the region that offers the type is tried (the
catalog's per-zone data). Where the catalog knows zones (TPU generations; GCE types after
``autoscale catalog refresh --cloud gcp``), named zones must offer the type, or the config
fails at load naming the field and the places that do; a region known only from prices
proves nothing, so it is not checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from providers.base import split_zones
from providers.errors import InvalidConfigError

OUR_KEYS = frozenset({"market", "region", "availability_zone"})
"""node_config keys the plugins read and neither Google API takes."""


def region_of(zone: str) -> str:
    """``us-central2-b`` -> ``us-central2``."""
    return zone.rsplit("-", 1)[0]


def placement(
    node_config: Mapping[str, Any],
    provider_config: Mapping[str, Any],
    offered: Mapping[str, tuple[str, ...]],
    what: str,
    field: str,
) -> tuple[str | None, tuple[str, ...]]:
    """(region, zones in order) for ``node_config``; ``offered`` is region -> zones offering
    ``what`` (empty tuples where unknown), ``field`` the node_config key that names it."""
    own = node_config.get("availability_zone") or node_config.get("region")
    source = node_config if own else provider_config
    zones = split_zones(source.get("availability_zone"))
    region = source.get("region") or (region_of(zones[0]) if zones else None)
    stray = [zone for zone in zones if region_of(zone) != region]
    if stray:
        raise InvalidConfigError(
            f"zone {stray[0]} is not in region {region}", field="availability_zone"
        )
    known = offered.get(region, ()) if region else ()
    if region and not known and any(offered.values()):  # zones known: a snapshot says so
        regions = ", ".join(sorted(r for r, z in offered.items() if z))
        raise InvalidConfigError(
            f"{what} is not offered in region {region} (regions that have it: {regions})",
            field=field,
        )
    missing = [zone for zone in zones if known and zone not in known]
    if missing:
        raise InvalidConfigError(
            f"{what} is not offered in {', '.join(missing)} "
            f"(zones of {region} that have it: {', '.join(known)})",
            field=field,
        )
    return (str(region) if region else None), zones or known
