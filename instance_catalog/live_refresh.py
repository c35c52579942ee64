"""What ``autoscale catalog refresh`` asks and answers (each cloud's ``Cloud.refresh_catalog``
does the work), and the EC2 refresh: instance types or prices from the live APIs into the
user's catalog folder, which then takes precedence over the bundled snapshot."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

from instance_catalog.refresh import CatalogRefreshError


@dataclass(frozen=True)
class RefreshRequest:
    regions: Sequence[str] = ()
    prices: bool = False
    """Prices only (on-demand and spot), not instance types."""
    endpoint_url: str | None = None
    """The cloud's compute API endpoint (a VPC endpoint, LocalStack, an emulator)."""
    pricing_endpoint_url: str | None = None
    project: str | None = None
    """The project whose facts to read (GCP)."""


@dataclass
class RefreshReport:
    lines: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def refresh_aws(request: RefreshRequest) -> RefreshReport:
    """EC2 instance types (DescribeInstanceTypes/Offerings) or prices (Price List API and
    spot price history); needs AWS credentials."""
    import boto3

    session = boto3.session.Session()
    if session.get_credentials() is None:
        raise CatalogRefreshError(
            "no AWS credentials found: set AWS_PROFILE or AWS_ACCESS_KEY_ID/"
            "AWS_SECRET_ACCESS_KEY (the bundled catalog keeps working without them)"
        )
    if request.prices:
        return _aws_prices(session, request)
    return _aws_types(session, request)


def _aws_types(session, request: RefreshRequest) -> RefreshReport:
    from instance_catalog.aws import DATA_FILE, unresolved_accelerators
    from instance_catalog.refresh import snapshot_from_ec2
    from instance_catalog.user_catalog import user_catalog_dir, write_json

    snapshot = snapshot_from_ec2(
        session, list(request.regions) or None, endpoint_url=request.endpoint_url
    )
    path = user_catalog_dir() / DATA_FILE
    write_json(snapshot, path)
    report = RefreshReport([f"{len(snapshot['instance_types'])} instance types written to {path}"])
    report.warnings += [
        f"{name}: accelerator {cloud_name!r} has no canonical name; add an entry to the "
        "override file"
        for name, cloud_name in unresolved_accelerators(snapshot["instance_types"])
    ]
    return report


def _aws_prices(session, request: RefreshRequest) -> RefreshReport:
    from instance_catalog.price_refresh import refresh_prices
    from instance_catalog.prices import AWS_PRICES_FILE
    from instance_catalog.user_catalog import user_catalog_dir

    now = datetime.now(timezone.utc)
    fresh = refresh_prices(
        session, now, request.regions, request.endpoint_url, request.pricing_endpoint_url
    )
    on_demand = sum(len(block["prices"]) for block in fresh.values())
    spot = sum(1 for b in fresh.values() for _, s in b["prices"].values() if s is not None)
    return RefreshReport(
        [
            f"{on_demand} on-demand and {spot} spot prices in {len(fresh)} region(s) written "
            f"to {user_catalog_dir() / AWS_PRICES_FILE}"
        ]
    )
