"""The local EC2 offers every instance type the catalog knows: moto's own instance-type data
lags the real EC2's (types added since, and retired ones still sold), so the catalog's
``DescribeInstanceTypes`` records and zones are taught to moto's server before it starts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from instance_catalog.aws import corrected_records


def _offerings(name: str, zones: Mapping[str, tuple[str, ...]], known: Mapping) -> dict:
    """``{location type: {region: [offering]}}`` for type ``name`` sold in ``zones``
    (``{region: zone suffixes}``; no suffixes: every zone of the region)."""
    found: dict[str, dict[str, list]] = {"region": {}, "availability-zone": {}}
    found["availability-zone-id"] = {}
    for region, suffixes in zones.items():
        region_zones = known.get(region, [])
        chosen = [z for z in region_zones if not suffixes or z.name[len(region) :] in suffixes]
        found["region"][region] = [_offering(name, region, "region")]
        found["availability-zone"][region] = [
            _offering(name, z.name, "availability-zone") for z in chosen
        ]
        found["availability-zone-id"][region] = [
            _offering(name, z.zone_id, "availability-zone-id") for z in chosen
        ]
    return found


def _offering(name: str, location: str, location_type: str) -> dict[str, str]:
    return {"InstanceType": name, "Location": location, "LocationType": location_type}


def teach_catalog_types() -> list[str]:
    """Add the catalog's types moto does not know to moto's EC2 (its type list and each
    region's and zone's offerings); the names added."""
    from moto.ec2.models import instance_types
    from moto.ec2.models.availability_zones_and_regions import RegionsAndZonesBackend

    records, zones = corrected_records()
    added = sorted(set(records) - set(instance_types.INSTANCE_TYPES))
    for name in added:
        record: dict[str, Any] = dict(records[name], CurrentGeneration=True)
        instance_types.INSTANCE_TYPES[name] = record
        instance_types.InstanceTypeBackend.instance_types.append(instance_types.InstanceType(name))
        for location_type, by_region in _offerings(
            name, zones.get(name, {}), RegionsAndZonesBackend.zones
        ).items():
            table = instance_types.INSTANCE_TYPE_OFFERINGS[location_type]
            for region, offerings in by_region.items():
                table.setdefault(region, []).extend(offerings)
    return added
