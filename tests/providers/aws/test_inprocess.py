"""Units against moto in-process (``mock_aws``): records, request building, the client."""

from __future__ import annotations

import pytest
from moto import mock_aws

from providers.aws import AwsNodeProvider
from providers.aws.launch import client_token, run_params
from providers.base import SPOT, TAG_CLUSTER, TAG_NODE_TYPE, Offering
from tests.providers.aws.conftest import REGION, TAGS, node_config

OURS = {TAG_CLUSTER: "alpha", TAG_NODE_TYPE: "gpu"}


@pytest.fixture
def provider():
    with mock_aws():
        yield AwsNodeProvider({"type": "aws", "region": REGION}, "alpha")


@pytest.fixture
def ami(provider) -> str:
    return provider.ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]


def test_nodes_are_described_from_ec2_records(provider, ami):
    config = node_config(ami, InstanceMarketOptions={"MarketType": "spot"})
    (node,) = provider.create_node(config, TAGS, 1, "req-1").nodes
    (listed,) = provider.nodes()
    assert listed.id == node.id and listed.state in ("pending", "running")
    assert listed.instance_type == "p4d.24xlarge" and listed.market == SPOT
    assert listed.zone.startswith(REGION) and listed.launched_at > 0
    assert listed.internal_ip and listed.external_ip and len(listed.hosts) == 1
    assert provider.internal_ip(node.id) == listed.internal_ip
    assert provider.node_tags(node.id)[TAG_CLUSTER] == "alpha"


def test_instance_type_resources_come_from_the_catalog_then_the_api(provider):
    p4de = provider.instance_type_resources("p4de.24xlarge")
    assert p4de["GPU"] == 8 and p4de["accelerator_type:A100-80G"] == 1
    a1 = provider.instance_type_resources("a1.large")  # not catalogued: DescribeInstanceTypes
    assert a1 == {"CPU": 2.0, "memory": 4096.0 * 2**20}


def test_the_client_uses_standard_bounded_retries_region_and_endpoint():
    config = {"region": "eu-west-1", "endpoint_url": "http://127.0.0.1:9", "max_attempts": 1}
    client = AwsNodeProvider({"type": "aws", **config}, "alpha").ec2
    assert client.meta.region_name == "eu-west-1"
    assert client.meta.endpoint_url == "http://127.0.0.1:9"
    assert client.meta.config.retries == {"mode": "standard", "total_max_attempts": 2}


def test_our_tags_merge_into_the_nodes_tag_specifications():
    config = {
        "InstanceType": "p5.48xlarge",
        "ImageId": "ami-1",
        "SubnetIds": ["subnet-1"],
        "market": "on-demand",
        "InstanceMarketOptions": {"MarketType": "spot"},
        "TagSpecifications": [
            {"ResourceType": "instance", "Tags": [{"Key": "team", "Value": "ml"}]},
            {"ResourceType": "network-interface", "Tags": []},
            {"ResourceType": "volume", "Tags": [{"Key": TAG_CLUSTER, "Value": "mine"}]},
        ],
    }
    params = run_params(config, OURS, "subnet-1", Offering("p5.48xlarge", "us-east-1a"))
    specs = {spec["ResourceType"]: spec["Tags"] for spec in params["TagSpecifications"]}
    assert specs["instance"] == [
        {"Key": TAG_CLUSTER, "Value": "alpha"},
        {"Key": TAG_NODE_TYPE, "Value": "gpu"},
        {"Key": "team", "Value": "ml"},
    ]
    assert {"Key": TAG_CLUSTER, "Value": "alpha"} in specs["volume"] and len(specs["volume"]) == 2
    assert specs["network-interface"] == []
    assert params["SubnetId"] == "subnet-1"
    assert "SubnetIds" not in params and "market" not in params
    assert "InstanceMarketOptions" not in params  # market: on-demand wins


def test_spot_market_and_zone_placement_reach_the_request():
    params = run_params({"ImageId": "ami-1"}, OURS, None, Offering("g5.xlarge", "us-east-1b", SPOT))
    assert params["InstanceMarketOptions"] == {"MarketType": "spot"}
    assert params["Placement"] == {"AvailabilityZone": "us-east-1b"}


def test_a_subnet_goes_into_the_first_network_interface_when_there_are_some():
    config = {"ImageId": "ami-1", "NetworkInterfaces": [{"DeviceIndex": 0}, {"DeviceIndex": 1}]}
    params = run_params(config, OURS, "subnet-2", Offering("p5.48xlarge"))
    assert params["NetworkInterfaces"][0]["SubnetId"] == "subnet-2"
    assert "SubnetId" not in params and "SubnetId" not in params["NetworkInterfaces"][1]


def test_client_tokens_are_short_stable_and_distinct_per_request():
    long_id = "launch-" + "x" * 80
    base = {"InstanceType": "p5.48xlarge", "MinCount": 2, "MaxCount": 2}
    token = client_token(long_id, 0, base)
    assert len(token) <= 64 and token == client_token(long_id, 0, dict(base))
    others = {
        client_token(long_id + "y", 0, base),  # ids sharing a long prefix
        client_token(long_id, 1, base),  # the next attempt
        client_token(long_id, 0, {**base, "SubnetId": "subnet-2"}),  # another zone
        client_token(long_id, 0, {**base, "MinCount": 1}),
        client_token(long_id, 0, {**base, "InstanceMarketOptions": {"MarketType": "spot"}}),
    }
    assert token not in others and len(others) == 5
    assert all(len(t) <= 64 and t.isascii() for t in others)
