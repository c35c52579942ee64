"""EC2 error codes land in the taxonomy, carrying the offering and what EC2 said."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from providers.aws.errors import classify
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

P4D = Offering("p4d.24xlarge", "us-east-1a")


def refused(code: str, operation: str = "RunInstances") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": f"EC2 says {code}"}}, operation)


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        ("InsufficientInstanceCapacity", CapacityError),
        ("InsufficientCapacity", CapacityError),
        ("InsufficientHostCapacity", CapacityError),
        ("UnfulfillableCapacity", CapacityError),
        ("Unsupported", CapacityError),
        ("VcpuLimitExceeded", QuotaError),
        ("InstanceLimitExceeded", QuotaError),
        ("MaxSpotInstanceCountExceeded", QuotaError),
        ("RequestLimitExceeded", ThrottledError),
        ("Throttling", ThrottledError),
        ("UnauthorizedOperation", AccessDeniedError),
        ("AuthFailure", AccessDeniedError),
        ("AccessDenied", AccessDeniedError),
        ("InvalidAMIID.NotFound", InvalidConfigError),
        ("InvalidAMIID.Malformed", InvalidConfigError),
        ("InvalidSubnetID.NotFound", InvalidConfigError),
        ("InvalidParameterValue", InvalidConfigError),
        ("InvalidParameterCombination", InvalidConfigError),
        ("InvalidGroup.NotFound", InvalidConfigError),
        ("InvalidKeyPair.NotFound", InvalidConfigError),
        ("InvalidInstanceID.NotFound", NodeNotFoundError),
    ],
)
def test_codes_map_to_the_taxonomy_with_offering_and_raw_text(code, kind):
    error = classify(refused(code), P4D)
    assert type(error) is kind
    assert (error.code, error.raw_message, error.offering) == (code, f"EC2 says {code}", P4D)


def test_unknown_codes_stay_plain_provider_errors_with_the_raw_code():
    error = classify(refused("SomethingNew"), P4D)
    assert type(error) is ProviderError
    assert error.code == "SomethingNew" and "EC2 says SomethingNew" in str(error)


def test_permission_errors_name_the_iam_action_of_the_operation():
    assert classify(refused("UnauthorizedOperation")).action == "ec2:RunInstances"
    denied = classify(refused("UnauthorizedOperation", "TerminateInstances"))
    assert denied.action == "ec2:TerminateInstances"


@pytest.mark.parametrize(
    ("code", "offering", "quota"),
    [
        ("VcpuLimitExceeded", P4D, "Running On-Demand P instances"),
        ("VcpuLimitExceeded", Offering("g6e.xlarge"), "Running On-Demand G and VT instances"),
        ("VcpuLimitExceeded", Offering("trn1.32xlarge"), "Running On-Demand Trn instances"),
        ("VcpuLimitExceeded", Offering("inf2.xlarge"), "Running On-Demand Inf instances"),
        (
            "VcpuLimitExceeded",
            Offering("im4gn.large"),
            "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances",
        ),
        ("MaxSpotInstanceCountExceeded", Offering("p5.48xlarge"), "All P Spot Instance Requests"),
        (
            "VcpuLimitExceeded",
            Offering("g5.xlarge", market=SPOT),
            "All G and VT Spot Instance Requests",
        ),
    ],
)
def test_quota_errors_name_the_quota_to_raise(code, offering, quota):
    error = classify(refused(code), offering)
    assert isinstance(error, QuotaError) and error.quota == quota
    assert quota in str(error)


def test_quota_of_an_unbucketed_family_still_says_what_to_raise():
    error = classify(refused("VcpuLimitExceeded"), Offering("mac2.metal"))
    assert "On-Demand" in error.quota
