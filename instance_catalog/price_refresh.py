"""Fresh EC2 prices: on-demand from the AWS Price List API, spot from DescribeSpotPriceHistory.

On-demand prices are the Price List's products for a plain launch: Linux, shared tenancy, no
pre-installed software, capacity status "Used". Spot prices are the lowest current zone
price in each region for Linux/UNIX. ``autoscale catalog refresh --cloud aws --prices``
writes both to the user's catalog folder, dated per region (a later refresh of some regions
keeps the others), and the catalog prefers them over the bundled snapshot.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from instance_catalog.prices import AWS_PRICES_FILE, REFRESH_SOURCE, refreshed_aws_prices
from instance_catalog.refresh import CatalogRefreshError, discover_regions, pages
from instance_catalog.user_catalog import user_catalog_dir, write_json

PRICING_REGION = "us-east-1"
"""The Price List API answers from a few regions only; this one has every product."""
PRODUCT_FILTERS = {
    "operatingSystem": "Linux",
    "tenancy": "Shared",
    "preInstalledSw": "NA",
    "capacitystatus": "Used",
}
SPOT_PRODUCT = "Linux/UNIX"

RegionPrices = dict[str, dict[str, float]]
"""Region -> instance type -> hourly USD."""


def on_demand_prices(
    session: Any, regions: Iterable[str] | None = None, endpoint_url: str | None = None
) -> RegionPrices:
    """Hourly Linux on-demand prices from ``GetProducts`` (every region when None)."""
    client = session.client("pricing", region_name=PRICING_REGION, endpoint_url=endpoint_url)
    base = [_term(field, value) for field, value in PRODUCT_FILTERS.items()]
    found: RegionPrices = defaultdict(dict)
    for region in [None] if regions is None else regions:
        where = [] if region is None else [_term("regionCode", region)]
        for page in pages(
            client,
            "get_products",
            ServiceCode="AmazonEC2",
            Filters=base + where,
            FormatVersion="aws_v1",
        ):
            for text in page["PriceList"]:
                priced = _hourly_on_demand(json.loads(text))
                if priced is not None:
                    found[priced[0]][priced[1]] = priced[2]
    return dict(found)


def _term(field: str, value: str) -> dict[str, str]:
    return {"Type": "TERM_MATCH", "Field": field, "Value": value}


def _hourly_on_demand(product: Mapping[str, Any]) -> tuple[str, str, float] | None:
    """(region, instance type, USD per hour) of one Price List product, if it has one."""
    attributes = product.get("product", {}).get("attributes", {})
    name, region = attributes.get("instanceType"), attributes.get("regionCode")
    if not name or not region:
        return None
    for term in product.get("terms", {}).get("OnDemand", {}).values():
        for dimension in term.get("priceDimensions", {}).values():
            usd = float(dimension.get("pricePerUnit", {}).get("USD") or 0)
            if dimension.get("unit") == "Hrs" and usd > 0:
                return region, name, usd
    return None


def spot_prices(
    session: Any, regions: Iterable[str], now: datetime, endpoint_url: str | None = None
) -> RegionPrices:
    """The lowest current Linux/UNIX spot price of each type across each region's zones."""
    found: RegionPrices = defaultdict(dict)
    for region in regions:
        client = session.client("ec2", region_name=region, endpoint_url=endpoint_url)
        for page in pages(
            client,
            "describe_spot_price_history",
            ProductDescriptions=[SPOT_PRODUCT],
            StartTime=now,
        ):
            for entry in page["SpotPriceHistory"]:
                price, name = float(entry["SpotPrice"]), entry["InstanceType"]
                found[region][name] = min(price, found[region].get(name, price))
    return dict(found)


def refresh_prices(
    session: Any,
    now: datetime,
    regions: Iterable[str] | None = None,
    ec2_endpoint_url: str | None = None,
    pricing_endpoint_url: str | None = None,
) -> dict[str, Any]:
    """Fetch prices, merge them into the user's ``aws_prices.json``, return the fresh regions.

    Raises :class:`CatalogRefreshError` (naming the IAM action) if a call fails, and when the
    Price List has no on-demand price for any requested region.
    """
    regions = list(regions) if regions else None
    on_demand = on_demand_prices(session, regions, pricing_endpoint_url)
    if not on_demand:
        raise CatalogRefreshError(
            f"the Price List API returned no EC2 prices for {', '.join(regions or ['any region'])}"
        )
    spot_regions = regions or discover_regions(session, ec2_endpoint_url)
    spot = spot_prices(session, spot_regions, now, ec2_endpoint_url)
    date = now.date().isoformat()
    fresh = {
        region: {
            "date": date,
            "prices": {
                name: [price, spot.get(region, {}).get(name)]
                for name, price in sorted(by_type.items())
            },
        }
        for region, by_type in on_demand.items()
    }
    merged = {**refreshed_aws_prices().get("regions", {}), **fresh}
    document = {"source": REFRESH_SOURCE, "regions": dict(sorted(merged.items()))}
    write_json(document, user_catalog_dir() / AWS_PRICES_FILE)
    return fresh
