"""EC2 nodes of one cluster.

* Every instance carries the cluster's ownership tags; listings filter on the cluster tag
  server-side and page to the end; ids a cluster-filtered describe does not confirm are never
  stopped, tagged or terminated, whatever the caller passes.
* Creation is idempotent (see :mod:`providers.aws.launch`), and a retried create first counts
  the instances already tagged with its launch request.
* Capacity failover: the node's subnets (else the provider's availability zones, else EC2's
  choice) are tried in order; capacity errors move on, any other error stops at once.
* ``cache_stopped_nodes``: terminating stops (spot instances, which cannot be stopped, are
  terminated) and creating first restarts stopped nodes of the same node type. A stopped
  node is claimed by ``StartInstances`` itself: only the call that saw it leave ``stopped``
  (``PreviousState``) counts it, so two creates never reuse the same one.
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from providers.aws import launch
from providers.aws import stopped as stopped_nodes
from providers.aws.account import AwsAccount
from providers.aws.client import batches, call, create_tags, make_client, pages
from providers.aws.cloud import AwsCloud, zones_of
from providers.aws.nodes import LIVE_STATES, market_of, to_node
from providers.aws.preflight import preflight
from providers.aws.resources import instance_type_resources
from providers.base import (
    CLOUD_PENDING,
    CLOUD_RUNNING,
    NODE_KIND_WORKER,
    ON_DEMAND,
    TAG_CLUSTER,
    TAG_LAUNCH_REQUEST,
    TAG_NODE_KIND,
    TAG_NODE_TYPE,
    AccountResource,
    LaunchResult,
    NodeProvider,
    Offering,
    ProviderNode,
    fill_in_order,
)
from providers.errors import CapacityError, ProviderError, launch_failure

logger = logging.getLogger(__name__)

IDS_PER_FILTER = 200
"""Values per DescribeInstances filter."""
NO_LATEST_CONSOLE = frozenset(
    {"UnsupportedOperation", "InvalidParameter", "InvalidParameterCombination"}
)
"""How EC2 refuses ``Latest`` console output (instance types not built on Nitro)."""


class AwsNodeProvider(NodeProvider):
    """EC2 instances tagged with this cluster's name."""

    cloud = AwsCloud()

    def __init__(self, provider_config: Mapping[str, Any], cluster_name: str) -> None:
        super().__init__(provider_config, cluster_name)
        self.ec2 = make_client(self.provider_config)
        self.cache_stopped = bool(self.provider_config.get("cache_stopped_nodes", False))
        self._subnet_zones: dict[str, str] = {}
        self._account: AwsAccount | None = None

    @property
    def account(self) -> AwsAccount:
        """The cluster's IAM roles, instance profiles and security group."""
        if self._account is None:
            iam = make_client(self.provider_config, "iam")
            self._account = AwsAccount(self.ec2, iam, self.cluster_name, self.provider_config)
        return self._account

    # Listing ------------------------------------------------------------------------------
    def nodes(self, tag_filters: Mapping[str, str] | None = None) -> list[ProviderNode]:
        return self._describe([("instance-state-name", LIVE_STATES)], tag_filters)

    def node(self, node_id: str) -> ProviderNode | None:
        found = self._describe([("instance-id", [node_id])])
        return found[0] if found else None

    def _describe(
        self,
        filters: Sequence[tuple[str, Sequence[str]]],
        tag_filters: Mapping[str, str] | None = None,
    ) -> list[ProviderNode]:
        """This cluster's instances matching ``filters`` and ``tag_filters``, every page."""
        tags = {**(tag_filters or {}), TAG_CLUSTER: self.cluster_name}
        if (tag_filters or {}).get(TAG_CLUSTER, self.cluster_name) != self.cluster_name:
            return []  # another cluster's nodes are never ours to see
        wanted = [*filters, *((f"tag:{key}", [value]) for key, value in sorted(tags.items()))]
        answers = pages(
            self.ec2,
            "describe_instances",
            Filters=[{"Name": name, "Values": list(values)} for name, values in wanted],
        )
        found = {
            instance["InstanceId"]: to_node(instance)
            for page in answers
            for reservation in page["Reservations"]
            for instance in reservation["Instances"]
        }
        return sorted(found.values(), key=lambda node: node.id)

    def _owned(self, node_ids: Iterable[str]) -> list[ProviderNode]:
        """The non-terminated nodes among ``node_ids`` this cluster owns; others are logged."""
        wanted = sorted(set(node_ids))
        owned = [
            node
            for start in range(0, len(wanted), IDS_PER_FILTER)
            for node in self._describe(
                [
                    ("instance-id", wanted[start : start + IDS_PER_FILTER]),
                    ("instance-state-name", LIVE_STATES),
                ]
            )
        ]
        strangers = set(wanted) - {node.id for node in owned}
        if strangers:
            logger.warning(
                "skipping %s: not live instances of cluster %s",
                ", ".join(sorted(strangers)),
                self.cluster_name,
            )
        return owned

    # Creating -----------------------------------------------------------------------------
    def create_node(
        self,
        node_config: Mapping[str, Any],
        tags: Mapping[str, str],
        count: int,
        launch_request_id: str,
        all_or_nothing: bool = False,
    ) -> LaunchResult:
        tags = {
            **{key: str(value) for key, value in tags.items()},
            **self.ownership_tags({}),
            TAG_LAUNCH_REQUEST: launch_request_id,
        }
        kind = tags.get(TAG_NODE_KIND, NODE_KIND_WORKER)
        node_config = {**self.account.launch_settings(node_config, kind), **node_config}
        held = {node.id: node for node in self.nodes({TAG_LAUNCH_REQUEST: launch_request_id})}
        if self.cache_stopped and not all_or_nothing and len(held) < count:
            held.update(
                (n.id, n) for n in self._restart_stopped(node_config, tags, count - len(held))
            )
        request = _Request(node_config, tags, count, launch_request_id, all_or_nothing)
        zones = zones_of(node_config, self.provider_config)

        def attempt(subnet: str, zone: str) -> tuple[Offering, Callable[[], None]]:
            offering = Offering(node_config.get("InstanceType", ""), zone, market_of(node_config))
            return offering, lambda: self._fill(request, held, subnet, offering)

        placements = launch.placements(self.ec2, node_config, zones, self._subnet_zones)
        attempts = (attempt(subnet, zone) for subnet, zone in placements)
        launched_with, errors = fill_in_order(attempts, held, count)
        return self._result(launch_request_id, count, held, launched_with, errors)

    def _fill(
        self,
        request: _Request,
        held: dict[str, ProviderNode],
        subnet: str | None,
        offering: Offering,
    ) -> None:
        """Launch into ``held`` until it holds ``request.count``.

        Each call first asks for all it still wants (MinCount = MaxCount); after a capacity
        error it takes what EC2 can start (MinCount=1), unless the request is all or nothing.
        A capacity error with nothing left to give up raises (for the next placement).
        """
        whole = True
        while len(held) < request.count:
            wanted = request.count - len(held)
            params = launch.run_params(request.node_config, request.tags, subnet, offering)
            params.update(MinCount=wanted if whole else 1, MaxCount=wanted)
            params["ClientToken"] = launch.client_token(
                request.launch_request_id, len(held), params
            )
            try:
                started = launch.run_instances(
                    self.ec2,
                    params,
                    offering,
                    lambda: self._unheld(request.launch_request_id, held),
                )
            except CapacityError:
                if not whole or wanted == 1 or request.all_or_nothing:
                    raise
                whole = False
                continue
            if not started:
                return
            held.update((node.id, node) for node in started)

    def _unheld(
        self, launch_request_id: str, held: Mapping[str, ProviderNode]
    ) -> list[ProviderNode]:
        """The launch request's instances not in ``held`` (what a lost answer launched)."""
        return [n for n in self.nodes({TAG_LAUNCH_REQUEST: launch_request_id}) if n.id not in held]

    def _result(
        self,
        launch_request_id: str,
        count: int,
        held: Mapping[str, ProviderNode],
        offering: Offering | None,
        errors: list[ProviderError],
    ) -> LaunchResult:
        """What the launch request holds; raises when it holds nothing."""
        if not held and errors:
            raise launch_failure(errors)
        if len(held) < count and not errors:
            errors.append(CapacityError(f"EC2 started {len(held)} of {count}", offering=offering))
        nodes = tuple(sorted(held.values(), key=lambda node: node.id))
        return LaunchResult(launch_request_id, count, nodes, offering, tuple(errors))

    def _restart_stopped(
        self, node_config: Mapping[str, Any], tags: Mapping[str, str], wanted: int
    ) -> list[ProviderNode]:
        """Up to ``wanted`` stopped nodes of this node type and instance type, restarted."""
        stopped = self._describe(
            [
                ("instance-state-name", ["stopped"]),
                ("instance-type", [node_config.get("InstanceType", "")]),
            ],
            {TAG_NODE_TYPE: tags.get(TAG_NODE_TYPE, "")},
        )
        return stopped_nodes.restart(self.ec2, stopped[:wanted], tags)

    # Changing -----------------------------------------------------------------------------
    def terminate_nodes(self, node_ids: Sequence[str]) -> list[str]:
        owned = self._owned(node_ids)
        cached = [n for n in owned if self.cache_stopped and n.market == ON_DEMAND]
        stop = [n.id for n in cached if n.state in (CLOUD_PENDING, CLOUD_RUNNING)]
        terminate = [n.id for n in owned if n not in cached]
        for method, ids in (("stop_instances", stop), ("terminate_instances", terminate)):
            for batch in batches(ids):
                call(self.ec2, method, InstanceIds=batch)
        return [n.id for n in owned]

    def set_tags(self, node_ids: Iterable[str], tags: Mapping[str, str]) -> None:
        if TAG_CLUSTER in tags:
            logger.warning("not changing %s: ownership is not transferable", TAG_CLUSTER)
        tags = {key: str(value) for key, value in tags.items() if key != TAG_CLUSTER}
        if tags:
            create_tags(self.ec2, [n.id for n in self._owned(node_ids)], tags)

    # Diagnosing ---------------------------------------------------------------------------
    def console_output(self, node_id: str) -> str | None:
        """``GetConsoleOutput`` of an instance this cluster owns (the latest output where the
        instance type keeps it, Nitro; else what EC2 buffered), decoded; None for others'."""
        if self.node(node_id) is None:
            return None
        try:
            answer = call(self.ec2, "get_console_output", InstanceId=node_id, Latest=True)
        except ProviderError as error:
            if error.code not in NO_LATEST_CONSOLE:
                raise
            answer = call(self.ec2, "get_console_output", InstanceId=node_id)
        return _decoded(answer.get("Output"))

    # Before launching --------------------------------------------------------------------
    def preflight(self, node_configs: Mapping[str, Mapping[str, Any]]) -> list[str]:
        return preflight(self.ec2, self.provider_config, node_configs)

    def prepare_account(
        self, node_configs: Mapping[str, Mapping[str, Any]], head_type: str | None
    ) -> list[AccountResource]:
        return self.account.prepare(node_configs, head_type)

    def account_resources(self) -> list[AccountResource]:
        return self.account.find()

    def purge_account(self) -> list[AccountResource]:
        return self.account.purge()

    # Filling out node types -------------------------------------------------------------
    def instance_type_resources(self, instance_type: str) -> dict[str, float]:
        """What a node of ``instance_type`` advertises: the catalog, else the EC2 API."""
        return instance_type_resources(self.ec2, instance_type)


def _decoded(output: str | None) -> str | None:
    """EC2's base64 console output as text (None when it holds none yet); an answer that is
    not base64 (some EC2 stand-ins send the text itself) is taken as the text."""
    if not output:
        return None
    try:
        raw = base64.b64decode("".join(output.split()), validate=True)
    except (binascii.Error, ValueError):
        return output
    return raw.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class _Request:
    """One ``create_node`` call's arguments, with the tags it puts on every instance."""

    node_config: Mapping[str, Any]
    tags: Mapping[str, str]
    count: int
    launch_request_id: str
    all_or_nothing: bool
