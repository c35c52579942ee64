"""What the autoscaler knows about GCP offline: TPU slice types (``acceleratorType`` or
``acceleratorConfig``), Compute Engine ``machineType`` with attached ``guestAccelerators``,
the startup script, label limits and the embedded Cloud TPU server."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from accel.tpu_generations import GENERATIONS, generation
from accel.user_input import did_you_mean
from instance_catalog.catalog import Offer
from instance_catalog.model import Accelerator, InstanceType
from providers.base import ON_DEMAND, SPOT, Cloud, NodeTypeOffering
from providers.catalog import catalog_entry
from providers.errors import InvalidConfigError

NODE_IDENTITY_SCRIPT = (
    'MD="http://metadata.google.internal/computeMetadata/v1/instance/attributes"\n'
    'NODE_ID=$(curl -fsS -H "Metadata-Flavor: Google" "$MD/instance-id")\n'
    'HOST=$(curl -fsS -H "Metadata-Flavor: Google" "$MD/agent-worker-number" || echo 0)\n'
)
"""The node id and slice host index, from instance attributes set at creation."""
_CONFIG_GENERATIONS = {"V5LITE_POD": "v5litepod"}


RAY_DEFAULTS = {
    "available_node_types": {
        "ray_head_default": {
            "resources": {"CPU": 2},
            "node_config": {"machineType": "n1-standard-2"},
        },
        "ray_worker_small": {
            "min_workers": 0,
            "resources": {"CPU": 2},
            "node_config": {"machineType": "n1-standard-2", "scheduling": [{"preemptible": True}]},
        },
    },
    "head_node_type": "ray_head_default",
}
"""Ray's ``autoscaler/gcp/defaults.yaml`` node types."""


class GcpCloud(Cloud):
    name = "gcp"
    provider_class = "providers.gcp_tpu.provider:GcpTpuNodeProvider"
    instance_type_field = "machineType"
    tag_value_limit = 63
    node_identity_script = NODE_IDENTITY_SCRIPT
    emulator_module = "providers.gcp_tpu.emulator"
    ray_defaults = RAY_DEFAULTS

    def catalog_offer(
        self, node_config: Mapping[str, Any], provider_config: Mapping[str, Any]
    ) -> Offer | None:
        tpu = tpu_slice_type(node_config)
        if tpu is not None:
            return Offer(catalog_entry(tpu, self.name, _tpu_field(node_config)))
        name = node_config.get("machineType")
        if name is None:
            return None
        entry = catalog_entry(str(name).rsplit("/", 1)[-1], self.name, "machineType")
        return Offer(entry, _attached(entry, node_config.get("guestAccelerators")))

    def offering(
        self, node_config: Mapping[str, Any], provider_config: Mapping[str, Any]
    ) -> NodeTypeOffering | None:
        name = tpu_slice_type(node_config) or node_config.get("machineType")
        if name is None:
            return None
        zone = provider_config.get("availability_zone")
        return NodeTypeOffering(
            str(name).rsplit("/", 1)[-1],
            market_of(node_config),
            (str(zone),) if zone else (),
            self.price_region(provider_config),
        )

    def price_region(self, provider_config: Mapping[str, Any]) -> str | None:
        """``region``, else the region of ``availability_zone`` (``us-central2-b`` ->
        ``us-central2``)."""
        zone = provider_config.get("availability_zone")
        return provider_config.get("region") or (str(zone).rsplit("-", 1)[0] if zone else None)

    def with_boot_script(self, node_config: Mapping[str, Any], script: str) -> dict[str, Any]:
        config = dict(node_config)
        metadata = dict(config.get("metadata") or {})
        metadata.setdefault("startup-script", script)
        config["metadata"] = metadata
        return config


