"""Fresh EC2 prices from recorded Price List and DescribeSpotPriceHistory responses over HTTP."""

import json
from datetime import datetime, timezone

import boto3
import pytest

from instance_catalog.price_refresh import refresh_prices
from instance_catalog.prices import refreshed_aws_prices
from instance_catalog.refresh import CatalogRefreshError
from tests.fakes.aws_replay import load_recordings, replay_server

NOW = datetime(2026, 11, 24, 9, 30, tzinfo=timezone.utc)


@pytest.fixture
def session(monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AUTOSCALE_CATALOG_DIR", str(tmp_path))
    return boto3.session.Session(region_name="us-east-1")


def _refresh(session, url: str, regions: list[str], now: datetime = NOW) -> dict:
    return refresh_prices(session, now, regions, ec2_endpoint_url=url, pricing_endpoint_url=url)


def test_on_demand_and_lowest_zone_spot_prices_per_region(session, tmp_path):
    with replay_server(load_recordings()) as (url, requests):
        fresh = _refresh(session, url, ["us-east-1", "us-west-2"])
    assert fresh["us-east-1"] == {
        "date": "2026-11-24",
        "prices": {
            "g5.xlarge": [1.006, None],  # second Price List page; no spot offer recorded
            "m4.xlarge": [0.2, 0.059],  # cheapest of three zones
            "p5.48xlarge": [55.04, 11.9873],  # cheaper zone is on the second spot page
        },
    }
    assert fresh["us-west-2"]["prices"] == {"m4.xlarge": [0.2, 0.0704]}
    assert json.loads((tmp_path / "aws_prices.json").read_text())["regions"] == fresh
    pricing = [sent for service, sent in requests if service == "pricing"]
    assert {f["Field"]: f["Value"] for f in pricing[0]["Filters"]} == {
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
        "regionCode": "us-east-1",
    }


def test_a_later_refresh_of_some_regions_keeps_the_others(session):
    with replay_server(load_recordings()) as (url, _):
        _refresh(session, url, ["us-east-1", "us-west-2"])
        _refresh(session, url, ["us-west-2"], now=datetime(2026, 12, 1, tzinfo=timezone.utc))
    regions = refreshed_aws_prices()["regions"]
    assert (regions["us-east-1"]["date"], regions["us-west-2"]["date"]) == (
        "2026-11-24",
        "2026-12-01",
    )


def test_missing_permission_names_the_iam_action(session):
    denied = {
        "service": "pricing",
        "request": {"Operation": "GetProducts"},
        "status": 400,
        "response": {"__type": "AccessDeniedException", "Message": "not authorized"},
    }
    with replay_server([denied]) as (url, _), pytest.raises(CatalogRefreshError) as caught:
        _refresh(session, url, ["us-east-1"])
    assert "missing IAM permission pricing:GetProducts" in str(caught.value)


def test_spot_permission_is_named_too(session):
    recordings = [r for r in load_recordings() if r["service"] == "pricing"]
    with replay_server(recordings) as (url, _), pytest.raises(CatalogRefreshError) as caught:
        _refresh(session, url, ["us-west-2"])
    assert "ec2:DescribeSpotPriceHistory failed with InvalidParameterValue" in str(caught.value)


def test_unreadable_refreshed_prices_are_ignored_with_a_warning(session, tmp_path, caplog):
    (tmp_path / "aws_prices.json").write_text("{half")
    assert refreshed_aws_prices() == {}
    assert "ignoring refreshed prices" in caplog.text
