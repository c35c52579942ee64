"""A Compute Engine node_config as ``bulkInsert`` takes it, and VMs as provider nodes."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from google.cloud import compute_v1
from google.protobuf import json_format

from providers.base import (
    CLOUD_PENDING,
    CLOUD_RUNNING,
    CLOUD_STOPPED,
    CLOUD_STOPPING,
    ON_DEMAND,
    SPOT,
    Host,
    ProviderNode,
)
from providers.errors import InvalidConfigError
from providers.gcp.compute.machine import machine_type_name
from providers.gcp.placement import OUR_KEYS

DEFAULT_IMAGE = "projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts"
DEFAULT_DISK_GB = 100
STATES = {
    "PROVISIONING": CLOUD_PENDING,
    "STAGING": CLOUD_PENDING,
    "REPAIRING": CLOUD_PENDING,
    "RUNNING": CLOUD_RUNNING,
    "STOPPING": CLOUD_STOPPING,
    "SUSPENDING": CLOUD_STOPPING,
    "STOPPED": CLOUD_STOPPED,
    "SUSPENDED": CLOUD_STOPPED,
    "TERMINATED": CLOUD_STOPPED,  # a preempted spot VM: listed until deleted, and replaced
}


def instance_properties(
    node_config: Mapping[str, Any], labels: Mapping[str, str], has_gpus: bool
) -> compute_v1.InstanceProperties:
    """The VM every instance of a bulk insert gets: the node_config (Ray's GCP format), our
    labels, a boot disk and the default network when not given, ``onHostMaintenance:
    TERMINATE`` for GPU VMs (they cannot live-migrate), ``provisioningModel: SPOT`` for spot.
    """
    config = {k: v for k, v in node_config.items() if k not in OUR_KEYS | {"labels"}}
    name = machine_type_name(config)
    if name is None:
        raise InvalidConfigError("a Compute Engine node needs machineType", field="machineType")
    config["machineType"] = name
    if config.get("guestAccelerators"):
        config["guestAccelerators"] = [
            {**gpu, "acceleratorType": str(gpu.get("acceleratorType", "")).rsplit("/", 1)[-1]}
            for gpu in config["guestAccelerators"]
        ]
    config.setdefault("disks", [_boot_disk()])
    config.setdefault("networkInterfaces", [{"network": "global/networks/default"}])
    scheduling = dict(config.get("scheduling") or {})
    if node_config.get("market") == SPOT:
        scheduling["provisioningModel"] = "SPOT"
    elif node_config.get("market") == ON_DEMAND:
        scheduling.pop("provisioningModel", None)
        scheduling.pop("preemptible", None)
    if has_gpus:
        scheduling["onHostMaintenance"] = "TERMINATE"
        scheduling.setdefault("automaticRestart", False)
    if scheduling:
        config["scheduling"] = scheduling
    config["labels"] = {**node_config.get("labels", {}), **labels}
    properties = compute_v1.InstanceProperties()
    try:
        json_format.ParseDict(config, compute_v1.InstanceProperties.pb(properties))
    except json_format.ParseError as exc:
        raise InvalidConfigError(f"node_config is not a valid Compute Engine VM: {exc}") from exc
    return properties


def _boot_disk() -> dict[str, Any]:
    return {
        "boot": True,
        "autoDelete": True,
        "initializeParams": {"sourceImage": DEFAULT_IMAGE, "diskSizeGb": str(DEFAULT_DISK_GB)},
    }


def to_provider_node(instance: compute_v1.Instance) -> ProviderNode:
    """A VM as the provider contract describes nodes."""
    interfaces = instance.network_interfaces
    first = interfaces[0] if interfaces else None
    nat = first.access_configs[0].nat_i_p if first and first.access_configs else ""
    scheduling = instance.scheduling
    spot = scheduling.provisioning_model == "SPOT" or scheduling.preemptible
    created = instance.creation_timestamp
    return ProviderNode(
        id=instance.name,
        state=STATES.get(instance.status, CLOUD_PENDING),
        tags=dict(instance.labels),
        instance_type=instance.machine_type.rsplit("/", 1)[-1],
        zone=instance.zone.rsplit("/", 1)[-1] or None,
        market=SPOT if spot else ON_DEMAND,
        hosts=(Host(0, (first.network_i_p if first else "") or None, nat or None),),
        launched_at=datetime.fromisoformat(created).timestamp() if created else None,
    )
