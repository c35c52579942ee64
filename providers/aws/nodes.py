"""EC2 instance records as :class:`ProviderNode` s."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from providers.base import (
    CLOUD_PENDING,
    CLOUD_RUNNING,
    CLOUD_STOPPED,
    CLOUD_STOPPING,
    CLOUD_TERMINATED,
    CLOUD_TERMINATING,
    ON_DEMAND,
    SPOT,
    Host,
    ProviderNode,
)

STATES = {  # a spot interruption stops or terminates; a failed launch terminates
    "pending": CLOUD_PENDING,
    "running": CLOUD_RUNNING,
    "stopping": CLOUD_STOPPING,
    "stopped": CLOUD_STOPPED,
    "shutting-down": CLOUD_TERMINATING,
    "terminated": CLOUD_TERMINATED,
}
LIVE_STATES = ("pending", "running", "stopping", "stopped")
"""EC2's names of the non-terminated states."""


def to_node(instance: Mapping[str, Any]) -> ProviderNode:
    """The node an EC2 ``Instance`` record describes."""
    launched = instance.get("LaunchTime")
    return ProviderNode(
        id=instance["InstanceId"],
        state=STATES.get(instance.get("State", {}).get("Name", ""), CLOUD_PENDING),
        tags={tag["Key"]: tag["Value"] for tag in instance.get("Tags") or []},
        instance_type=instance.get("InstanceType", ""),
        zone=instance.get("Placement", {}).get("AvailabilityZone"),
        market=SPOT if instance.get("InstanceLifecycle") == "spot" else ON_DEMAND,
        hosts=(Host(0, instance.get("PrivateIpAddress"), instance.get("PublicIpAddress")),),
        launched_at=launched.timestamp() if launched else None,
        cloud_status=instance.get("State", {}).get("Name", ""),
        status_message=_reason(instance),
    )


def _reason(instance: Mapping[str, Any]) -> str:
    """EC2's own words on why the instance is in its state (``StateReason``: a spot
    interruption, a failed launch, a user-initiated stop), empty while it runs."""
    reason = instance.get("StateReason") or {}
    code, message = reason.get("Code", ""), reason.get("Message", "")
    if not message or instance.get("State", {}).get("Name") in ("pending", "running"):
        return ""
    return message if code and message.startswith(code) else f"{code}: {message}".lstrip(": ")


def market_of(node_config: Mapping[str, Any]) -> str:
    """``market`` when given, else spot when the node asks EC2 for spot capacity."""
    if node_config.get("market") in (SPOT, ON_DEMAND):
        return node_config["market"]
    options = node_config.get("InstanceMarketOptions")
    spot = isinstance(options, Mapping) and str(options.get("MarketType", "")).lower() == SPOT
    return SPOT if spot else ON_DEMAND
