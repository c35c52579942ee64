"""Build the bundled prices from recorded price data (the offline path of the price refresh).

``python -m instance_catalog.price_build`` reads the files listed in
``instance_catalog/recorded/sources.yaml`` (each with the day its prices are from) and writes
``data/prices_aws.csv``, ``data/prices_gcp.csv`` and ``data/prices.json``: per (type, region)
the on-demand and spot price of the newest source that has one, with that source's key, and
the anomalies :mod:`instance_catalog.price_anomalies` finds, each with its source row. No
price is typed by hand. ``autoscale catalog refresh --cloud aws --prices`` is the live path.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from instance_catalog.model import AWS
from instance_catalog.price_anomalies import ON_DEMAND, Anomaly, PricedRow, find_anomalies

RECORDED_DIR = Path(__file__).parent / "recorded"
DATA_DIR = Path(__file__).parent / "data"
SOURCES_FILE = "sources.yaml"
AWS_KIND = "instance"
COLUMNS = {
    "aws": ["instance_type", "region"],
    "gcp": ["name", "kind", "region"],
}
PRICE_COLUMNS = ["on_demand_per_hour", "on_demand_source", "spot_per_hour", "spot_source"]


@dataclass(frozen=True)
class _Quote:
    text: str
    source: str
    date: str
    """``YYYY-MM-DD``; empty when unknown (older than any known date)."""
    row: str


def load_sources(recorded_dir: Path = RECORDED_DIR) -> list[dict[str, Any]]:
    return yaml.safe_load((recorded_dir / SOURCES_FILE).read_text())


def merged_rows(
    sources: list[Mapping[str, Any]], recorded_dir: Path = RECORDED_DIR
) -> dict[tuple[str, str, str, str], dict[str, _Quote]]:
    """(cloud, kind, name, region) -> market -> the quote of the newest source pricing it."""
    merged: dict[tuple[str, str, str, str], dict[str, _Quote]] = {}
    for source in sources:
        date = str(source["date"] or "")
        with open(recorded_dir / source["file"], newline="") as handle:
            reader = csv.DictReader(handle)
            header = reader.fieldnames or []
            for record in reader:
                name = record.get("instance_type") or record["name"]
                kind = record.get("kind") or AWS_KIND
                key = (source["cloud"], kind, name, record["region"])
                row = ",".join(record[column] for column in header)
                quotes = merged.setdefault(key, {})
                for market, columns in (
                    ("on_demand", ("on_demand_per_hour", "on_demand_usd_per_hour")),
                    ("spot", ("spot_per_hour",)),
                ):
                    text = next((record[c].strip() for c in columns if record.get(c)), "")
                    if not text:
                        continue
                    held = quotes.get(market)
                    if held is None or date > held.date:
                        quotes[market] = _Quote(text, source["key"], date, row)
    return merged


def priced_rows(merged: Mapping[tuple[str, str, str, str], dict[str, _Quote]]) -> list[PricedRow]:
    def value(quote: _Quote | None) -> float | None:
        return float(quote.text) if quote else None

    return [
        PricedRow(
            cloud,
            kind,
            name,
            region,
            value(quotes.get("on_demand")),
            quotes["on_demand"].source if "on_demand" in quotes else None,
            value(quotes.get("spot")),
            quotes["spot"].source if "spot" in quotes else None,
        )
        for (cloud, kind, name, region), quotes in sorted(merged.items())
    ]


def _has_accelerator(row: PricedRow) -> bool:
    if row.cloud == AWS:
        from instance_catalog.aws import accelerator_of, corrected_records

        record = corrected_records()[0].get(row.name)
        return record is not None and accelerator_of(record) is not None
    return row.kind in ("gpu", "tpu")


def build(recorded_dir: Path = RECORDED_DIR) -> tuple[dict[str, str], list[Anomaly]]:
    """File name -> text of every bundled price file, and the anomalies found."""
    sources = load_sources(recorded_dir)
    merged = merged_rows(sources, recorded_dir)

    def source_row(row: PricedRow, market: str) -> str:
        return merged[(row.cloud, row.kind, row.name, row.region)][market].row

    anomalies = find_anomalies(priced_rows(merged), _has_accelerator, source_row)
    files = {f"prices_{cloud}.csv": _csv(cloud, merged) for cloud in COLUMNS}
    document = {
        "sources": {
            s["key"]: {
                "cloud": s["cloud"],
                "date": str(s["date"]) if s["date"] else None,
                "copied": str(s["copied"]),
                "source": s["source"],
            }
            for s in sources
        },
        "anomalies": [a.to_dict() for a in anomalies],
    }
    files["prices.json"] = json.dumps(document, indent=1) + "\n"
    return files, anomalies


def _csv(cloud: str, merged: Mapping[tuple[str, str, str, str], dict[str, _Quote]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*COLUMNS[cloud], *PRICE_COLUMNS])
    for (row_cloud, kind, name, region), quotes in sorted(merged.items()):
        if row_cloud != cloud:
            continue
        keys = [name, region] if cloud == AWS else [name, kind, region]
        prices = []
        for market in (ON_DEMAND, "spot"):
            quote = quotes.get(market)
            prices += [quote.text, quote.source] if quote else ["", ""]
        writer.writerow([*keys, *prices])
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m instance_catalog.price_build",
        description="Build the bundled prices from the recorded price files.",
    )
    parser.add_argument("--recorded", type=Path, default=RECORDED_DIR, metavar="DIR")
    parser.add_argument("--out", type=Path, default=DATA_DIR, metavar="DIR")
    args = parser.parse_args(argv)
    files, anomalies = build(args.recorded)
    for name, text in files.items():
        (args.out / name).write_text(text)
        print(f"wrote {args.out / name}")
    print(f"{len(anomalies)} anomalies:")
    for anomaly in anomalies:
        print(f"  {anomaly.describe()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
