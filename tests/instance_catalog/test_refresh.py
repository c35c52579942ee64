"""Building the EC2 snapshot from the live API (against moto) and from moto's shipped data."""

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from moto import mock_aws

from instance_catalog.aws import decode_zones
from instance_catalog.refresh import (
    CatalogRefreshError,
    discover_regions,
    snapshot_from_ec2,
    snapshot_from_moto,
)


class _Body:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_kwargs):
        yield self._body


def _action(request) -> str:
    body = request.body or b""
    return (
        (body.decode() if isinstance(body, bytes) else body).partition("Action=")[2].split("&")[0]
    )


def _deny(operation: str):
    """A before-send hook answering ``operation`` with EC2's UnauthorizedOperation."""
    body = (
        b"<Response><Errors><Error><Code>UnauthorizedOperation</Code>"
        b"<Message>You are not authorized to perform this operation.</Message>"
        b"</Error></Errors><RequestID>x</RequestID></Response>"
    )

    def hook(request, **_kwargs):
        if _action(request) == operation:
            return AWSResponse(request.url, 403, {}, _Body(body))
        return None

    return hook


@pytest.fixture
def aws(monkeypatch):
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        yield boto3.session.Session(region_name="us-east-1")


def test_live_refresh_paginates_every_instance_type_and_zone(aws):
    snapshot = snapshot_from_ec2(aws, regions=["us-east-1", "us-west-2"])
    types = snapshot["instance_types"]
    assert {"p4d.24xlarge", "trn1.32xlarge", "g5.xlarge", "m6i.large"} <= set(types)
    assert types["a1.large"]["ProcessorInfo"]["SupportedArchitectures"] == ["arm64"]
    assert types["p4de.24xlarge"]["GpuInfo"]["Gpus"][0]["Count"] == 8
    zones = decode_zones(snapshot)
    assert set(zones["g5.xlarge"]) == {"us-east-1", "us-west-2"}
    assert set(zones["g5.xlarge"]["us-east-1"]) <= {f"us-east-1{z}" for z in "abcdef"}
    # Paginated to the end: the same set of accelerator types as the full offline data.
    offline = snapshot_from_moto()["instance_types"]
    assert set(types) == set(offline)


def test_regions_are_discovered_when_none_given(aws):
    regions = discover_regions(aws)
    assert {"us-east-1", "eu-west-1", "ap-northeast-1"} <= set(regions)
    aws.events.register("before-send.ec2", _deny("DescribeRegions"))
    with pytest.raises(CatalogRefreshError, match="ec2:DescribeRegions"):
        discover_regions(aws)


def test_missing_permission_names_the_iam_action(aws):
    aws.events.register("before-send.ec2", _deny("DescribeInstanceTypes"))
    with pytest.raises(
        CatalogRefreshError, match="missing IAM permission ec2:DescribeInstanceTypes"
    ):
        snapshot_from_ec2(aws, regions=["us-east-1"])


def test_missing_offerings_permission_is_named_too(aws):
    aws.events.register("before-send.ec2", _deny("DescribeInstanceTypeOfferings"))
    with pytest.raises(CatalogRefreshError, match="ec2:DescribeInstanceTypeOfferings"):
        snapshot_from_ec2(aws, regions=["us-east-1"])
