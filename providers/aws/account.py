"""What `up` makes in an AWS account for one cluster, least privilege, and `down --purge`
removes: an IAM role and instance profile for the head (what the monitor needs, limited to
instances carrying the cluster tag), one for workers only when their report channel needs a
permission (a cluster without a head: reports in tags), and a security group open within
the cluster (plus Ray's ``IpPermissions``, e.g. SSH, only where the config asks).

Everything made is tagged with the cluster; what exists under our name without the tag is
never changed or deleted. Node configs that name their own ``IamInstanceProfile`` or
security groups keep them, and nothing is made for them.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping
from typing import Any

from botocore.exceptions import ClientError

from providers.aws.client import call
from providers.aws.errors import classify
from providers.base import (
    NODE_KIND_HEAD,
    NODE_KIND_WORKER,
    TAG_CLUSTER,
    AccountResource,
)
from providers.errors import InvalidConfigError, ProviderError

logger = logging.getLogger(__name__)

POLICY_NAME = "accel-autoscaler"
ROLE_TRUST = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Principal": {"Service": "ec2.amazonaws.com"},
            "Action": "sts:AssumeRole",
        }
    ],
}


def resource_name(cluster: str, kind: str) -> str:
    """``accel-<cluster>-<kind>`` within IAM's name rules (64 characters, ``[\\w+=,.@-]``)."""
    slug = re.sub(r"[^\w+=,.@-]", "-", cluster)[: 64 - len(kind) - 8]
    return f"accel-{slug}-{kind}"


def head_policy(cluster: str, worker_role_arn: str | None) -> dict[str, Any]:
    """The monitor's permissions: launch, tag, stop and terminate only instances carrying
    the cluster tag; describe; read console output of its own nodes; read the cluster's own
    roles and profiles (to launch with them); pass the worker role."""
    owned = {"StringEquals": {f"ec2:ResourceTag/{TAG_CLUSTER}": cluster}}
    prefix = resource_name(cluster, "")
    statements: list[dict[str, Any]] = [
        {"Sid": "Describe", "Effect": "Allow", "Action": ["ec2:Describe*"], "Resource": "*"},
        {
            "Sid": "LaunchTagged",
            "Effect": "Allow",
            "Action": "ec2:RunInstances",
            "Resource": ["arn:aws:ec2:*:*:instance/*", "arn:aws:ec2:*:*:volume/*"],
            "Condition": {"StringEquals": {f"aws:RequestTag/{TAG_CLUSTER}": cluster}},
        },
        {
            "Sid": "LaunchFrom",
            "Effect": "Allow",
            "Action": "ec2:RunInstances",
            "Resource": [
                f"arn:aws:ec2:*:*:{kind}/*"
                for kind in (
                    "image",
                    "subnet",
                    "network-interface",
                    "security-group",
                    "key-pair",
                    "launch-template",
                    "placement-group",
                )
            ]
            + ["arn:aws:ec2:*::image/*", "arn:aws:ec2:*::snapshot/*"],
        },
        {
            "Sid": "TagAtLaunch",
            "Effect": "Allow",
            "Action": "ec2:CreateTags",
            "Resource": ["arn:aws:ec2:*:*:instance/*", "arn:aws:ec2:*:*:volume/*"],
            "Condition": {"StringEquals": {"ec2:CreateAction": "RunInstances"}},
        },
        {
            "Sid": "ManageOwned",
            "Effect": "Allow",
            "Action": [
                "ec2:CreateTags",
                "ec2:TerminateInstances",
                "ec2:StopInstances",
                "ec2:StartInstances",
                "ec2:GetConsoleOutput",
            ],
            "Resource": "arn:aws:ec2:*:*:instance/*",
            "Condition": owned,
        },
    ]
    statements.append(
        {
            "Sid": "ReadOwnIdentity",
            "Effect": "Allow",
            "Action": ["iam:GetRole", "iam:ListRoleTags", "iam:GetInstanceProfile"],
            "Resource": [
                f"arn:aws:iam::*:role/{prefix}*",
                f"arn:aws:iam::*:instance-profile/{prefix}*",
            ],
        }
    )
    if worker_role_arn:
        statements.append(
            {
                "Sid": "PassWorkerRole",
                "Effect": "Allow",
                "Action": "iam:PassRole",
                "Resource": worker_role_arn,
            }
        )
    return {"Version": "2012-10-17", "Statement": statements}


