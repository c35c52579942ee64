"""Hourly on-demand and spot prices per type and region, each with its source and date.

The bundled prices (``data/prices_*.csv``, ``data/prices.json``) are built by
``python -m instance_catalog.price_build`` from recorded copies of the clouds' price data;
each price names its source, and each source says the day its prices are from (None where
the recording does not say). Prices flagged as anomalies at build time are planned at the
figure :mod:`instance_catalog.price_anomalies` chose (stored in ``prices.json``), with a
note. ``autoscale catalog refresh --cloud aws --prices`` writes fresh EC2 prices to the
user's catalog folder (``aws_prices.json``, dated per region); they replace the bundled
ones type by type. A node type's ``cost_per_hour`` in a cluster YAML overrides both.
"""

from __future__ import annotations

import csv
import json
import logging
from collections import defaultdict
from dataclasses import replace
from datetime import date
from functools import cache
from importlib import resources
from operator import itemgetter
from typing import Any

from instance_catalog.model import InstanceType, Price

logger = logging.getLogger(__name__)

STALE_AFTER_DAYS = 90
"""A price older than this (or of unknown date) is shown with a warning."""


def refresh_hint(clouds: set[str]) -> str:
    """How to get prices one can bet on, for prices of ``clouds``."""
    own = "cost_per_hour on a node type sets yours"
    if clouds == {"aws"}:
        return f"`autoscale catalog refresh --cloud aws --prices` fetches today's EC2 prices; {own}"
    if "aws" in clouds:
        return (
            "`autoscale catalog refresh --cloud aws --prices` fetches today's EC2 prices "
            f"(other clouds' prices are bundled only); {own}"
        )
    return f"this cloud's prices are bundled only; {own}"


AWS_PRICES_FILE = "aws_prices.json"
"""Refreshed EC2 prices in the user's catalog folder:
``{"source": ..., "regions": {region: {"date": "YYYY-MM-DD", "prices": {type: [on_demand,
spot]}}}}``, spot null where unknown."""


@cache
def _table(filename: str, *key: str) -> tuple[list[str], dict[Any, list[str]]]:
    """A bundled price file's header, and its lines (one row each) by their ``key`` field
    (or tuple of fields, for several).

    Only the key fields are split out here; a row is parsed when asked for (a config names
    a few of the catalog's thousands of rows: reading them all was most of a plan's
    catalog load)."""
    lines = resources.files("instance_catalog.data").joinpath(filename).read_text().splitlines()
    header = next(csv.reader(lines[:1]))
    positions = [header.index(field) for field in key]
    key_of, last = itemgetter(*positions), max(positions) + 1
    grouped: dict[Any, list[str]] = defaultdict(list)
    for line in lines[1:]:
        fields = line.split(",", last) if '"' not in line else next(csv.reader([line]))
        grouped[key_of(fields)].append(line)
    return header, grouped


def _rows(filename: str, *key: str, where: tuple[str, ...]) -> list[dict[str, str]]:
    """A bundled price file's rows whose ``key`` fields are ``where``, as dicts."""
    header, grouped = _table(filename, *key)
    lines = grouped.get(where if len(where) > 1 else where[0], ())
    return [dict(zip(header, row, strict=True)) for row in csv.reader(lines)]


def _number(text: str) -> float | None:
    return float(text) if text.strip() else None


def aws_prices(instance_type: str) -> dict[str, Price]:
    """Region -> EC2 Linux price of ``instance_type``, refreshed ones over the bundled ones."""
    prices = {
        row["region"]: _price("aws", "instance", instance_type, row)
        for row in _rows("prices_aws.csv", "instance_type", where=(instance_type,))
    }
    for region, block in _refreshed_aws_blocks():
        if instance_type in block["prices"]:
            on_demand, spot = block["prices"][instance_type]
            prices[region] = Price(
                on_demand, spot, block["date"], REFRESHED, block["date"], REFRESHED
            )
    return prices


@cache
def _refreshed_aws_blocks() -> tuple[tuple[str, dict[str, Any]], ...]:
    """(region, its refreshed block), read once."""
    return tuple(refreshed_aws_prices().get("regions", {}).items())


REFRESHED = "refreshed"
"""The source key of prices from ``autoscale catalog refresh --prices``."""
REFRESH_SOURCE = "AWS Price List API (on-demand) and EC2 DescribeSpotPriceHistory (spot)"
"""Where ``autoscale catalog refresh --cloud aws --prices`` takes them from."""


def refreshed_aws_prices() -> dict[str, Any]:
    """The user's refreshed EC2 prices; empty when there are none (or they are unreadable)."""
    from instance_catalog.user_catalog import user_catalog_dir

    path = user_catalog_dir() / AWS_PRICES_FILE
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        logger.warning("ignoring refreshed prices in %s: %s", path, err)
        return {}


