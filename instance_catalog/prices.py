"""Hourly on-demand and spot prices per type and region, each with the day it was taken.

The bundled snapshot copies the clouds' public list prices (``data/prices.json`` gives the
date and source). ``autoscale catalog refresh --cloud aws --prices`` writes fresh EC2 prices
to the user's catalog folder (``aws_prices.json``, dated per region); they replace the
bundled ones type by type. A node type's ``cost_per_hour`` in a cluster YAML overrides both.
"""

from __future__ import annotations

import csv
import json
import logging
from collections import defaultdict
from functools import cache
from importlib import resources
from typing import Any

from instance_catalog.model import Price

logger = logging.getLogger(__name__)

PriceTable = dict[str, dict[str, Price]]
"""Name -> region -> price."""

AWS_PRICES_FILE = "aws_prices.json"
"""Refreshed EC2 prices in the user's catalog folder:
``{"source": ..., "regions": {region: {"date": "YYYY-MM-DD", "prices": {type: [on_demand,
spot]}}}}``, spot null where unknown."""


def _rows(filename: str) -> list[dict[str, str]]:
    with resources.files("instance_catalog.data").joinpath(filename).open(newline="") as f:
        return list(csv.DictReader(f))


def _number(text: str) -> float | None:
    return float(text) if text.strip() else None


@cache
def aws_prices() -> PriceTable:
    """EC2 Linux prices by instance type and region, refreshed ones over the bundled ones."""
    date = snapshot_info()["aws"]["date"]
    table: PriceTable = defaultdict(dict)
    for row in _rows("prices_aws.csv"):
        table[row["instance_type"]][row["region"]] = Price(
            _number(row["on_demand_per_hour"]), _number(row["spot_per_hour"]), date
        )
    for region, block in refreshed_aws_prices().get("regions", {}).items():
        for name, (on_demand, spot) in block["prices"].items():
            table[name][region] = Price(on_demand, spot, block["date"])
    return dict(table)


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


@cache
def gcp_prices() -> dict[str, PriceTable]:
    """GCP prices by kind (``machine``, ``gpu`` per GPU, ``tpu`` per slice), name, region."""
    date = snapshot_info()["gcp"]["date"]
    tables: dict[str, PriceTable] = defaultdict(lambda: defaultdict(dict))
    for row in _rows("prices_gcp.csv"):
        tables[row["kind"]][row["name"]][row["region"]] = Price(
            _number(row["on_demand_per_hour"]), _number(row["spot_per_hour"]), date
        )
    return {kind: dict(table) for kind, table in tables.items()}


@cache
def snapshot_info() -> dict[str, dict[str, str]]:
    """Per cloud: ``date`` and ``source`` of the bundled price snapshot."""
    text = resources.files("instance_catalog.data").joinpath("prices.json").read_text()
    return json.loads(text)
