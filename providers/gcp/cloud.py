"""What the autoscaler knows about GCP offline: Cloud TPU slice types (``acceleratorType`` or
``acceleratorConfig``), Compute Engine ``machineType`` with attached ``guestAccelerators``,
where each node type launches, the startup script, label limits and the embedded local cloud
(one process serving the fake Compute Engine and Cloud TPU APIs)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from instance_catalog.catalog import Offer
from instance_catalog.gcp import accelerator_zones, zone_fact_regions, zones_from_api
from providers.base import ON_DEMAND, SPOT, Cloud, NodeTypeOffering, split_zones
from providers.catalog import catalog_entry
from providers.gcp.compute.machine import (
    GPU_FIELD,
    attached,
    attached_gpu_name,
    machine_type_name,
)
from providers.gcp.placement import placement, region_of
from providers.gcp.tpu.slices import slice_field, tpu_slice_type

if TYPE_CHECKING:
    from instance_catalog.live_refresh import RefreshReport, RefreshRequest

NODE_IDENTITY_SCRIPT = (
    'MD="http://metadata.google.internal/computeMetadata/v1/instance"\n'
    'NAME=$(curl -fsS -H "Metadata-Flavor: Google" "$MD/attributes/instance-id" '
    '|| curl -fsS -H "Metadata-Flavor: Google" "$MD/name")\n'
    'ZONE=$(curl -fsS -H "Metadata-Flavor: Google" "$MD/zone")\n'
    'NODE_ID="${ZONE##*/}/$NAME"\n'
    'HOST=$(curl -fsS -H "Metadata-Flavor: Google" "$MD/attributes/agent-worker-number" '
    "|| echo 0)\n"
)
"""``zone/name``: a TPU VM's node id (attribute ``instance-id``) or a VM's name, with its
zone, so the agent finds its node whatever zone the provider section names; the slice host
index from ``agent-worker-number`` (0 on a VM)."""


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
    provider_class = "providers.gcp.provider:GcpNodeProvider"
    instance_type_field = "machineType"
    tag_value_limit = 63
    node_identity_script = NODE_IDENTITY_SCRIPT
    ray_defaults = RAY_DEFAULTS

    def catalog_offer(
        self, node_config: Mapping[str, Any], provider_config: Mapping[str, Any]
    ) -> Offer | None:
        tpu = tpu_slice_type(node_config)
        if tpu is not None:
            return Offer(catalog_entry(tpu, self.name, slice_field(node_config)))
        name = machine_type_name(node_config)
        if name is None:
            return None
        entry = catalog_entry(name, self.name, "machineType")
        return Offer(entry, attached(entry, node_config.get("guestAccelerators")))

    def offering(
        self, node_config: Mapping[str, Any], provider_config: Mapping[str, Any]
    ) -> NodeTypeOffering | None:
        tpu = tpu_slice_type(node_config)
        name = tpu or machine_type_name(node_config)
        if name is None:
            return None
        field = slice_field(node_config) if tpu else "machineType"
        entry = catalog_entry(name, self.name, field)
        # Zone facts from Google's API answers are checked strictly; from its pages, a zone
        # they do not list is a note (see placement).
        notes: list[str] = []
        table = "tpu_accelerator_types" if tpu else "machine_types"
        region, zones = placement(
            node_config,
            provider_config,
            entry.zones,
            entry.name,
            field,
            None if zones_from_api(entry.name, table) else notes,
            zone_fact_regions(table),
        )
        gpu = None if tpu else attached_gpu_name(node_config)
        if gpu is not None:  # zones must offer the attached GPU too
            _, gpu_zones = placement(
                node_config,
                provider_config,
                accelerator_zones(gpu),
                gpu,
                GPU_FIELD,
                None if zones_from_api(gpu, "accelerator_types") else notes,
                zone_fact_regions("accelerator_types"),
            )
            zones = tuple(zone for zone in zones if not gpu_zones or zone in gpu_zones)
        return NodeTypeOffering(entry.name, market_of(node_config), zones, region, tuple(notes))

    def price_region(self, provider_config: Mapping[str, Any]) -> str | None:
        """``region``, else the region of ``availability_zone`` (``us-central2-b`` ->
        ``us-central2``)."""
        zones = split_zones(provider_config.get("availability_zone"))
        return provider_config.get("region") or (region_of(zones[0]) if zones else None)

    def refresh_catalog(self, request: RefreshRequest) -> RefreshReport:
        from providers.gcp.catalog_source import refresh_gcp

        return refresh_gcp(request)

    def node_id_of(self, reported: str) -> str:
        """An agent reports as ``zone/name``; the plugins' node id is the name."""
        return reported.rpartition("/")[2]

    def with_boot_script(self, node_config: Mapping[str, Any], script: str) -> dict[str, Any]:
        """A VM's ``metadata`` is ``{items: [{key, value}]}``; a TPU node's is a map."""
        config = dict(node_config)
        metadata = dict(config.get("metadata") or {})
        if machine_type_name(node_config) is None:
            metadata.setdefault("startup-script", script)
        else:
            items = list(metadata.get("items") or [])
            if not any(item.get("key") == "startup-script" for item in items):
                items.append({"key": "startup-script", "value": script})
            metadata["items"] = items
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
