"""Creating nodes over HTTP under faults: failover, fail-fast, partial fills, lost answers."""

from __future__ import annotations

import urllib.request

import pytest
from botocore.exceptions import ConnectionClosedError, ReadTimeoutError

from providers.base import TAG_CLUSTER, TAG_LAUNCH_REQUEST, TAG_NODE_TYPE
from providers.errors import (
    AccessDeniedError,
    CapacityError,
    InvalidConfigError,
    QuotaError,
    ThrottledError,
)
from tests.providers.aws.conftest import TAGS, node_config, params_of

ZONES = "us-east-1a,us-east-1b"


def live(ec2) -> list[dict]:
    """Every non-terminated instance in the account, whoever launched it."""
    pages = ec2.get_paginator("describe_instances").paginate(
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}]
    )
    return [i for page in pages for r in page["Reservations"] for i in r["Instances"]]


def no_capacity_in(zone: str, *, subnet: str | None = None):
    def rule(action, params):
        if action != "RunInstances":
            return None
        here = params.get("Placement.AvailabilityZone") == zone or (
            subnet is not None and params.get("SubnetId") == subnet
        )
        return "InsufficientInstanceCapacity" if here else None

    return rule


def test_created_nodes_carry_the_ownership_tags(provider, ami, ec2):
    result = provider.create_node(node_config(ami), TAGS, 3, "req-1")
    assert len(result.nodes) == 3 and not result.partial and not result.errors
    for instance in live(ec2):
        tags = {t["Key"]: t["Value"] for t in instance["Tags"]}
        assert tags[TAG_CLUSTER] == "alpha"
        assert tags[TAG_LAUNCH_REQUEST] == "req-1"
        assert tags[TAG_NODE_TYPE] == "gpu"


def test_capacity_in_one_zone_moves_to_the_next(provider, wire, ami):
    provider.provider_config["availability_zone"] = ZONES
    wire.fail(no_capacity_in("us-east-1a"))
    result = provider.create_node(node_config(ami), TAGS, 2, "req-1")
    assert [n.zone for n in result.nodes] == ["us-east-1b", "us-east-1b"]
    assert result.offering.zone == "us-east-1b"
    assert [(type(e), e.offering.zone) for e in result.errors] == [(CapacityError, "us-east-1a")]
    assert wire.sent["RunInstances"] == 3  # 1a: all of them, then any; 1b: all of them


def test_capacity_in_one_subnet_moves_to_the_next_subnet(provider, wire, ami, subnets):
    first, second = subnets["us-east-1c"], subnets["us-east-1d"]
    wire.fail(no_capacity_in("-", subnet=first))
    result = provider.create_node(node_config(ami, SubnetIds=[first, second]), TAGS, 1, "r")
    assert [n.zone for n in result.nodes] == ["us-east-1d"]
    assert result.errors[0].offering.zone == "us-east-1c"


def test_capacity_everywhere_raises_capacity_for_the_instance_type(provider, wire, ami):
    provider.provider_config["availability_zone"] = ZONES
    wire.fail(
        lambda action, _: "InsufficientInstanceCapacity" if action == "RunInstances" else None
    )
    with pytest.raises(CapacityError) as caught:
        provider.create_node(node_config(ami), TAGS, 1, "req-1")
    assert caught.value.code == "InsufficientInstanceCapacity"
    assert caught.value.offering.instance_type == "p4d.24xlarge"
    assert caught.value.offering.zone is None  # every zone tried: the type is out
    assert wire.sent["RunInstances"] == 2


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        ("VcpuLimitExceeded", QuotaError),
        ("UnauthorizedOperation", AccessDeniedError),
        ("InvalidParameterValue", InvalidConfigError),
    ],
)
def test_other_errors_fail_fast_without_trying_other_zones(provider, wire, ami, ec2, code, kind):
    provider.provider_config["availability_zone"] = ZONES
    wire.fail(lambda action, _: code if action == "RunInstances" else None)
    with pytest.raises(kind) as caught:
        provider.create_node(node_config(ami), TAGS, 1, "req-1")
    assert wire.sent["RunInstances"] == 1
    assert caught.value.code == code and caught.value.offering.zone == "us-east-1a"
    if kind is AccessDeniedError:
        assert caught.value.action == "ec2:RunInstances"
    if kind is QuotaError:
        assert caught.value.quota == "Running On-Demand P instances"
    assert live(ec2) == []