def gcp_price_regions() -> frozenset[str]:
    """Every region some GCP price is for."""
    header, grouped = _table("prices_gcp.csv", "kind", "name")
    region = header.index("region")
    return frozenset(row[region] for lines in grouped.values() for row in csv.reader(lines))


@cache
def gcp_prices(kind: str, name: str) -> dict[str, Price]:
    """Region -> price of GCP item ``name`` of ``kind`` (``machine``, ``gpu`` per GPU,
    ``tpu`` per slice), made when first asked for (do not mutate)."""
    return {
        row["region"]: _price("gcp", kind, name, row)
        for row in _rows("prices_gcp.csv", "kind", "name", where=(kind, name))
    }


def _price(cloud: str, kind: str, name: str, row: dict[str, str]) -> Price:
    """A bundled row as a Price: each market dated by its source, flagged ones replaced."""
    region = row["region"]
    values: dict[str, float | None] = {}
    notes = []
    for market in ("on_demand", "spot"):
        flagged = _planning().get((cloud, kind, name, region, market))
        values[market] = flagged[0] if flagged else _number(row[f"{market}_per_hour"])
        if flagged:
            notes.append(flagged[1])
    return Price(
        values["on_demand"],
        values["spot"],
        source_date(row["on_demand_source"]),
        row["on_demand_source"] or None,
        source_date(row["spot_source"]),
        row["spot_source"] or None,
        "; ".join(notes) or None,
    )


@cache
def _planning() -> dict[tuple[str, str, str, str, str], tuple[float, str]]:
    """(cloud, kind, name, region, market) -> (planning price, note) of the anomalies
    stored at build time (read here, so planning never loads the build-time checks)."""
    return {
        (a["cloud"], a["kind"], a["name"], a["region"], a["market"]): (
            float(a["planning"]),
            f"recorded ${a['recorded']:g}/h flagged: {a['reason']}; "
            f"planned at ${a['planning']:g}/h",
        )
        for a in bundled_price_facts()["anomalies"]
    }


@cache
def bundled_price_facts() -> dict[str, Any]:
    """``{"sources": {key: {cloud, date, copied, source}}, "anomalies": [...]}``."""
    text = resources.files("instance_catalog.data").joinpath("prices.json").read_text()
    return json.loads(text)


def source_date(key: str | None) -> str | None:
    """The day a source's prices are from (None when unknown or no source)."""
    if not key:
        return None
    return bundled_price_facts()["sources"].get(key, {}).get("date")


def describe_source(key: str | None) -> str | None:
    """What a source key stands for, for people."""
    if key == REFRESHED:
        return f"{REFRESH_SOURCE}, refreshed into the user's catalog folder"
    facts = bundled_price_facts()["sources"].get(key or "")
    return facts["source"] if facts else None


def price_warnings(price: Price | None, cloud: str, today: date, what: str = "price") -> list[str]:
    """Why a price should not be taken at face value: unknown date, older than
    :data:`STALE_AFTER_DAYS`, or a flagged anomaly."""
    if price is None or price.on_demand is None:
        return []
    warnings = []
    if price.as_of is None:
        hint = refresh_hint({cloud})
        warnings.append(f"{what} is of unknown date (source {price.source}); {hint}")
    elif (age := (today - date.fromisoformat(price.as_of)).days) > STALE_AFTER_DAYS:
        warnings.append(
            f"{what} is {age} days old (as of {price.as_of}, source {price.source}); "
            + refresh_hint({cloud})
        )
    if price.note:
        warnings.append(f"{what}: {price.note}")
    return warnings


def price_line(entry: InstanceType, region: str | None, spot: bool, today: date) -> str:
    """One line for people: what ``entry`` costs in ``region`` (else its cheapest region) in
    a market, where the figure comes from, how old it is, and any warning about it."""
    market = "spot" if spot else "on-demand"
    where = region or min(
        (r for r, p in entry.prices.items() if (p.spot if spot else p.on_demand) is not None),
        key=lambda r: entry.price(r, spot) or 0.0,
        default=None,
    )
    price = entry.prices.get(where) if where else None
    value = (price.spot if spot else price.on_demand) if price else None
    if price is None or value is None:
        return f"{entry.name} {market} in {where or 'any region'}: no catalog price"
    if spot:
        price = replace(
            price, on_demand=price.spot, as_of=price.spot_as_of, source=price.spot_source
        )
    dated = f"as of {price.as_of}" if price.as_of else "date unknown"
    line = f"{entry.name} {market} in {where}: ${value:g}/h ({price.source}, {dated})"
    problems = price_warnings(price, entry.cloud, today, "price")
    return "; ".join([line, *problems])
