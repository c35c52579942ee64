"""EC2 nodes of one cluster, through boto3.

* Every instance carries the cluster's ownership tags; listings filter on the cluster tag
  server-side and page to the end; ids without the tag are never stopped, tagged or
  terminated, whatever the caller passes.
* Creation is idempotent: a ``ClientToken`` derived from the launch request, the offering and
  the attempt, plus a look for instances already tagged with the launch request, so a retry
  after a timeout never launches twice (and any surplus a retried call produced is
  terminated at once).
* Capacity failover: each configured subnet / availability zone is tried in order; capacity
  errors move on, configuration and permission errors stop at once.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from providers.aws.errors import classify
from providers.base import (
    ON_DEMAND,
    PENDING,
    RUNNING,
    SPOT,
    STOPPED,
    STOPPING,
    TAG_CLUSTER,
    TAG_LAUNCH_REQUEST,
    TAG_NODE_TYPE,
    TERMINATED,
    TERMINATING,
    Host,
    LaunchResult,
    NodeProvider,
    Offering,
    ProviderNode,
)
from providers.errors import CapacityError, ProviderError

logger = logging.getLogger(__name__)

STATES = {
    "pending": PENDING,
    "running": RUNNING,
    "stopping": STOPPING,
    "stopped": STOPPED,
    "shutting-down": TERMINATING,
    "terminated": TERMINATED,
}
LIVE_STATES = ["pending", "running", "stopping", "stopped"]
BATCH = 1000
"""Ids per EC2 call (the API's limit)."""
OUR_KEYS = ("market", "SubnetIds")
"""node_config keys we read and EC2 does not take."""


class AwsNodeProvider(NodeProvider):
    """EC2 instances tagged with this cluster's name."""

    def __init__(self, provider_config: Mapping[str, Any], cluster_name: str) -> None:
        super().__init__(provider_config, cluster_name)
        self.ec2 = _client(self.provider_config)
        self.cache_stopped = bool(self.provider_config.get("cache_stopped_nodes", False))
        self._subnet_zones: dict[str, str] = {}

    # Listing ------------------------------------------------------------------------------
    def nodes(self, tag_filters: Mapping[str, str] | None = None) -> list[ProviderNode]:
        filters = [{"Name": "instance-state-name", "Values": LIVE_STATES}]
        return self._describe(filters, tag_filters)

    def node(self, node_id: str) -> ProviderNode | None:
        found = self._describe([{"Name": "instance-id", "Values": [node_id]}])
        return found[0] if found else None

    def _describe(
        self, filters: list[dict[str, Any]], tag_filters: Mapping[str, str] | None = None
    ) -> list[ProviderNode]:
        tags = {**(tag_filters or {}), TAG_CLUSTER: self.cluster_name}
        filters = filters + [{"Name": f"tag:{k}", "Values": [v]} for k, v in sorted(tags.items())]
        nodes = []
        for page in self._call(
            "DescribeInstances",
            "describe_instances",
            paginate=True,
            Filters=filters,
            PaginationConfig={"PageSize": BATCH},
        ):
            for reservation in page["Reservations"]:
                nodes.extend(_node(instance) for instance in reservation["Instances"])
        return sorted(nodes, key=lambda n: n.id)

    def _owned(self, node_ids: Iterable[str]) -> list[str]:
        wanted = sorted(set(node_ids))
        owned: set[str] = set()
        for start in range(0, len(wanted), BATCH):
            chunk = wanted[start : start + BATCH]
            owned.update(
                n.id
                for n in self._describe([{"Name": "instance-id", "Values": chunk}])
                if n.state != TERMINATED
            )
        for stranger in set(wanted) - owned:
            logger.warning(
                "refusing to act on %s: not owned by cluster %s", stranger, self.cluster_name
            )
        return sorted(owned)

    # Creating -----------------------------------------------------------------------------
    def create_node(
        self,
        node_config: Mapping[str, Any],
        tags: Mapping[str, str],
        count: int,
        launch_request_id: str,
        all_or_nothing: bool = False,
    ) -> LaunchResult:
        tags = {**self.ownership_tags(tags), TAG_LAUNCH_REQUEST: launch_request_id}
        nodes = self.nodes({TAG_LAUNCH_REQUEST: launch_request_id})  # a retry finds its own
        if len(nodes) < count and self.cache_stopped:
            nodes += self._restart_stopped(tags, count - len(nodes), launch_request_id)
        errors: list[ProviderError] = []
        offering = None
        attempt = 0
        for subnet, zone in self._placements(node_config):
            offering = Offering(node_config.get("InstanceType", "?"), zone, _market(node_config))
            whole = True  # first ask for all of them at once; on a capacity error, any part
            while len(nodes) < count:  # EC2 may start fewer than asked: ask again for the rest
                attempt += 1
                try:
                    started = self._run(
                        node_config,
                        tags,
                        count - len(nodes),
                        whole or all_or_nothing,
                        subnet,
                        offering,
                        _token(launch_request_id, offering, attempt),
                    )
                except CapacityError as error:
                    if whole and not all_or_nothing and count - len(nodes) > 1:
                        whole = False
                        continue
                    errors.append(error)
                    break
                except ProviderError as error:
                    if not nodes:
                        raise  # configuration and permission errors fail fast, no failover
                    errors.append(error)
                    return self._result(launch_request_id, count, offering, errors)
                whole = False
                if not started:
                    break
                nodes += started
            if len(nodes) >= count:
                break
        return self._result(launch_request_id, count, offering, errors)

    def _result(
        self,
        launch_request_id: str,
        count: int,
        offering: Offering | None,
        errors: list[ProviderError],
    ) -> LaunchResult:
        """What the request holds now; raises when it holds nothing."""
        nodes = self._without_surplus(launch_request_id, count)
        if not nodes and errors:
            raise errors[-1]
        if 0 < len(nodes) < count and not errors:
            errors.append(CapacityError(f"EC2 started {len(nodes)} of {count}", offering=offering))
        return LaunchResult(launch_request_id, count, tuple(nodes), offering, tuple(errors))

    def _run(
        self,
        node_config: Mapping[str, Any],
        tags: Mapping[str, str],
        count: int,
        at_once: bool,
        subnet: str | None,
        offering: Offering,
        token: str,
    ) -> list[ProviderNode]:
        params = {k: v for k, v in node_config.items() if k not in OUR_KEYS}
        tag_list = [{"Key": k, "Value": v} for k, v in sorted(tags.items())]
        params["TagSpecifications"] = [
            *[
                s
                for s in params.get("TagSpecifications", [])
                if s.get("ResourceType") not in ("instance", "volume")
            ],
            {"ResourceType": "instance", "Tags": tag_list},
            {"ResourceType": "volume", "Tags": tag_list},
        ]
        if subnet:
            params["SubnetId"] = subnet
        elif offering.zone:
            params["Placement"] = {**params.get("Placement", {}), "AvailabilityZone": offering.zone}
        if offering.market == SPOT:
            params.setdefault("InstanceMarketOptions", {"MarketType": "spot"})
        response = self._call(
            "RunInstances",
            "run_instances",
            offering=offering,
            MinCount=count if at_once else 1,
            MaxCount=count,
            ClientToken=token,
            **params,
        )
        return [_node(instance) for instance in response["Instances"]]

    def _placements(self, node_config: Mapping[str, Any]) -> list[tuple[str | None, str | None]]:
        """(subnet, zone) to try in order: the node's subnets, else the provider's zones."""
        subnets = list(node_config.get("SubnetIds") or [])
        if node_config.get("SubnetId"):
            subnets.insert(0, node_config["SubnetId"])
        if subnets:
            return [(subnet, self._zone_of(subnet)) for subnet in subnets]
        zones = [
            z.strip()
            for z in str(self.provider_config.get("availability_zone") or "").split(",")
            if z.strip()
        ]
        return [(None, zone) for zone in zones] or [(None, None)]

    def _zone_of(self, subnet: str) -> str | None:
        if subnet not in self._subnet_zones:
            found = self._call("DescribeSubnets", "describe_subnets", SubnetIds=[subnet])
            self._subnet_zones[subnet] = found["Subnets"][0]["AvailabilityZone"]
        return self._subnet_zones[subnet]

    def _without_surplus(self, launch_request_id: str, count: int) -> list[ProviderNode]:
        """The request's instances; any beyond ``count`` (a retried call the cloud did not
        deduplicate) are terminated at once so nothing leaks."""
        nodes = self.nodes({TAG_LAUNCH_REQUEST: launch_request_id})
        keep = sorted(nodes, key=lambda n: (n.launched_at or 0, n.id))[:count]
        surplus = [n.id for n in nodes if n not in keep]
        if surplus:
            logger.warning(
                "terminating %d duplicate instance(s) of %s", len(surplus), launch_request_id
            )
            self._call("TerminateInstances", "terminate_instances", InstanceIds=surplus)
        return keep

    def _restart_stopped(
        self, tags: Mapping[str, str], wanted: int, launch_request_id: str
    ) -> list[ProviderNode]:
        """Claim stopped nodes of the same type: tag them with this launch request, read the
        tags back, and start only those still carrying it (a concurrent claim loses)."""
        stopped = [
            n for n in self.nodes({TAG_NODE_TYPE: tags[TAG_NODE_TYPE]}) if n.state == STOPPED
        ][:wanted]
        if not stopped:
            return []
        ids = [n.id for n in stopped]
        self.set_tags(ids, {TAG_LAUNCH_REQUEST: launch_request_id})
        mine = [n.id for n in self.nodes({TAG_LAUNCH_REQUEST: launch_request_id}) if n.id in ids]
        if mine:
            self._call("StartInstances", "start_instances", InstanceIds=mine)
        return [n for n in self.nodes({TAG_LAUNCH_REQUEST: launch_request_id}) if n.id in mine]

    # Changing -----------------------------------------------------------------------------
    def terminate_nodes(self, node_ids: Sequence[str]) -> list[str]:
        owned = self._owned(node_ids)
        operation = (
            ("StopInstances", "stop_instances")
            if self.cache_stopped
            else ("TerminateInstances", "terminate_instances")
        )
        for start in range(0, len(owned), BATCH):
            self._call(*operation, InstanceIds=owned[start : start + BATCH])
        return owned

    def set_tags(self, node_ids: Iterable[str], tags: Mapping[str, str]) -> None:
        owned = self._owned(node_ids)
        tag_list = [{"Key": k, "Value": v} for k, v in sorted(tags.items()) if k != TAG_CLUSTER]
        for start in range(0, len(owned), BATCH):
            self._call(
                "CreateTags", "create_tags", Resources=owned[start : start + BATCH], Tags=tag_list
            )

    def instance_type_resources(self, instance_type: str) -> dict[str, float]:
        """What a node of ``instance_type`` advertises: the catalog, else the EC2 API."""
        from instance_catalog.aws import instance_type as catalog_entry
        from instance_catalog.catalog import UnknownInstanceTypeError, load_catalog
        from instance_catalog.resources import resources_for

        try:
            return resources_for(load_catalog().get(instance_type, "aws"))
        except UnknownInstanceTypeError:
            found = self._call(
                "DescribeInstanceTypes", "describe_instance_types", InstanceTypes=[instance_type]
            )
            return resources_for(catalog_entry(found["InstanceTypes"][0], {}))

    # Calls --------------------------------------------------------------------------------
    def _call(
        self,
        name: str,
        method: str,
        offering: Offering | None = None,
        paginate: bool = False,
        **kwargs: Any,
    ) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            if paginate:
                return list(self.ec2.get_paginator(method).paginate(**kwargs))
            return getattr(self.ec2, method)(**kwargs)
        except ClientError as error:
            raise classify(error, name, offering) from error
        except BotoCoreError as error:
            raise ProviderError(f"{name} failed: {error}", offering=offering) from error


def _client(config: Mapping[str, Any]) -> Any:
    import boto3
    from botocore.config import Config

    session = boto3.session.Session(
        region_name=config.get("region") or "us-east-1",
        aws_access_key_id=config.get("aws_access_key_id"),
        aws_secret_access_key=config.get("aws_secret_access_key"),
    )
    retries = {"mode": "standard", "max_attempts": int(config.get("max_attempts", 4))}
    return session.client(
        "ec2", endpoint_url=config.get("endpoint_url"), config=Config(retries=retries)
    )


def _market(node_config: Mapping[str, Any]) -> str:
    options = node_config.get("InstanceMarketOptions") or {}
    if node_config.get("market") == SPOT or options.get("MarketType") == "spot":
        return SPOT
    return ON_DEMAND


def _token(launch_request_id: str, offering: Offering, attempt: int) -> str:
    """At most 64 characters: distinct per offering and attempt, stable across retries."""
    digest = hashlib.sha256(f"{offering}/{attempt}".encode()).hexdigest()[:16]
    return f"{launch_request_id[:40]}-{digest}"


def _node(instance: Mapping[str, Any]) -> ProviderNode:
    launched = instance.get("LaunchTime")
    return ProviderNode(
        id=instance["InstanceId"],
        state=STATES.get(instance["State"]["Name"], TERMINATED),
        tags={t["Key"]: t["Value"] for t in instance.get("Tags", [])},
        instance_type=instance.get("InstanceType", ""),
        zone=instance.get("Placement", {}).get("AvailabilityZone"),
        market=SPOT if instance.get("InstanceLifecycle") == "spot" else ON_DEMAND,
        hosts=(Host(0, instance.get("PrivateIpAddress"), instance.get("PublicIpAddress")),),
        launched_at=launched.timestamp() if launched else None,
    )
