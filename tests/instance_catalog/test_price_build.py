"""The bundled prices: built from recorded sources, dated by source, anomalies flagged."""

from __future__ import annotations

import csv
from datetime import date
from importlib import resources
from pathlib import Path

import pytest

from instance_catalog.catalog import load_catalog
from instance_catalog.price_anomalies import FAR_FACTOR, PricedRow, find_anomalies
from instance_catalog.price_build import RECORDED_DIR, build, load_sources
from instance_catalog.prices import price_warnings

PRICE_LIST = "aws-price-list-2026-07-20"


@pytest.fixture(scope="module")
def built():
    return build()


def test_bundled_price_files_are_exactly_what_the_build_makes(built):
    files, _ = built
    for name, text in files.items():
        bundled = resources.files("instance_catalog.data").joinpath(name).read_text()
        assert bundled == text, f"{name} differs: run python -m instance_catalog.price_build"


def _price_list_rows() -> dict[str, float]:
    source = next(s for s in load_sources() if s["key"] == PRICE_LIST)
    with open(Path(RECORDED_DIR) / source["file"], newline="") as handle:
        return {
            r["instance_type"]: float(r["on_demand_usd_per_hour"]) for r in csv.DictReader(handle)
        }


def test_every_ec2_type_in_the_price_list_has_its_us_east_1_price_and_date():
    recorded = _price_list_rows()
    aws = load_catalog().entries("aws")
    missing = []
    for entry in aws:
        if entry.name not in recorded:
            continue
        price = entry.prices.get("us-east-1")
        if price is None or price.on_demand != recorded[entry.name]:
            missing.append(entry.name)
            continue
        assert (price.as_of, price.source) == ("2026-07-20", PRICE_LIST)
    assert missing == []
    priced = sum(1 for e in aws if e.price("us-east-1") is not None)
    assert priced >= 0.95 * len(aws)


def test_newer_list_prices_replace_older_ones_region_by_region():
    p5 = load_catalog().get("p5.48xlarge", "aws")
    assert p5.price("us-east-1") == 55.04  # AWS's 2025 cut, from the Price List recording
    other = p5.prices["us-west-2"]
    assert other.source.startswith("skypilot-aws") and other.as_of is None
    assert p5.price("us-west-2") > 55.04  # the older recording, shown as undated


def test_the_recorded_gcp_h100_anomaly_is_flagged_with_its_source_row(built):
    _, anomalies = built
    flagged = {
        (a.name, a.region): a
        for a in anomalies
        if a.name == "nvidia-h100-80gb" and a.market == "on_demand"
    }
    central = flagged[("nvidia-h100-80gb", "us-central1")]
    assert central.recorded == pytest.approx(4.20076)
    assert central.row.startswith("nvidia-h100-80gb,gpu,us-central1,4.20076")
    assert central.planning > 2 * central.recorded
    assert ("nvidia-h100-80gb", "us-east4") not in flagged  # the consistent figure
    spot_above = [a for a in anomalies if "spot" in a.reason and "above on-demand" in a.reason]
    assert {a.region for a in spot_above} >= {"asia-northeast1", "northamerica-northeast2"}


def test_the_planner_never_sees_a_flagged_price_below_its_family():
    catalog = load_catalog()
    a3 = catalog.get("a3-highgpu-8g", "gcp")
    central, east4 = a3.prices["us-central1"], a3.prices["us-east4"]
    assert central.note and "flagged" in central.note
    # Eight GPUs at the family's median instead of $4.20 each: no longer half price.
    assert a3.price("us-central1") > 0.9 * a3.price("us-east4")
    assert east4.note is None
    assert any("flagged" in w for w in price_warnings(central, "gcp", date(2026, 11, 25)))


def _row(region: str, on_demand: float, spot: float | None = None, source: str = "s") -> PricedRow:
    return PricedRow("gcp", "gpu", "g", region, on_demand, source, spot, source)


def test_far_prices_are_judged_only_against_the_same_source():
    rows = [_row("r1", 10.0), _row("r2", 11.0), _row("r3", 9.0), _row("r4", 3.0)]
    rows.append(_row("r5", 1.0, source="newer"))  # a later price cut is not an anomaly

    def row_text(row, market):
        return f"{row.region},{getattr(row, market)}"

    found = find_anomalies(rows, lambda _: True, row_text)
    assert [(a.region, a.planning, a.row) for a in found] == [("r4", 10.0, "r4,3.0")]
    assert 3.0 * FAR_FACTOR < 10.0


def test_a_cheap_majority_is_flagged_when_the_source_splits_in_two():
    # Seven regions at $4.20 and three near $10: one group is wrong, and planning with the
    # dearer one never makes a region look cheap (GCP's recorded H100 prices look like this).
    rows = [_row(f"low{i}", 4.2) for i in range(7)]
    rows += [_row("a", 9.8), _row("b", 11.0), _row("c", 12.7)]
    found = find_anomalies(rows, lambda _: True, lambda r, m: r.region)
    assert sorted(a.region for a in found) == [f"low{i}" for i in range(7)]
    assert {a.planning for a in found} == {11.0}


def test_a_lone_dear_region_is_listed_but_planned_at_its_own_price():
    rows = [_row("a", 1.0), _row("b", 1.1), _row("c", 1.05), _row("far", 2.5)]
    (found,) = find_anomalies(rows, lambda _: True, lambda r, m: r.region)
    assert (found.region, found.planning) == ("far", 2.5)


def test_spot_above_on_demand_is_planned_at_the_higher_figure():
    found = find_anomalies([_row("r1", 1.0, spot=1.5)], lambda _: False, lambda r, m: "row")
    assert [(a.market, a.planning) for a in found] == [("on_demand", 1.5)]


def test_prices_without_a_source_date_and_old_ones_warn():
    today = date(2026, 11, 25)
    undated = load_catalog().get("p5.48xlarge", "aws").prices["us-west-2"]
    assert "unknown date" in price_warnings(undated, "aws", today)[0]
    assert "--cloud aws --prices" in price_warnings(undated, "aws", today)[0]
    gcp = load_catalog().get("a2-highgpu-8g", "gcp").prices["us-central1"]
    assert "--cloud aws" not in price_warnings(gcp, "gcp", today)[0]
    listed = load_catalog().get("p5.48xlarge", "aws").prices["us-east-1"]
    assert "128 days old" in price_warnings(listed, "aws", today)[0]
    assert price_warnings(listed, "aws", date(2026, 8, 1)) == []
