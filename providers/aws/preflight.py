"""What `up` checks on EC2 before launching, with read-only and dry-run calls: region, zones,
subnets, images, that each instance type is offered, and that RunInstances is allowed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from providers.base import split_zones


def preflight(
    ec2: Any, provider_config: Mapping[str, Any], node_configs: Mapping[str, Mapping[str, Any]]
) -> list[str]:
    """Problems that would make launches of ``node_configs`` (by node type) fail."""
    region = provider_config.get("region")
    if not region:
        return ["provider.region is required for AWS"]
    session = boto3.session.Session(
        aws_access_key_id=provider_config.get("aws_access_key_id"),
        aws_secret_access_key=provider_config.get("aws_secret_access_key"),
    )
    if session.get_credentials() is None:
        return ["no AWS credentials found (environment, ~/.aws, SSO or an instance role)"]
    try:
        if not ec2.describe_regions(RegionNames=[region])["Regions"]:
            return [f"{region!r} is not an EC2 region"]
        zones = {z["ZoneName"] for z in ec2.describe_availability_zones()["AvailabilityZones"]}
    except (BotoCoreError, ClientError) as err:
        return [f"region {region!r} is not usable: {err}"]
    problems = [
        f"availability zone {zone!r} is not in {region}"
        for zone in split_zones(provider_config.get("availability_zone"))
        if zone not in zones
    ]
    checks = (
        ("subnets", _missing_subnets),
        ("images", _missing_images),
        ("instance types", _unoffered_types),
        ("permissions", _dry_runs),
    )
    for what, check in checks:
        try:
            problems.extend(check(ec2, node_configs, region))
        except (BotoCoreError, ClientError) as err:
            problems.append(f"checking {what} failed: {err}")
    return problems


def _subnets_of(node_config: Mapping[str, Any]) -> list[str]:
    found = list(node_config.get("SubnetIds") or [])
    found += [node_config["SubnetId"]] if node_config.get("SubnetId") else []
    found += [n["SubnetId"] for n in node_config.get("NetworkInterfaces") or [] if "SubnetId" in n]
    return found


def _missing_subnets(ec2: Any, node_configs: Mapping[str, Mapping], region: str) -> list[str]:
    problems = []
    for subnet in sorted({s for c in node_configs.values() for s in _subnets_of(c)}):
        try:
            ec2.describe_subnets(SubnetIds=[subnet])
        except ClientError as err:
            if "NotFound" not in err.response["Error"]["Code"]:
                raise
            problems.append(f"subnet {subnet} does not exist in {region}")
    return problems


def _missing_images(ec2: Any, node_configs: Mapping[str, Mapping], region: str) -> list[str]:
    problems = []
    for image in sorted({c["ImageId"] for c in node_configs.values() if c.get("ImageId")}):
        try:
            found = ec2.describe_images(ImageIds=[image])["Images"]
        except ClientError as err:
            if not err.response["Error"]["Code"].startswith("InvalidAMIID"):
                raise
            found = []
        if not found:
            problems.append(f"image {image} does not exist in {region}")
    return problems


def _unoffered_types(ec2: Any, node_configs: Mapping[str, Mapping], region: str) -> list[str]:
    wanted = sorted({c["InstanceType"] for c in node_configs.values() if c.get("InstanceType")})
    if not wanted:
        return []
    offered: set[str] = set()
    pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
        LocationType="region", Filters=[{"Name": "instance-type", "Values": wanted}]
    )
    for page in pages:
        offered.update(o["InstanceType"] for o in page["InstanceTypeOfferings"])
    return [f"instance type {t} is not offered in {region}" for t in wanted if t not in offered]


def _dry_runs(ec2: Any, node_configs: Mapping[str, Mapping], region: str) -> list[str]:
    """``run_instances(DryRun=True)`` per node type: DryRunOperation means it would launch."""
    problems = []
    for name, node_config in node_configs.items():
        if not node_config.get("ImageId") or not node_config.get("InstanceType"):
            continue
        request = {
            "ImageId": node_config["ImageId"],
            "InstanceType": node_config["InstanceType"],
            "MinCount": 1,
            "MaxCount": 1,
        }
        subnets = _subnets_of(node_config)
        if subnets:
            request["SubnetId"] = subnets[0]
        try:
            ec2.run_instances(DryRun=True, **request)
        except ClientError as err:
            code, message = err.response["Error"]["Code"], err.response["Error"]["Message"]
            if code == "DryRunOperation":
                continue
            if code == "UnauthorizedOperation":
                problems.append(f"{name}: not allowed to launch (ec2:RunInstances): {message}")
            else:
                problems.append(f"{name}: a dry-run launch fails: {code}: {message}")
    return problems
