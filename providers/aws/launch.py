"""One ``RunInstances`` request: its parameters, its idempotency token, its retries.

A retried request never launches twice, on two grounds:

* its ``ClientToken`` is a digest of everything it asks for (launch request, offering,
  subnet, how many the launch request already holds, how many it wants, the node config),
  so EC2 answers a resend with the instances of the first send, and a request that asks for
  anything else (another zone, the rest of a partial fill) gets a token of its own;
* when an answer is lost (a timeout, a closed connection), the instances tagged with the
  launch request are looked up before asking again (the SDK does not resend RunInstances
  itself), so a cloud that ignores tokens (moto) does not launch twice either.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from providers.aws.client import LOST_ANSWERS, call, errors_classified, retries_of
from providers.aws.nodes import to_node
from providers.base import SPOT, Offering, ProviderNode, split_zones

logger = logging.getLogger(__name__)

OUR_KEYS = frozenset({"market", "SubnetIds", "region", "availability_zone"})
"""``node_config`` keys this plugin reads and EC2 does not take."""
TAGGED_RESOURCES = ("instance", "volume")
MAX_BACKOFF_S = 20.0


def run_params(
    node_config: Mapping[str, Any],
    tags: Mapping[str, str],
    subnet: str | None,
    offering: Offering,
) -> dict[str, Any]:
    """``RunInstances`` parameters: the node config, placed, with our tags merged in."""
    params = {key: value for key, value in node_config.items() if key not in OUR_KEYS}
    params["TagSpecifications"] = _merge_tags(params.get("TagSpecifications") or [], tags)
    if subnet and params.get("NetworkInterfaces"):
        first, *rest = params["NetworkInterfaces"]
        params["NetworkInterfaces"] = [{**first, "SubnetId": subnet}, *rest]
    elif subnet:
        params["SubnetId"] = subnet
    elif offering.zone:
        params["Placement"] = {**params.get("Placement", {}), "AvailabilityZone": offering.zone}
    if offering.market == SPOT:
        params.setdefault("InstanceMarketOptions", {"MarketType": "spot"})
    else:
        params.pop("InstanceMarketOptions", None)
    return params


def _merge_tags(specs: list[Mapping[str, Any]], tags: Mapping[str, str]) -> list[dict[str, Any]]:
    """The node's own tag specifications with ours added (ours win) for instance and volume."""
    merged = [dict(spec) for spec in specs]
    for resource in TAGGED_RESOURCES:
        spec = next((s for s in merged if s.get("ResourceType") == resource), None)
        if spec is None:
            spec = {"ResourceType": resource, "Tags": []}
            merged.append(spec)
        theirs = {t["Key"]: t["Value"] for t in spec.get("Tags", []) if t["Key"] not in tags}
        spec["Tags"] = [{"Key": k, "Value": v} for k, v in sorted({**theirs, **tags}.items())]
    return merged


def placements(
    ec2: Any,
    node_config: Mapping[str, Any],
    zones: str | list[str] | None,
    subnet_zones: dict[str, str],
) -> list[tuple[str | None, str | None]]:
    """(subnet, zone) to try in order: the node's subnets, else ``zones``, else EC2's choice.

    ``subnet_zones`` caches each subnet's zone; an unknown subnet fails here, before a launch.
    """
    subnets = [node_config["SubnetId"]] if node_config.get("SubnetId") else []
    subnets += [s for s in node_config.get("SubnetIds") or [] if s not in subnets]
    if subnets:
        unknown = [s for s in subnets if s not in subnet_zones]
        if unknown:
            found = call(ec2, "describe_subnets", SubnetIds=unknown)["Subnets"]
            subnet_zones.update((s["SubnetId"], s["AvailabilityZone"]) for s in found)
        return [(subnet, subnet_zones.get(subnet)) for subnet in subnets]
    return [(None, zone) for zone in split_zones(zones)] or [(None, None)]


def client_token(launch_request_id: str, held: int, params: Mapping[str, Any]) -> str:
    """At most 64 characters: readable launch request prefix, digest of the whole request.

    ``held`` (how many instances the launch request already holds) is the attempt: a create
    retried while nothing new is visible recomputes the same token, so EC2 deduplicates it.
    """
    request = json.dumps([launch_request_id, held, params], sort_keys=True, default=str)
    digest = hashlib.sha256(request.encode()).hexdigest()[:39]
    prefix = re.sub(r"[^A-Za-z0-9_.-]", "", launch_request_id)[:24]
    return f"{prefix}-{digest}"


def run_instances(
    ec2: Any,
    params: Mapping[str, Any],
    offering: Offering,
    lost_answer_lookup: Callable[[], list[ProviderNode]],
) -> list[ProviderNode]:
    """Send ``RunInstances`` (``params`` holds its token); failures raise the taxonomy's.

    The SDK retries throttling itself. After a lost answer ``lost_answer_lookup`` (the
    launch request's instances not yet held) goes first: what it finds is the answer, and
    only when it finds nothing is the request sent again, after a jittered backoff.
    """
    attempt = 0
    while True:
        with errors_classified(offering):
            try:
                response = ec2.run_instances(**params)
                return [to_node(instance) for instance in response["Instances"]]
            except LOST_ANSWERS as error:
                found = lost_answer_lookup()
                if found:
                    logger.info("RunInstances answer lost (%s); it launched %d", error, len(found))
                    return found
                if attempt >= retries_of(ec2):
                    raise
                logger.info("RunInstances answer lost (%s), nothing launched; again", error)
        attempt += 1
        time.sleep(random.uniform(0, min(MAX_BACKOFF_S, 2.0**attempt)))
