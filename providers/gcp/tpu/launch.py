"""A TPU node_config as the Cloud TPU API takes it (a node, or a queued resource holding
one), and what the API returns as provider nodes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from google.cloud import tpu_v2
from google.protobuf import duration_pb2, json_format

from accel.tpu_generations import parse_pod_type
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
from providers.errors import InvalidConfigError
from providers.gcp.placement import OUR_KEYS
from providers.gcp.tpu.slices import tpu_slice_type

QUEUED_KEY = "queuedResource"
"""Per node type: ask through a queued resource (``true``, or ``{validUntilDuration: 3600s}``,
how long the request may wait for capacity before it fails)."""
RUNTIME_VERSIONS = {
    "v2": "tpu-ubuntu2204-base",
    "v3": "tpu-ubuntu2204-base",
    "v4": "tpu-ubuntu2204-base",
    "v5litepod": "v2-alpha-tpuv5-lite",
    "v5p": "v2-alpha-tpuv5",
    "v6e": "v2-alpha-tpuv6e",
}
"""Default ``runtimeVersion`` per generation (Cloud TPU's recommended base images).
v7x (Ironwood) is not offered through the Cloud TPU API, so it has none."""

NODE_STATES = {
    "CREATING": CLOUD_PENDING,
    "STARTING": CLOUD_PENDING,
    "RESTARTING": CLOUD_PENDING,
    "REIMAGING": CLOUD_PENDING,
    "REPAIRING": CLOUD_PENDING,
    "UNHIDING": CLOUD_PENDING,
    "STATE_UNSPECIFIED": CLOUD_PENDING,
    "UNKNOWN": CLOUD_PENDING,
    "READY": CLOUD_RUNNING,
    "STOPPING": CLOUD_STOPPING,
    "HIDING": CLOUD_STOPPING,
    "STOPPED": CLOUD_STOPPED,
    "HIDDEN": CLOUD_STOPPED,
    "PREEMPTED": CLOUD_STOPPED,  # listed until deleted: it is replaced, then deleted
    "DELETING": CLOUD_TERMINATING,
    "TERMINATED": CLOUD_TERMINATED,
}
QUEUED_STATES = {
    "STATE_UNSPECIFIED": CLOUD_PENDING,
    "CREATING": CLOUD_PENDING,
    "ACCEPTED": CLOUD_PENDING,
    "PROVISIONING": CLOUD_PENDING,
    "WAITING_FOR_RESOURCES": CLOUD_PENDING,
    "ACTIVE": CLOUD_PENDING,  # its node says more, once it exists
    "FAILED": CLOUD_STOPPED,  # never gets capacity: listed so it is deleted and replaced
    "SUSPENDING": CLOUD_STOPPING,
    "SUSPENDED": CLOUD_STOPPED,
    "DELETING": CLOUD_TERMINATING,
}


@dataclass(frozen=True)
class LaunchSpec:
    """The node to create, its slice type and market, and how to ask for it."""

    node: tpu_v2.Node
    instance_type: str
    market: str
    queued: Mapping[str, Any] | None
    """The queued-resource options, or None for a direct create."""

    def queued_resource(self, node_id: str) -> tpu_v2.QueuedResource:
        """A queued resource asking for one ``node_id``, spot or guaranteed, with its wait."""
        spec = tpu_v2.QueuedResource.Tpu.NodeSpec(parent="", node_id=node_id, node=self.node)
        queued = tpu_v2.QueuedResource(tpu=tpu_v2.QueuedResource.Tpu(node_spec=[spec]))
        if self.market == SPOT:
            queued.spot = tpu_v2.QueuedResource.Spot()
        wait = (self.queued or {}).get("validUntilDuration")
        if wait:
            duration = duration_pb2.Duration()
            duration.FromJsonString(str(wait))
            queued.queueing_policy = tpu_v2.QueuedResource.QueueingPolicy(
                valid_until_duration=duration
            )
        return queued


def launch_spec(node_config: Mapping[str, Any], labels: Mapping[str, str]) -> LaunchSpec:
    """Ray's GCP TPU ``node_config`` (plus our keys) as a ``tpu_v2.Node``."""
    config = {k: v for k, v in node_config.items() if k not in OUR_KEYS | {"labels", QUEUED_KEY}}
    market = node_config.get("market", ON_DEMAND)
    if market not in (ON_DEMAND, SPOT):
        raise InvalidConfigError(f"market must be {SPOT!r} or {ON_DEMAND!r}", field="market")
    accelerator_type = tpu_slice_type(config)
    if accelerator_type is None:
        raise InvalidConfigError(
            "node_config needs acceleratorType (e.g. v4-16) or acceleratorConfig "
            "{type: V4, topology: 2x2x2}"
        )
    pod = parse_pod_type(accelerator_type)
    if pod is not None and config.get("acceleratorType"):
        config["acceleratorType"] = pod.name
    if not config.get("runtimeVersion"):
        runtime = RUNTIME_VERSIONS.get(pod.generation.name) if pod else None
        if runtime is None:
            raise InvalidConfigError(
                f"no default runtimeVersion for TPU type {accelerator_type!r} on the Cloud TPU "
                f"API (known: {', '.join(RUNTIME_VERSIONS)}); set node_config.runtimeVersion",
                field="runtimeVersion",
            )
        config["runtimeVersion"] = runtime
    queued = _queued_options(node_config.get(QUEUED_KEY))
    scheduling = dict(config.get("schedulingConfig") or {})
    if market == SPOT and queued is None:
        scheduling["spot"] = True
    if scheduling:
        config["schedulingConfig"] = scheduling
    spot = market == SPOT or bool(scheduling.get("spot") or scheduling.get("preemptible"))
    config["labels"] = {**node_config.get("labels", {}), **labels}
    node = tpu_v2.Node()
    try:
        json_format.ParseDict(config, tpu_v2.Node.pb(node))
    except json_format.ParseError as exc:
        raise InvalidConfigError(f"node_config is not a valid TPU node: {exc}") from exc
    instance_type = pod.name if pod else accelerator_type
    return LaunchSpec(node, instance_type, SPOT if spot else ON_DEMAND, queued)


def _queued_options(value: Any) -> Mapping[str, Any] | None:
    if value in (None, False):
        return None
    if value is True:
        return {}
    if isinstance(value, Mapping) and set(value) <= {"validUntilDuration"}:
        return value
    raise InvalidConfigError("expected true or {validUntilDuration: 3600s}", field=QUEUED_KEY)


def to_provider_node(node: tpu_v2.Node) -> ProviderNode:
    """A ``tpu_v2.Node`` as the provider contract describes nodes."""
    accelerator_type = node.accelerator_type
    if not accelerator_type and node.accelerator_config.topology:
        config = node.accelerator_config
        accelerator_type = tpu_slice_type(
            {"acceleratorConfig": {"type": config.type_.name, "topology": config.topology}}
        )
    pod = parse_pod_type(accelerator_type)
    hosts = tuple(
        Host(
            worker_id=index,
            internal_ip=endpoint.ip_address or None,
            external_ip=endpoint.access_config.external_ip or None,
        )
        for index, endpoint in enumerate(node.network_endpoints)
    )
    scheduling = node.scheduling_config
    parts = node.name.split("/")
    return ProviderNode(
        id=parts[-1],
        state=NODE_STATES.get(tpu_v2.Node.State(node.state).name, CLOUD_PENDING),
        tags=dict(node.labels),
        instance_type=pod.name if pod else accelerator_type,
        zone=parts[3] if len(parts) > 3 else None,
        market=SPOT if scheduling.spot or scheduling.preemptible else ON_DEMAND,
        hosts=hosts,
        launched_at=node.create_time.timestamp() if node.create_time else None,
    )


def queued_node(queued: tpu_v2.QueuedResource) -> ProviderNode | None:
    """A queued resource with no node yet, as a node waiting for capacity."""
    specs = queued.tpu.node_spec
    if not specs:
        return None
    spec = specs[0]
    state = tpu_v2.QueuedResourceState.State(queued.state.state).name
    node = to_provider_node(
        tpu_v2.Node(
            name=f"{queued.name.rsplit('/queuedResources/', 1)[0]}/nodes/{spec.node_id}",
            accelerator_type=spec.node.accelerator_type,
            accelerator_config=spec.node.accelerator_config,
            labels=spec.node.labels,
            create_time=queued.create_time,
        )
    )
    market = SPOT if "spot" in queued else node.market
    return ProviderNode(
        id=node.id,
        state=QUEUED_STATES.get(state, CLOUD_PENDING),
        tags=node.tags,
        instance_type=node.instance_type,
        zone=node.zone,
        market=market,
        launched_at=node.launched_at,
    )


def queued_labels(queued: tpu_v2.QueuedResource) -> Mapping[str, str]:
    """The labels of the node a queued resource asks for (a queued resource has none)."""
    specs = queued.tpu.node_spec
    return specs[0].node.labels if specs else {}
