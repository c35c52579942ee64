"""Where a GCP node type launches: its region and zones in order of preference.

A node type's own ``region`` / ``availability_zone`` (our keys in its node_config) win over
the provider's. Without zones, every zone of the region that offers the type is tried (the
catalog's per-zone data). Where the catalog knows zones (from the snapshot of Google's API
answers, bundled or refreshed by ``autoscale catalog refresh --cloud gcp``; for TPU generations
it lacks, from Google's pages), named zones must offer the type, or the config fails at load
naming the field and the places that do (with facts from Google's pages only a region is
checked strictly: a zone they do not list is a warning, as the pages lag); a region known
only from prices proves nothing, so it is not checked.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from accel.user_input import brief
from instance_catalog.gcp import known_regions
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
    notes: list[str] | None = None,
    covered: Collection[str] | None = None,
) -> tuple[str | None, tuple[str, ...]]:
    """(region, zones in order) for ``node_config``; ``offered`` is region -> zones offering
    ``what`` (empty tuples where unknown), ``field`` the node_config key that names it.

    With ``notes``, the zone facts are Google's published pages, which lag: a named zone they
    do not list, in a region that has ``what``, becomes a note instead of an error. With
    ``covered``, the zone facts speak only for those regions (a recording of the API answers
    from one project); elsewhere the zones are unknown and not checked."""
    own = node_config.get("availability_zone") or node_config.get("region")
    source = node_config if own else provider_config
    zones = split_zones(source.get("availability_zone"))
    region = source.get("region") or (region_of(zones[0]) if zones else None)
    prefix = "" if own else "provider."
    key = "region" if source.get("region") else "availability_zone"
    if region and region not in known_regions():
        raise InvalidConfigError(
            f"{brief(region)} is not a GCP region (or zone of one) the catalog knows",
            field=prefix + key,
        )
    stray = [zone for zone in zones if region_of(zone) != region]
    if stray:
        raise InvalidConfigError(
            f"zone {brief(stray[0])} is not in region {brief(region)}",
            field=prefix + "availability_zone",
        )
    known = offered.get(region, ()) if region else ()
    speaks = covered is None or region in covered
    if region and not known and speaks and any(offered.values()):  # a snapshot says so
        regions = ", ".join(sorted(r for r, z in offered.items() if z))
        raise InvalidConfigError(
            f"{what} is not offered in region {brief(region)} (regions that have it: {regions})",
            field=field,
        )
    missing = [zone for zone in zones if known and zone not in known]
    if missing and notes is not None:
        notes.append(
            f"{what} is not listed for {brief(', '.join(missing))} on Google's pages (zones of "
            f"{region} that have it: {', '.join(known)}); launches there may fail"
        )
    elif missing:
        raise InvalidConfigError(
            f"{what} is not offered in {brief(', '.join(missing))} "
            f"(zones of {region} that have it: {', '.join(known)})",
            field=field,
        )
    return (str(region) if region else None), zones or known