def test_an_invalid_ami_fails_fast_from_the_cloud_itself(provider, wire, ec2, monkeypatch):
    from moto import settings

    monkeypatch.setattr(settings, "ENABLE_AMI_VALIDATION", True)
    provider.provider_config["availability_zone"] = ZONES
    with pytest.raises(InvalidConfigError) as caught:
        provider.create_node(node_config("ami-00000000000000000"), TAGS, 1, "req-1")
    assert caught.value.code.startswith("InvalidAMIID")
    assert wire.sent["RunInstances"] == 1 and live(ec2) == []


def test_an_unknown_subnet_fails_fast(provider, wire, ami):
    with pytest.raises(InvalidConfigError) as caught:
        provider.create_node(node_config(ami, SubnetIds=["subnet-0000000f"]), TAGS, 1, "r")
    assert caught.value.code == "InvalidSubnetID.NotFound"
    assert wire.sent["RunInstances"] == 0


def test_a_throttling_storm_is_retried_by_the_sdk_then_classified(make_provider):
    provider = make_provider(max_attempts=2)
    from tests.providers.aws.conftest import Wire

    wire = Wire(provider)
    wire.fail(lambda action, _: "RequestLimitExceeded")
    with pytest.raises(ThrottledError) as caught:
        provider.nodes()
    assert wire.sent["DescribeInstances"] == 3  # the first try and 2 retries, no more
    assert caught.value.code == "RequestLimitExceeded"


def test_throttled_launches_are_sent_again_with_the_same_token(provider, wire, ami, ec2):
    tokens = []

    def throttle_twice(action, params):
        if action == "RunInstances":
            tokens.append(params["ClientToken"])
            return "RequestLimitExceeded" if len(tokens) <= 2 else None
        return None

    wire.fail(throttle_twice)
    result = provider.create_node(node_config(ami), TAGS, 1, "req-1")
    assert len(result.nodes) == 1 and len(live(ec2)) == 1
    assert len(tokens) == 3 and len(set(tokens)) == 1


def only_one_at_a_time(*, then: str | None = None, in_zone: str | None = None):
    """EC2 can start one instance, not more: a request for several (MinCount > 1) fails with
    no capacity; a request for any number (MinCount=1) gets one (moto starts MinCount), then
    fails with ``then``, in ``in_zone`` (or anywhere)."""
    runs: list[dict[str, str]] = []

    def rule(action, params):
        if action != "RunInstances":
            return None
        here = in_zone is None or params.get("Placement.AvailabilityZone") == in_zone
        runs.append(params)
        if here and params["MinCount"] != "1":
            return "InsufficientInstanceCapacity"
        if here and then and sum(r["MinCount"] == "1" for r in runs) > 1:
            return then
        return None

    return rule, runs


def test_a_partial_fill_is_reported_not_silent(provider, wire, ami, ec2):
    rule, runs = only_one_at_a_time(then="InsufficientInstanceCapacity")
    wire.fail(rule)
    result = provider.create_node(node_config(ami), TAGS, 3, "req-1")
    assert result.partial and len(result.nodes) == 1 and len(live(ec2)) == 1
    assert isinstance(result.errors[-1], CapacityError)
    asked = [(r["MinCount"], r["MaxCount"]) for r in runs]
    assert asked == [("3", "3"), ("1", "3"), ("1", "2")]  # all, then any, then the rest
    assert len({r["ClientToken"] for r in runs}) == 3


def test_a_partial_fill_is_completed_in_the_next_zone(provider, wire, ami):
    provider.provider_config["availability_zone"] = ZONES
    rule, _ = only_one_at_a_time(then="InsufficientInstanceCapacity", in_zone="us-east-1a")
    wire.fail(rule)
    result = provider.create_node(node_config(ami), TAGS, 3, "req-1")
    assert sorted(n.zone for n in result.nodes) == ["us-east-1a", "us-east-1b", "us-east-1b"]
    assert not result.partial and result.offering.zone == "us-east-1b"
    assert [e.offering.zone for e in result.errors] == ["us-east-1a"]


def test_a_partial_fill_ended_by_another_error_keeps_what_started(provider, wire, ami, ec2):
    provider.provider_config["availability_zone"] = ZONES
    rule, runs = only_one_at_a_time(then="VcpuLimitExceeded")
    wire.fail(rule)
    result = provider.create_node(node_config(ami), TAGS, 3, "req-1")
    assert len(result.nodes) == 1 and len(live(ec2)) == 1
    assert isinstance(result.errors[-1], QuotaError)
    assert all(r["Placement.AvailabilityZone"] == "us-east-1a" for r in runs)  # no failover


