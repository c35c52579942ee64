"""EC2 error codes, classified into the provider error taxonomy."""

from __future__ import annotations

from typing import Any

from providers.base import Offering
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
        "UnfulfillableCapacity",
        "Unsupported",  # the instance type is not offered in this availability zone
    }
)
QUOTAS = {
    "VcpuLimitExceeded": "the On-Demand vCPU quota of this instance family (Service Quotas, EC2)",
    "InstanceLimitExceeded": "the EC2 instance limit of this type",
    "MaxSpotInstanceCountExceeded": "the Spot vCPU quota of this instance family",
    "SpotMaxPriceTooLow": "the Spot max price of the launch",
}
THROTTLED = frozenset(
    {
        "RequestLimitExceeded",
        "Throttling",
        "ThrottlingException",
        "RequestThrottled",
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
        "Blocked",
    }
)
NOT_FOUND = frozenset({"InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"})
INVALID_PREFIXES = (
    "InvalidAMIID",
    "InvalidSubnet",
    "InvalidParameter",
    "InvalidGroup",
    "InvalidKeyPair",
    "InvalidInstanceType",
    "InvalidBlockDeviceMapping",
    "InvalidUserData",
    "MissingParameter",
    "InvalidIamInstanceProfile",
    "IdempotentParameterMismatch",
    "InvalidNetworkInterface",
)


def classify(error: Any, operation: str, offering: Offering | None = None) -> ProviderError:
    """The taxonomy class for a botocore ``ClientError`` raised by ``operation``."""
    body = error.response.get("Error", {})
    code = body.get("Code", "")
    message = body.get("Message", str(error))
    kwargs = {"offering": offering, "code": code, "raw_message": message}
    if code in CAPACITY:
        return CapacityError(f"no capacity for {offering}: {message}", **kwargs)
    if code in QUOTAS:
        return QuotaError(f"raise {QUOTAS[code]}: {message}", quota=QUOTAS[code], **kwargs)
    if code in THROTTLED:
        return ThrottledError(f"EC2 throttled {operation} after retries: {message}", **kwargs)
    if code in PERMISSION:
        action = f"ec2:{operation}"
        return AccessDeniedError(
            f"missing IAM permission {action}: {message}", action=action, **kwargs
        )
    if code in NOT_FOUND:
        return NodeNotFoundError(message, **kwargs)
    if code.startswith(INVALID_PREFIXES):
        return InvalidConfigError(f"{operation} rejected the request: {message}", **kwargs)
    return ProviderError(f"{operation} failed: {message}", **kwargs)
