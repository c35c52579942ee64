"""`up`'s account preparation on EC2 and IAM, over moto's server: roles, instance profiles and
a security group made once, used by launches, removed by purge, and never someone else's."""

from __future__ import annotations

import json

import boto3
import pytest

from providers.aws.account import resource_name
from providers.base import NODE_KIND_HEAD, NODE_KIND_WORKER, TAG_CLUSTER, TAG_NODE_KIND
from providers.errors import InvalidConfigError
from tests.providers.aws.conftest import CLUSTER, REGION, TAGS


@pytest.fixture
def iam(server_url):
    return boto3.client("iam", region_name=REGION, endpoint_url=server_url)


def _configs(ami: str, **head_extra) -> dict:
    return {
        "head": {"InstanceType": "m5.large", "ImageId": ami, **head_extra},
        "gpu": {"InstanceType": "g5.xlarge", "ImageId": ami},
    }


def test_prepare_makes_each_resource_once_and_tags_it(provider, ami, iam, ec2):
    first = provider.prepare_account(_configs(ami), "head")
    assert sorted((r.kind, r.name, r.created) for r in first) == [
        ("iam-role", "accel-alpha-head", True),
        ("instance-profile", "accel-alpha-head", True),
        ("security-group", "accel-alpha-nodes", True),
    ]  # workers report to the head: they need no role at all
    again = provider.prepare_account(_configs(ami), "head")
    assert not any(r.created for r in again)
    assert {(r.kind, r.id) for r in again} == {(r.kind, r.id) for r in first}
    assert len(iam.list_roles()["Roles"]) == 1
    head = resource_name(CLUSTER, NODE_KIND_HEAD)
    assert {"Key": TAG_CLUSTER, "Value": CLUSTER} in iam.list_role_tags(RoleName=head)["Tags"]
    (group,) = [r for r in first if r.kind == "security-group"]
    (described,) = ec2.describe_security_groups(GroupIds=[group.id])["SecurityGroups"]
    assert {"Key": TAG_CLUSTER, "Value": CLUSTER} in described["Tags"]
    within = described["IpPermissions"][0]
    assert within["IpProtocol"] == "-1" and within["UserIdGroupPairs"][0]["GroupId"] == group.id
    assert sorted(r.name for r in provider.account_resources()) == sorted(r.name for r in first)


def test_without_a_head_workers_get_a_role_for_their_tag_reports_only(provider, ami, iam):
    made = provider.prepare_account(_configs(ami), None)
    worker = resource_name(CLUSTER, NODE_KIND_WORKER)
    assert sorted(r.name for r in made if r.kind == "iam-role") == [worker]
    document = iam.get_role_policy(RoleName=worker, PolicyName="accel-autoscaler")
    policy = document["PolicyDocument"]
    policy = policy if isinstance(policy, dict) else json.loads(policy)
    actions = sorted(s["Action"] for s in policy["Statement"])
    assert actions == ["ec2:CreateTags", "ec2:DescribeInstances"]
    (tagging,) = [s for s in policy["Statement"] if s["Action"] == "ec2:CreateTags"]
    assert tagging["Condition"]["StringEquals"] == {f"ec2:ResourceTag/{TAG_CLUSTER}": CLUSTER}


def test_the_head_policy_is_limited_to_the_clusters_instances(provider, ami, iam):
    provider.prepare_account(_configs(ami), "head")
    head = resource_name(CLUSTER, NODE_KIND_HEAD)
    document = iam.get_role_policy(RoleName=head, PolicyName="accel-autoscaler")["PolicyDocument"]
    policy = document if isinstance(document, dict) else json.loads(document)
    by_sid = {s["Sid"]: s for s in policy["Statement"]}
    tag = {f"ec2:ResourceTag/{TAG_CLUSTER}": CLUSTER}
    assert by_sid["ManageOwned"]["Condition"]["StringEquals"] == tag
    assert "ec2:TerminateInstances" in by_sid["ManageOwned"]["Action"]
    assert by_sid["LaunchTagged"]["Condition"]["StringEquals"] == {
        f"aws:RequestTag/{TAG_CLUSTER}": CLUSTER
    }
    assert "PassWorkerRole" not in by_sid  # no worker role to pass
    assert not any(
        s["Resource"] == "*" and s["Action"] != ["ec2:Describe*"] for s in by_sid.values()
    )


def test_launches_use_the_profile_of_their_kind_and_the_group(provider, ami, ec2):
    made = {r.kind + r.name: r for r in provider.prepare_account(_configs(ami), "head")}
    head = provider.create_node(
        _configs(ami)["head"], {**TAGS, TAG_NODE_KIND: NODE_KIND_HEAD}, 1, "h"
    ).nodes[0]
    worker = provider.create_node(_configs(ami)["gpu"], TAGS, 1, "w").nodes[0]
    described = {
        i["InstanceId"]: i
        for r in ec2.describe_instances(InstanceIds=[head.id, worker.id])["Reservations"]
        for i in r["Instances"]
    }
    profile = made["instance-profile" + resource_name(CLUSTER, NODE_KIND_HEAD)]
    assert described[head.id]["IamInstanceProfile"]["Arn"] == profile.id
    assert "IamInstanceProfile" not in described[worker.id]  # workers need no permission
    group = next(r for r in made.values() if r.kind == "security-group")
    for node in (head, worker):
        assert [g["GroupId"] for g in described[node.id]["SecurityGroups"]] == [group.id]


def test_named_profiles_and_groups_are_kept_and_nothing_is_made_for_them(provider, ami, ec2):
    own = ec2.create_security_group(GroupName="mine", Description="mine")["GroupId"]
    configs = {
        name: {**config, "IamInstanceProfile": {"Name": "team-profile"}, "SecurityGroupIds": [own]}
        for name, config in _configs(ami).items()
    }
    assert provider.prepare_account(configs, "head") == []


def test_a_same_named_role_of_someone_else_is_left_alone(provider, ami, iam):
    head = resource_name(CLUSTER, NODE_KIND_HEAD)
    iam.create_role(RoleName=head, AssumeRolePolicyDocument="{}")
    with pytest.raises(InvalidConfigError, match="not cluster alpha's"):
        provider.prepare_account(_configs(ami), "head")
    assert all(r.name != head for r in provider.purge_account())
    assert iam.get_role(RoleName=head)["Role"]["RoleName"] == head


def test_purge_removes_ours_only(provider, make_provider, ami, iam, ec2):
    provider.prepare_account(_configs(ami), "head")
    other = make_provider(cluster="beta")
    other.prepare_account(_configs(ami), "head")
    deleted = provider.purge_account()
    assert len(deleted) == 3
    assert provider.account_resources() == []
    assert len(other.account_resources()) == 3
    assert [r["RoleName"] for r in iam.list_roles()["Roles"]] == [
        resource_name("beta", NODE_KIND_HEAD)
    ]
