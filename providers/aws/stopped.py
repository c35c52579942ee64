"""Stopped-node reuse (``cache_stopped_nodes``): restarting a stopped node claims it.

The claim is ``StartInstances`` itself: EC2 moves an instance out of ``stopped`` once, and
only the call whose answer says it did (``PreviousState`` ``stopped``) counts the node, then
tags it with its launch request. Two creates racing for one node: one gets it, the other
launches anew. Not covered: a create whose ``StartInstances`` answer is lost (the SDK's retry
then sees ``pending``) leaves that node running, owned and listed, but counted by no launch
request.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from providers.aws.client import call, create_tags
from providers.base import CLOUD_PENDING, TAG_NODE_TYPE, ProviderNode
from providers.errors import ProviderError

logger = logging.getLogger(__name__)


def restart(
    ec2: Any, stopped: Sequence[ProviderNode], tags: Mapping[str, str]
) -> list[ProviderNode]:
    """Start ``stopped``; tag with ``tags`` and return the ones this call claimed."""
    if not stopped:
        return []
    try:
        answer = call(ec2, "start_instances", InstanceIds=[node.id for node in stopped])
    except ProviderError as error:  # e.g. one was terminated meanwhile: launch instead
        logger.warning("not reusing stopped nodes: %s", error)
        return []
    won = sorted(
        change["InstanceId"]
        for change in answer["StartingInstances"]
        if change["PreviousState"]["Name"] == "stopped"
    )
    if won:
        create_tags(ec2, won, tags)
    logger.info("restarted %d stopped node(s) of %s", len(won), tags.get(TAG_NODE_TYPE))
    return [
        replace(node, state=CLOUD_PENDING, tags={**node.tags, **tags})
        for node in stopped
        if node.id in won
    ]