def test_a_retried_create_after_a_partial_fill_launches_only_the_rest(provider, wire, ami, ec2):
    rule, runs = only_one_at_a_time(then="InsufficientInstanceCapacity")
    wire.fail(rule)
    first = provider.create_node(node_config(ami), TAGS, 3, "req-1")
    wire.rules[:] = [
        lambda action, params: runs.append(params) if action == "RunInstances" else None
    ]
    again = provider.create_node(node_config(ami), TAGS, 3, "req-1")
    assert len(first.nodes) == 1 and len(again.nodes) == 3 and len(live(ec2)) == 3
    assert set(first.node_ids) < set(again.node_ids)
    assert (runs[-1]["MinCount"], runs[-1]["MaxCount"]) == ("2", "2")


def test_all_or_nothing_asks_ec2_for_the_whole_gang(provider, wire, ami, ec2):
    runs = []
    wire.fail(lambda action, params: runs.append(params) if action == "RunInstances" else None)
    result = provider.create_node(node_config(ami), TAGS, 4, "req-1", all_or_nothing=True)
    assert len(result.nodes) == 4
    assert [(r["MinCount"], r["MaxCount"]) for r in runs] == [("4", "4")]


def test_a_gang_without_capacity_launches_nothing(provider, wire, ami, ec2):
    rule, runs = only_one_at_a_time()
    wire.fail(rule)
    with pytest.raises(CapacityError):
        provider.create_node(node_config(ami), TAGS, 4, "req-1", all_or_nothing=True)
    assert live(ec2) == [] and [r["MinCount"] for r in runs] == ["4"]


def test_the_same_launch_request_never_launches_twice(provider, wire, ami, ec2):
    first = provider.create_node(node_config(ami), TAGS, 2, "req-1")
    again = provider.create_node(node_config(ami), TAGS, 2, "req-1")
    assert again.node_ids == first.node_ids and len(live(ec2)) == 2
    assert wire.sent["RunInstances"] == 1


@pytest.mark.parametrize("lost", [ReadTimeoutError, ConnectionClosedError])
def test_an_answer_lost_after_the_launch_does_not_launch_again(provider, ami, ec2, lost):
    reached = []

    def launch_then_lose_the_answer(request, **_kwargs):
        if params_of(request).get("Action") == "RunInstances" and not reached:
            body = request.body.encode() if isinstance(request.body, str) else request.body
            forward = urllib.request.Request(
                request.url, data=body, method="POST", headers=dict(request.headers)
            )
            urllib.request.urlopen(forward).read()  # the cloud launches...
            reached.append(True)
            raise lost(endpoint_url=request.url)  # ...and the caller never hears of it
        return None

    provider.ec2.meta.events.register_first("before-send.ec2", launch_then_lose_the_answer)
    result = provider.create_node(node_config(ami), TAGS, 2, "req-1")
    assert reached and len(result.nodes) == 2
    assert sorted(i["InstanceId"] for i in live(ec2)) == sorted(result.node_ids)


def test_a_request_lost_before_the_cloud_is_sent_again(provider, ami, ec2):
    lost = []

    def lose_first(request, **_kwargs):
        if params_of(request).get("Action") == "RunInstances" and not lost:
            lost.append(True)
            raise ReadTimeoutError(endpoint_url=request.url)
        return None

    provider.ec2.meta.events.register_first("before-send.ec2", lose_first)
    result = provider.create_node(node_config(ami), TAGS, 2, "req-1")
    assert lost and len(result.nodes) == 2 and len(live(ec2)) == 2


def test_spot_market_and_node_config_reach_ec2(provider, wire, ami, ec2):
    runs = []
    wire.fail(lambda action, params: runs.append(params) if action == "RunInstances" else None)
    config = node_config(
        ami,
        market="spot",
        UserData="echo hi",
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "team", "Value": "ml"}]}],
    )
    (node,) = provider.create_node(config, TAGS, 1, "req-1").nodes
    assert node.market == "spot" and node.tags["team"] == "ml"
    assert runs[0]["InstanceMarketOptions.MarketType"] == "spot"
    volume_tags = {
        v for k, v in runs[0].items() if k.startswith("TagSpecification.2.Tag.") and "Value" in k
    }
    assert runs[0]["TagSpecification.2.ResourceType"] == "volume" and "alpha" in volume_tags


def test_permission_errors_outside_launches_name_their_action(provider, wire, ami):
    ids = provider.create_node(node_config(ami), TAGS, 1, "req-1").node_ids
    wire.fail(lambda action, _: "UnauthorizedOperation" if action != "DescribeInstances" else None)
    with pytest.raises(AccessDeniedError) as caught:
        provider.terminate_nodes(ids)
    assert caught.value.action == "ec2:TerminateInstances"
    wire.fail(lambda action, _: "UnauthorizedOperation")
    with pytest.raises(AccessDeniedError) as caught:
        provider.nodes()
    assert caught.value.action == "ec2:DescribeInstances"