def worker_policy(cluster: str) -> dict[str, Any]:
    """The permissions of workers of a cluster without a head: their agent writes its report
    into its own instance's tags (tag instances of this cluster, describe)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "Describe",
                "Effect": "Allow",
                "Action": "ec2:DescribeInstances",
                "Resource": "*",
            },
            {
                "Sid": "Report",
                "Effect": "Allow",
                "Action": "ec2:CreateTags",
                "Resource": "arn:aws:ec2:*:*:instance/*",
                "Condition": {"StringEquals": {f"ec2:ResourceTag/{TAG_CLUSTER}": cluster}},
            },
        ],
    }


class AwsAccount:
    """One cluster's IAM roles, instance profiles and security group in one region."""

    def __init__(
        self, ec2: Any, iam: Any, cluster: str, provider_config: Mapping[str, Any]
    ) -> None:
        self.ec2 = ec2
        self.iam = iam
        self.cluster = cluster
        group = provider_config.get("security_group")
        self.group_settings: Mapping[str, Any] = group if isinstance(group, Mapping) else {}
        self.group_name = str(
            self.group_settings.get("GroupName") or resource_name(cluster, "nodes")
        )
        self._launch: dict[str, dict[str, Any]] | None = None

    # Make ---------------------------------------------------------------------------------
    def prepare(
        self, node_configs: Mapping[str, Mapping[str, Any]], head_type: str | None
    ) -> list[AccountResource]:
        """Make (or find) what the node configs need; idempotent."""
        made: list[AccountResource] = []
        worker_arn = None
        if head_type is None and any(not _own_profile(c) for c in node_configs.values()):
            # Without a head, workers report into their own tags; with one, to its monitor,
            # and then they need no permission at all (and get no role).
            worker_arn = self._role(NODE_KIND_WORKER, worker_policy(self.cluster), made)
        head = node_configs.get(head_type) if head_type else None
        if head is not None and not _own_profile(head):
            self._role(NODE_KIND_HEAD, head_policy(self.cluster, worker_arn), made)
        if any(not _own_groups(c) for c in node_configs.values()):
            self._security_group(node_configs, made)
        self._launch = None
        return made

    def _role(self, kind: str, policy: Mapping[str, Any], made: list[AccountResource]) -> str:
        """The role and instance profile ``accel-<cluster>-<kind>``; the role's ARN."""
        name = resource_name(self.cluster, kind)
        tags = [{"Key": TAG_CLUSTER, "Value": self.cluster}]
        role = self._get(lambda: self.iam.get_role(RoleName=name)["Role"])
        if role is None:
            role = call(
                self.iam,
                "create_role",
                RoleName=name,
                AssumeRolePolicyDocument=json.dumps(ROLE_TRUST),
                Description=f"accel-autoscaler {kind} nodes of cluster {self.cluster}",
                Tags=tags,
            )["Role"]
            made.append(AccountResource("iam-role", name, role["Arn"], created=True))
        else:
            self._check_ours("IAM role", name, self._role_tags(name))
            made.append(AccountResource("iam-role", name, role["Arn"]))
        call(
            self.iam,
            "put_role_policy",
            RoleName=name,
            PolicyName=POLICY_NAME,
            PolicyDocument=json.dumps(policy),
        )
        profile = self._get(
            lambda: self.iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]
        )
        if profile is None:
            profile = call(
                self.iam, "create_instance_profile", InstanceProfileName=name, Tags=tags
            )["InstanceProfile"]
            made.append(AccountResource("instance-profile", name, profile["Arn"], created=True))
        else:
            self._check_ours("instance profile", name, profile.get("Tags") or [])
            made.append(AccountResource("instance-profile", name, profile["Arn"]))
        if not any(r["RoleName"] == name for r in profile.get("Roles", [])):
            call(self.iam, "add_role_to_instance_profile", InstanceProfileName=name, RoleName=name)
        return role["Arn"]

    def _security_group(
        self, node_configs: Mapping[str, Mapping[str, Any]], made: list[AccountResource]
    ) -> None:
        vpc = self._vpc(node_configs)
        found = self._groups(vpc)
        if found:
            group = found[0]
            self._check_ours("security group", self.group_name, group.get("Tags") or [])
            made.append(AccountResource("security-group", self.group_name, group["GroupId"]))
            return
        group_id = call(
            self.ec2,
            "create_security_group",
            GroupName=self.group_name,
            Description=f"accel-autoscaler cluster {self.cluster}",
            VpcId=vpc,
            TagSpecifications=[
                {
                    "ResourceType": "security-group",
                    "Tags": [{"Key": TAG_CLUSTER, "Value": self.cluster}],
                }
            ],
        )["GroupId"]
        within = {"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": group_id}]}
        permissions = [within, *(self.group_settings.get("IpPermissions") or [])]
        call(
            self.ec2,
            "authorize_security_group_ingress",
            GroupId=group_id,
            IpPermissions=permissions,
        )
        made.append(AccountResource("security-group", self.group_name, group_id, created=True))

    # Find (read-only) -----------------------------------------------------------------------
    def find(self) -> list[AccountResource]:
        """What exists for the cluster now, ours only."""
        found = []
        for kind in (NODE_KIND_HEAD, NODE_KIND_WORKER):
            name = resource_name(self.cluster, kind)
            profile = self._get(
                lambda name=name: self.iam.get_instance_profile(InstanceProfileName=name)[
                    "InstanceProfile"
                ]
            )
            if profile is not None and _tagged(profile.get("Tags") or [], self.cluster):
                found.append(AccountResource("instance-profile", name, profile["Arn"]))
            role = self._get(lambda name=name: self.iam.get_role(RoleName=name)["Role"])
            if role is not None and _tagged(self._role_tags(name), self.cluster):
                found.append(AccountResource("iam-role", name, role["Arn"]))
        found += [
            AccountResource("security-group", self.group_name, group["GroupId"])
            for group in self._groups(None)
            if _tagged(group.get("Tags") or [], self.cluster)
        ]
        return found

    def launch_settings(self, node_config: Mapping[str, Any], kind: str) -> dict[str, Any]:
        """What a launch of ``kind`` adds to ``node_config``: the cluster's instance profile
        and security group where the node config names none of its own."""
        if self._launch is None:
            try:
                found = self.find()
            except ProviderError as err:  # e.g. no IAM read permission: launch as configured
                logger.warning("cannot read the cluster's IAM and network resources: %s", err)
                found = []
            self._launch = {
                k: {
                    r.kind: r.name if r.kind == "instance-profile" else r.id
                    for r in found
                    if r.kind == "security-group"
                    or (r.kind == "instance-profile" and r.name == resource_name(self.cluster, k))
                }
                for k in (NODE_KIND_HEAD, NODE_KIND_WORKER)
            }
        have = self._launch.get(kind, {})
        settings: dict[str, Any] = {}
        if "instance-profile" in have and not _own_profile(node_config):
            settings["IamInstanceProfile"] = {"Name": have["instance-profile"]}
        if "security-group" in have and not _own_groups(node_config):
            settings["SecurityGroupIds"] = [have["security-group"]]
        return settings

    # Remove ---------------------------------------------------------------------------------
    def purge(self) -> list[AccountResource]:
        """Delete what :meth:`find` finds (ours only); what was deleted."""
        deleted = []
        for resource in self.find():
            if resource.kind == "instance-profile":
                profile = self.iam.get_instance_profile(InstanceProfileName=resource.name)
                for role in profile["InstanceProfile"].get("Roles", []):
                    call(
                        self.iam,
                        "remove_role_from_instance_profile",
                        InstanceProfileName=resource.name,
                        RoleName=role["RoleName"],
                    )
                call(self.iam, "delete_instance_profile", InstanceProfileName=resource.name)
            elif resource.kind == "iam-role":
                for policy in self.iam.list_role_policies(RoleName=resource.name)["PolicyNames"]:
                    call(self.iam, "delete_role_policy", RoleName=resource.name, PolicyName=policy)
                call(self.iam, "delete_role", RoleName=resource.name)
            else:
                call(self.ec2, "delete_security_group", GroupId=resource.id)
            deleted.append(resource)
        self._launch = None
        return deleted

    # Helpers --------------------------------------------------------------------------------
    def _vpc(self, node_configs: Mapping[str, Mapping[str, Any]]) -> str:
        subnets = sorted(
            {
                s
                for c in node_configs.values()
                for s in [c.get("SubnetId"), *c.get("SubnetIds", [])]
                if s
            }
        )
        if subnets:
            found = call(self.ec2, "describe_subnets", SubnetIds=subnets)["Subnets"]
            vpcs = sorted({s["VpcId"] for s in found})
            if len(vpcs) != 1:
                raise InvalidConfigError(
                    f"the node types' subnets span VPCs {', '.join(vpcs)}: one security group "
                    "cannot serve them; name SecurityGroupIds in each node_config",
                    field="SubnetIds",
                )
            return vpcs[0]
        defaults = call(
            self.ec2, "describe_vpcs", Filters=[{"Name": "isDefault", "Values": ["true"]}]
        )["Vpcs"]
        if not defaults:
            raise InvalidConfigError(
                "the region has no default VPC: give the node types SubnetIds", field="SubnetIds"
            )
        return defaults[0]["VpcId"]

    def _groups(self, vpc: str | None) -> list[dict[str, Any]]:
        filters = [{"Name": "group-name", "Values": [self.group_name]}]
        if vpc:
            filters.append({"Name": "vpc-id", "Values": [vpc]})
        return call(self.ec2, "describe_security_groups", Filters=filters)["SecurityGroups"]

    def _role_tags(self, name: str) -> list[dict[str, str]]:
        return call(self.iam, "list_role_tags", RoleName=name)["Tags"]

    def _check_ours(self, what: str, name: str, tags: list[Mapping[str, str]]) -> None:
        if not _tagged(tags, self.cluster):
            raise InvalidConfigError(
                f"{what} {name} exists and is not cluster {self.cluster}'s (no {TAG_CLUSTER} "
                "tag): it is left alone; name your own in the node configs instead"
            )

    @staticmethod
    def _get(read: Callable[[], Any]) -> Any:
        """``read()``, or None when IAM says there is no such entity."""
        try:
            return read()
        except ClientError as err:
            if err.response["Error"]["Code"] == "NoSuchEntity":
                return None
            raise classify(err, None, "iam") from err


def _tagged(tags: list[Mapping[str, str]], cluster: str) -> bool:
    return any(t.get("Key") == TAG_CLUSTER and t.get("Value") == cluster for t in tags)


def _own_profile(node_config: Mapping[str, Any]) -> bool:
    return bool(node_config.get("IamInstanceProfile"))


def _own_groups(node_config: Mapping[str, Any]) -> bool:
    interfaces = node_config.get("NetworkInterfaces") or []
    return bool(
        node_config.get("SecurityGroupIds")
        or node_config.get("SecurityGroups")
        or any(isinstance(n, Mapping) and n.get("Groups") for n in interfaces)
    )
