"""The bundled price snapshot: hourly on-demand and spot prices per type and region.

Prices are a dated snapshot of the clouds' public list prices (see ``data/prices.json`` for
the date and source). A node type's ``cost_per_hour`` in a cluster YAML overrides them.
"""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from functools import cache
from importlib import resources

from instance_catalog.model import Price

PriceTable = dict[str, dict[str, Price]]
"""Name -> region -> price."""


def _rows(filename: str) -> list[dict[str, str]]:
    with resources.files("instance_catalog.data").joinpath(filename).open(newline="") as f:
        return list(csv.DictReader(f))


def _number(text: str) -> float | None:
    return float(text) if text.strip() else None


@cache
def aws_prices() -> PriceTable:
    """EC2 Linux prices by instance type and region."""
    table: PriceTable = defaultdict(dict)
    for row in _rows("prices_aws.csv"):
        table[row["instance_type"]][row["region"]] = Price(
            _number(row["on_demand_per_hour"]), _number(row["spot_per_hour"])
        )
    return dict(table)


@cache
def gcp_prices() -> dict[str, PriceTable]:
    """GCP prices by kind (``machine``, ``gpu`` per GPU, ``tpu`` per slice), name, region."""
    tables: dict[str, PriceTable] = defaultdict(lambda: defaultdict(dict))
    for row in _rows("prices_gcp.csv"):
        tables[row["kind"]][row["name"]][row["region"]] = Price(
            _number(row["on_demand_per_hour"]), _number(row["spot_per_hour"])
        )
    return {kind: dict(table) for kind, table in tables.items()}


@cache
def snapshot_info() -> dict[str, dict[str, str]]:
    """Per cloud: ``date`` and ``source`` of the price snapshot."""
    text = resources.files("instance_catalog.data").joinpath("prices.json").read_text()
    return json.loads(text)