def market_of(node_config: Mapping[str, Any]) -> str:
    """``market`` if set, else spot when the node asks for spot or preemptible capacity
    (``scheduling`` on Compute Engine, ``schedulingConfig`` on Cloud TPU)."""
    if node_config.get("market"):
        return str(node_config["market"])

    def section(key: str) -> Mapping[str, Any]:
        """The mapping at ``key``; Ray's examples also write it as a list of mappings."""
        value = node_config.get(key)
        if isinstance(value, list):
            return {k: v for item in value if isinstance(item, Mapping) for k, v in item.items()}
        return value if isinstance(value, Mapping) else {}

    gce, tpu = section("scheduling"), section("schedulingConfig")
    spot = (
        gce.get("preemptible") is True
        or str(gce.get("provisioningModel", "")).upper() == "SPOT"
        or tpu.get("preemptible") is True
        or tpu.get("spot") is True
    )
    return SPOT if spot else ON_DEMAND


def tpu_slice_type(node_config: Mapping[str, Any]) -> str | None:
    """The TPU slice type (``v4-16``) of ``acceleratorType`` or ``acceleratorConfig``
    {type, topology}; None for a node_config that is not a TPU VM."""
    if node_config.get("acceleratorType"):
        return str(node_config["acceleratorType"])
    config = node_config.get("acceleratorConfig")
    if config is None:
        return None
    if not isinstance(config, Mapping):
        raise InvalidConfigError(
            "expected {type, topology}, e.g. {type: V4, topology: 2x2x2}",
            field="acceleratorConfig",
        )
    kind = str(config.get("type", ""))
    gen = generation(_CONFIG_GENERATIONS.get(kind.upper(), kind.replace("_", "")))
    if gen is None:
        known = [g.name.upper() for g in GENERATIONS]
        raise InvalidConfigError(
            f"unknown TPU type {kind[:40]!r} (known: {', '.join(known)})"
            f"{did_you_mean(kind, known)}",
            field="acceleratorConfig.type",
        )
    topology = str(config.get("topology", ""))
    if not re.fullmatch(r"\d+(x\d+)+", topology):
        raise InvalidConfigError(
            f"{topology[:40]!r} is not like 2x2 or 2x2x2", field="acceleratorConfig.topology"
        )
    chips = math.prod(int(dim) for dim in topology.split("x"))
    return f"{gen.name}-{chips * gen.cores_per_chip}"


def _tpu_field(node_config: Mapping[str, Any]) -> str:
    return "acceleratorType" if node_config.get("acceleratorType") else "acceleratorConfig"


def _attached(entry: InstanceType, guest: Any) -> Accelerator | None:
    """The GPUs attached to an N1 machine; built-in GPUs (A2, G2...) need no attachment."""
    if not guest or (entry.accelerator is not None and not entry.attachable_gpus):
        return None
    if isinstance(guest, Mapping):  # Ray's examples also write the one entry bare
        guest = [guest]
    if not isinstance(guest, list) or len(guest) != 1 or not isinstance(guest[0], Mapping):
        raise InvalidConfigError(
            "expected one entry {acceleratorType, acceleratorCount}", field="guestAccelerators"
        )
    gpu = str(guest[0].get("acceleratorType", "")).rsplit("/", 1)[-1]
    count = guest[0].get("acceleratorCount", 1)
    options = {a.accelerator.cloud_name or a.accelerator.name: a for a in entry.attachable_gpus}
    if gpu not in options:
        raise InvalidConfigError(
            f"{gpu[:60]!r} cannot be attached to {entry.name} "
            f"(allowed: {', '.join(options) or 'none'}){did_you_mean(gpu, options)}",
            field="guestAccelerators[0].acceleratorType",
        )
    attachment = options[gpu]
    if count not in attachment.counts:
        raise InvalidConfigError(
            f"{count!r} x {gpu} on {entry.name} is not allowed "
            f"(allowed: {', '.join(map(str, attachment.counts))})",
            field="guestAccelerators[0].acceleratorCount",
        )
    return replace(attachment.accelerator, count=count)
