"""EC2 error codes, classified into the provider error taxonomy.

The class comes from the code EC2 returns (``Error.Code``), never from the message text; the
message and code travel with the error so the user sees what the cloud said.
"""

from __future__ import annotations

import re
from typing import Any

from providers.base import SPOT, Offering
from providers.errors import (
    AccessDeniedError,
    CapacityError,
    InvalidConfigError,
    NodeNotFoundError,
    ProviderError,
    QuotaError,
    ThrottledError,
)

CAPACITY = frozenset(
    {
        "InsufficientInstanceCapacity",
        "InsufficientCapacity",
        "InsufficientHostCapacity",
        "InsufficientReservedInstanceCapacity",
        "InsufficientFreeAddressesInSubnet",  # this subnet is full; the next one may not be
        "UnfulfillableCapacity",
        "SpotMaxPriceTooLow",  # spot prices differ by zone
        "Unsupported",  # the instance type is not offered in this availability zone
    }
)
INSTANCE_QUOTAS = frozenset(
    {"VcpuLimitExceeded", "InstanceLimitExceeded", "MaxSpotInstanceCountExceeded"}
)
OTHER_QUOTAS = {
    "VolumeLimitExceeded": "EBS storage for the volume type (Service Quotas, Amazon EBS)",
    "AddressLimitExceeded": "EC2-VPC Elastic IPs",
    "NetworkInterfaceLimitExceeded": "Network interfaces per Region (Amazon VPC)",
}
THROTTLED = frozenset(
    {
        "RequestLimitExceeded",
        "Throttling",
        "ThrottlingException",
        "RequestThrottled",
        "RequestThrottledException",
        "EC2ThrottledException",
    }
)
PERMISSION = frozenset(
    {
        "UnauthorizedOperation",
        "AuthFailure",
        "AccessDenied",
        "AccessDeniedException",
        "OptInRequired",
        "PendingVerification",
        "Blocked",
    }
)
NOT_FOUND = frozenset({"InvalidInstanceID.NotFound"})
INVALID_EXACT = frozenset(
    {
        "InvalidParameter",
        "InvalidParameterValue",
        "InvalidParameterCombination",
        "InvalidRequest",
        "MissingParameter",
        "UnknownParameter",
        "IdempotentParameterMismatch",
        "InvalidInstanceID.Malformed",
    }
)
INVALID_PREFIXES = (
    "InvalidAMIID.",
    "InvalidSubnetID.",
    "InvalidGroup.",
    "InvalidGroupId.",
    "InvalidSecurityGroupID.",
    "InvalidKeyPair.",
    "InvalidBlockDeviceMapping",
    "InvalidSnapshot.",
    "InvalidLaunchTemplate",
    "InvalidPlacementGroup.",
    "InvalidNetworkInterfaceID.",
    "InvalidVpcID.",
    "InvalidZone.",
    "InvalidUserData.",
)
FAMILY_BUCKETS = {
    **dict.fromkeys("acdhimrtz", "Standard (A, C, D, H, I, M, R, T, Z)"),
    "p": "P",
    "g": "G and VT",
    "vt": "G and VT",
    "f": "F",
    "inf": "Inf",
    "trn": "Trn",
    "dl": "DL",
    "x": "X",
    "u": "High Memory",
    "hpc": "HPC",
    "mac": "",  # Dedicated Hosts, no vCPU bucket
}


def classify(error: Any, offering: Offering | None = None, service: str = "ec2") -> ProviderError:
    """The taxonomy error for a botocore ``ClientError`` (its code and operation) from
    ``service`` (the IAM action prefix: ``ec2``, ``iam``...)."""
    body = error.response.get("Error", {})
    code = body.get("Code", "")
    message = body.get("Message", str(error))
    operation = getattr(error, "operation_name", "") or "request"
    kwargs: dict[str, Any] = {"offering": offering, "code": code, "raw_message": message}
    if code in CAPACITY:
        return CapacityError(f"no capacity for {offering}: {message}", **kwargs)
    if code in INSTANCE_QUOTAS or code in OTHER_QUOTAS:
        quota = OTHER_QUOTAS.get(code) or instance_quota(code, offering)
        return QuotaError(f"raise the quota {quota!r}: {message}", quota=quota, **kwargs)
    if code in THROTTLED:
        return ThrottledError(f"EC2 throttled {operation} after retries: {message}", **kwargs)
    if code in PERMISSION:
        action = f"{service}:{operation}"
        return AccessDeniedError(f"not allowed to {action}: {message}", action=action, **kwargs)
    if code in NOT_FOUND:
        return NodeNotFoundError(message, **kwargs)
    if code in INVALID_EXACT or code.startswith(INVALID_PREFIXES):
        return InvalidConfigError(f"{operation} rejected the request: {message}", **kwargs)
    return ProviderError(f"{operation} failed: {message}", **kwargs)


def instance_quota(code: str, offering: Offering | None) -> str:
    """The Service Quotas name of the vCPU bucket ``offering`` draws from."""
    spot = code == "MaxSpotInstanceCountExceeded" or (offering and offering.market == SPOT)
    found = re.match(r"[a-z]+", offering.instance_type) if offering else None
    family = found.group() if found else ""
    bucket = FAMILY_BUCKETS.get(family, FAMILY_BUCKETS.get(family[:1], ""))
    if not bucket:
        kind = "Spot Instance requests" if spot else "On-Demand instances"
        return f"EC2 {kind} (vCPUs) of the instance family"
    if spot:
        return f"All {bucket} Spot Instance Requests"
    return f"Running On-Demand {bucket} instances"
