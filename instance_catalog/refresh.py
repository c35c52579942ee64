"""Build the EC2 instance-type snapshot from the cloud's own API responses.

Two sources, one shape: the live EC2 API (``DescribeInstanceTypes`` and
``DescribeInstanceTypeOfferings`` in every region, paginated to the end), or, with no
credentials, the copy of those responses that moto ships. The bundled
``data/aws_instance_types.json`` is made by ``python -m instance_catalog.refresh --from-moto``;
``autoscale catalog refresh --cloud aws`` writes a live one to the user's catalog folder,
which then takes precedence.
"""

from __future__ import annotations

import argparse
import gzip
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from instance_catalog.aws import DATA_FILE, Record, encode_zones, slim
from instance_catalog.user_catalog import write_json

IAM_ACTIONS = {
    "describe_regions": "ec2:DescribeRegions",
    "describe_instance_types": "ec2:DescribeInstanceTypes",
    "describe_instance_type_offerings": "ec2:DescribeInstanceTypeOfferings",
    "describe_spot_price_history": "ec2:DescribeSpotPriceHistory",
    "get_products": "pricing:GetProducts",
}
PERMISSION_ERROR_CODES = frozenset(
    {"UnauthorizedOperation", "AccessDenied", "AccessDeniedException", "AuthFailure"}
)


class CatalogRefreshError(RuntimeError):
    """The live refresh could not complete; the message says what to fix."""


def build_snapshot(
    records: Iterable[Mapping[str, Any]],
    offerings: Iterable[tuple[str, str, str]],
    source: str,
) -> dict[str, Any]:
    """The snapshot document from records and (instance type, region, zone) offerings."""
    kept = {r["InstanceType"]: slim(r) for r in records}
    zones: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for name, region, zone in offerings:
        if name in kept:
            zones[name][region].add(zone)
    return {
        "source": source,
        "generated_at": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "instance_types": dict(sorted(kept.items())),
        **encode_zones(zones),
    }


def snapshot_from_moto() -> dict[str, Any]:
    """The snapshot from the DescribeInstanceTypes data moto ships (offline, no account)."""
    import moto

    base = Path(moto.__file__).parent / "ec2" / "resources"
    with gzip.open(base / "instance_types.json.gz") as handle:
        records = json.load(handle).values()
    offerings = []
    for path in sorted((base / "instance_type_offerings" / "availability-zone").glob("*.json.gz")):
        region = path.name.split(".", 1)[0]
        with gzip.open(path) as handle:
            offerings.extend((o["InstanceType"], region, o["Location"]) for o in json.load(handle))
    return build_snapshot(records, offerings, source=f"moto {moto.__version__} EC2 snapshot")


def snapshot_from_ec2(
    session: Any, regions: Iterable[str] | None = None, endpoint_url: str | None = None
) -> dict[str, Any]:
    """The snapshot from the live EC2 API of every (or the given) region."""
    if regions is None:
        regions = discover_regions(session, endpoint_url)
    records: dict[str, Record] = {}
    offerings: list[tuple[str, str, str]] = []
    for region in regions:
        client = session.client("ec2", region_name=region, endpoint_url=endpoint_url)
        for page in pages(client, "describe_instance_types"):
            for record in page["InstanceTypes"]:
                records.setdefault(record["InstanceType"], record)
        for page in pages(
            client, "describe_instance_type_offerings", LocationType="availability-zone"
        ):
            offerings.extend(
                (o["InstanceType"], region, o["Location"]) for o in page["InstanceTypeOfferings"]
            )
    return build_snapshot(records.values(), offerings, source="EC2 API")


def discover_regions(session: Any, endpoint_url: str | None = None) -> list[str]:
    """Every region enabled for the account (``DescribeRegions``)."""
    region = session.region_name or "us-east-1"
    client = session.client("ec2", region_name=region, endpoint_url=endpoint_url)
    return sorted(r["RegionName"] for r in _call(client, "describe_regions")["Regions"])


def pages(client: Any, operation: str, **kwargs: Any) -> Iterable[dict[str, Any]]:
    """Every page of ``operation``; a failure names the IAM action it needs."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield from client.get_paginator(operation).paginate(**kwargs)
    except ClientError as err:
        raise _refresh_error(operation, err) from err
    except BotoCoreError as err:
        raise CatalogRefreshError(f"{IAM_ACTIONS[operation]} failed: {err}") from err


def _call(client: Any, operation: str, **kwargs: Any) -> dict[str, Any]:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return getattr(client, operation)(**kwargs)
    except ClientError as err:
        raise _refresh_error(operation, err) from err
    except BotoCoreError as err:
        raise CatalogRefreshError(f"{IAM_ACTIONS[operation]} failed: {err}") from err


def _refresh_error(operation: str, err: Any) -> CatalogRefreshError:
    code = err.response.get("Error", {}).get("Code", "")
    message = err.response.get("Error", {}).get("Message", "")
    action = IAM_ACTIONS[operation]
    if code in PERMISSION_ERROR_CODES:
        return CatalogRefreshError(
            f"missing IAM permission {action} ({code}): allow it for these credentials"
        )
    return CatalogRefreshError(f"{action} failed with {code}: {message}")


def main() -> None:
    parser = argparse.ArgumentParser(description="Build the bundled EC2 catalog snapshot.")
    parser.add_argument("--from-moto", action="store_true", help="use moto's shipped data")
    parser.add_argument("--output", type=Path, default=Path(__file__).parent / "data" / DATA_FILE)
    args = parser.parse_args()
    if args.from_moto:
        snapshot = snapshot_from_moto()
    else:
        import boto3

        snapshot = snapshot_from_ec2(boto3.session.Session())
    write_json(snapshot, args.output)
    print(f"wrote {len(snapshot['instance_types'])} instance types to {args.output}")


if __name__ == "__main__":
    main()
