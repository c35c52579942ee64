"""The Cloud TPU v2 API for one project: nodes and queued resources per zone, through the
real client (REST) with the shared retries (``providers.gcp.api``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from google.api_core.operation import Operation
from google.cloud import tpu_v2
from google.protobuf import field_mask_pb2

from providers.gcp.api import CallSettings, client_kwargs, project_of

PAGE_SIZE = 100


class TpuApi:
    """Calls on ``projects/<project_id>/locations/<zone>`` through ``tpu_v2.TpuClient``."""

    def __init__(self, provider_config: Mapping[str, Any]) -> None:
        self.project = project_of(provider_config)
        self.settings = CallSettings(provider_config)
        self.client = tpu_v2.TpuClient(**client_kwargs(provider_config))

    def _call(self) -> dict[str, Any]:
        return {"retry": self.settings.retry, "timeout": self.settings.timeout_s}

    def parent(self, zone: str) -> str:
        return f"projects/{self.project}/locations/{zone}"

    def node_name(self, zone: str, node_id: str) -> str:
        return f"{self.parent(zone)}/nodes/{node_id}"

    # Nodes ------------------------------------------------------------------------------
    def list_nodes(self, zone: str) -> Iterator[tpu_v2.Node]:
        """Every node in the zone, all pages (each page request retried)."""
        request = tpu_v2.ListNodesRequest(parent=self.parent(zone), page_size=PAGE_SIZE)
        yield from self.client.list_nodes(request=request, **self._call())

    def get_node(self, zone: str, node_id: str) -> tpu_v2.Node:
        return self.client.get_node(name=self.node_name(zone, node_id), **self._call())

    def create_node(self, zone: str, node_id: str, node: tpu_v2.Node) -> Operation:
        """Start creating ``node_id``; safe to retry because the id is the idempotency key."""
        return self.client.create_node(
            parent=self.parent(zone), node=node, node_id=node_id, **self._call()
        )

    def delete_node(self, zone: str, node_id: str) -> Operation:
        return self.client.delete_node(name=self.node_name(zone, node_id), **self._call())

    def update_labels(self, zone: str, node_id: str, labels: Mapping[str, str]) -> Operation:
        node = tpu_v2.Node(name=self.node_name(zone, node_id), labels=dict(labels))
        return self.client.update_node(
            node=node, update_mask=field_mask_pb2.FieldMask(paths=["labels"]), **self._call()
        )

    # Queued resources -------------------------------------------------------------------
    def queued_name(self, zone: str, queued_id: str) -> str:
        return f"{self.parent(zone)}/queuedResources/{queued_id}"

    def list_queued(self, zone: str) -> Iterator[tpu_v2.QueuedResource]:
        request = tpu_v2.ListQueuedResourcesRequest(parent=self.parent(zone), page_size=PAGE_SIZE)
        yield from self.client.list_queued_resources(request=request, **self._call())

    def get_queued(self, zone: str, queued_id: str) -> tpu_v2.QueuedResource:
        return self.client.get_queued_resource(
            name=self.queued_name(zone, queued_id), **self._call()
        )

    def create_queued(self, zone: str, queued_id: str, queued: tpu_v2.QueuedResource) -> Operation:
        return self.client.create_queued_resource(
            parent=self.parent(zone),
            queued_resource=queued,
            queued_resource_id=queued_id,
            **self._call(),
        )

    def delete_queued(self, zone: str, queued_id: str) -> Operation:
        """Delete the request and, with ``force``, the node it made."""
        request = tpu_v2.DeleteQueuedResourceRequest(
            name=self.queued_name(zone, queued_id), force=True
        )
        return self.client.delete_queued_resource(request=request, **self._call())

    # Facts ------------------------------------------------------------------------------
    def zones(self) -> list[str]:
        """Every location the TPU API serves for the project."""
        from google.cloud.location import locations_pb2

        request = locations_pb2.ListLocationsRequest(name=f"projects/{self.project}")
        answer = self.client.list_locations(request=request, **self._call())
        return sorted(location.location_id for location in answer.locations)

    def accelerator_types(self, zone: str) -> Iterator[tpu_v2.AcceleratorType]:
        request = tpu_v2.ListAcceleratorTypesRequest(parent=self.parent(zone), page_size=PAGE_SIZE)
        yield from self.client.list_accelerator_types(request=request, **self._call())
