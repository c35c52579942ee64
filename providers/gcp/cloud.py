"""What the autoscaler knows about GCP offline: Cloud TPU slice types (``acceleratorType`` or
``acceleratorConfig``), Compute Engine ``machineType`` with attached ``guestAccelerators``,
where each node type launches, the startup script, label limits and the embedded local cloud
(one process serving the fake Compute Engine and Cloud TPU APIs)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from instance_catalog.catalog import Offer
from instance_catalog.gcp import accelerator_zones, zone_fact_regions, zones_from_api
from providers.base import (
    METADATA_CURL,
    ON_DEMAND,
    SPOT,
    Cloud,
    NodeTypeOffering,
    split_zones,
)
from providers.catalog import catalog_entry
from providers.gcp.compute.machine import (
    GPU_FIELD,
    attached,
    attached_gpu_name,
    machine_type_name,
    merged_section,
)
from providers.gcp.placement import placement, region_of
from providers.gcp.tpu.slices import slice_field, tpu_slice_type

if TYPE_CHECKING:
    from instance_catalog.live_refresh import RefreshReport, RefreshRequest

NODE_IDENTITY_SCRIPT = (
    'MD="http://metadata.google.internal/computeMetadata/v1/instance"\n'
    f'NAME=$({METADATA_CURL} -H "Metadata-Flavor: Google" "$MD/attributes/instance-id" '
    f'|| {METADATA_CURL} -H "Metadata-Flavor: Google" "$MD/name")\n'
    f'ZONE=$({METADATA_CURL} -H "Metadata-Flavor: Google" "$MD/zone")\n'
    'NODE_ID="${ZONE##*/}/$NAME"\n'
    f'HOST=$({METADATA_CURL} -H "Metadata-Flavor: Google" "$MD/attributes/agent-worker-number" '
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
    boot_data_limit = 256 * 1024  # one metadata value (startup-script) holds up to 256 KB
    boot_data_name = "a Compute Engine / Cloud TPU metadata value (startup-script)"

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

    def emulator_settings(self) -> dict[str, Any]:
        # The local cloud's own project (Ray's examples leave project_id for the user).
        return {"project_id": "local-project"}

    def with_ssh_key(
        self, node_config: Mapping[str, Any], ssh_user: str, public_key: str
    ) -> dict[str, Any]:
        """The ``ssh-keys`` metadata entry ``USER:KEY`` (the guest agent makes the user)."""
        return self._with_metadata(node_config, "ssh-keys", f"{ssh_user}:{public_key.strip()}")

    def auth_notes(
        self, node_type: str, node_config: Mapping[str, Any], public_key: str | None
    ) -> list[str]:
        if public_key is not None:
            return []
        return [
            f"auth: no ssh_public_key (nor a .pub beside ssh_private_key): node type "
            f"{node_type} gets no ssh-keys metadata"
        ]

    def node_id_of(self, reported: str) -> str:
        """An agent reports as ``zone/name``; the plugins' node id is the name."""
        return reported.rpartition("/")[2]

    def with_boot_script(self, node_config: Mapping[str, Any], script: str) -> dict[str, Any]:
        return self._with_metadata(node_config, "startup-script", script)

    def _with_metadata(
        self, node_config: Mapping[str, Any], key: str, value: str
    ) -> dict[str, Any]:
        """A VM's ``metadata`` is ``{items: [{key, value}]}``; a TPU node's is a map."""
        config = dict(node_config)
        metadata = dict(config.get("metadata") or {})
        if machine_type_name(node_config) is None:
            metadata.setdefault(key, value)
        else:
            items = list(metadata.get("items") or [])
            if not any(item.get("key") == key for item in items):
                items.append({"key": key, "value": value})
            metadata["items"] = items
        config["metadata"] = metadata
        return config


def market_of(node_config: Mapping[str, Any]) -> str:
    """``market`` if set, else spot when the node asks for spot or preemptible capacity
    (``scheduling`` on Compute Engine, ``schedulingConfig`` on Cloud TPU)."""
    if node_config.get("market"):
        return str(node_config["market"])

    gce = merged_section(node_config.get("scheduling"))
    tpu = merged_section(node_config.get("schedulingConfig"))
    spot = (
        gce.get("preemptible") is True
        or str(gce.get("provisioningModel", "")).upper() == "SPOT"
        or tpu.get("preemptible") is True
        or tpu.get("spot") is True
    )
    return SPOT if spot else ON_DEMAND
