"""The Cloud TPU v2 API for one project and zone: the real client, explicit retries, LRO waits.

The v2 client retries nothing by default, so every call here carries a
``google.api_core.retry.Retry`` with a deadline that retries only transient failures
(``errors.is_retryable``). Long-running operations are polled until a deadline, never longer.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any

from google.api_core import retry as retries
from google.api_core.client_options import ClientOptions
from google.api_core.future import polling as polling_future
from google.api_core.operation import Operation
from google.auth.credentials import AnonymousCredentials
from google.cloud import tpu_v2
from google.protobuf import field_mask_pb2

from providers.errors import InvalidConfigError
from providers.gcp_tpu.errors import is_retryable

logger = logging.getLogger(__name__)

DEFAULT_RETRY_DEADLINE_S = 60.0
DEFAULT_REQUEST_TIMEOUT_S = 60.0
DEFAULT_OPERATION_POLL_S = 2.0
PAGE_SIZE = 100


class TpuApi:
    """Calls on ``projects/<project_id>/locations/<zone>`` through ``tpu_v2.TpuClient`` (REST)."""

    def __init__(self, provider_config: Mapping[str, Any]) -> None:
        project = provider_config.get("project_id")
        zone = provider_config.get("availability_zone")
        if not project or not zone:
            raise InvalidConfigError(
                "provider.project_id and provider.availability_zone are required"
            )
        self.zone = str(zone)
        self.parent = f"projects/{project}/locations/{zone}"
        deadline = float(provider_config.get("retry_deadline_s", DEFAULT_RETRY_DEADLINE_S))
        self.retry = retries.Retry(
            predicate=is_retryable,
            initial=min(1.0, deadline / 20),
            maximum=min(30.0, deadline / 2),
            multiplier=2.0,
            timeout=deadline,
        )
        self.request_timeout_s = float(
            provider_config.get("request_timeout_s", DEFAULT_REQUEST_TIMEOUT_S)
        )
        self.poll_s = float(provider_config.get("operation_poll_s", DEFAULT_OPERATION_POLL_S))
        self.client = _make_client(provider_config)

    def node_name(self, node_id: str) -> str:
        return f"{self.parent}/nodes/{node_id}"

    def list_nodes(self) -> Iterator[tpu_v2.Node]:
        """Every node in the zone, all pages (each page request retried)."""
        request = tpu_v2.ListNodesRequest(parent=self.parent, page_size=PAGE_SIZE)
        pager = self.client.list_nodes(
            request=request, retry=self.retry, timeout=self.request_timeout_s
        )
        yield from pager

    def get_node(self, node_id: str) -> tpu_v2.Node:
        return self.client.get_node(
            name=self.node_name(node_id), retry=self.retry, timeout=self.request_timeout_s
        )

    def create_node(self, node_id: str, node: tpu_v2.Node) -> Operation:
        """Start creating ``node_id``; safe to retry because the id is the idempotency key."""
        return self.client.create_node(
            parent=self.parent,
            node=node,
            node_id=node_id,
            retry=self.retry,
            timeout=self.request_timeout_s,
        )

    def delete_node(self, node_id: str) -> Operation:
        return self.client.delete_node(
            name=self.node_name(node_id), retry=self.retry, timeout=self.request_timeout_s
        )

    def update_labels(self, node_id: str, labels: Mapping[str, str]) -> Operation:
        node = tpu_v2.Node(name=self.node_name(node_id), labels=dict(labels))
        return self.client.update_node(
            node=node,
            update_mask=field_mask_pb2.FieldMask(paths=["labels"]),
            retry=self.retry,
            timeout=self.request_timeout_s,
        )

    def wait(self, operation: Operation, timeout_s: float) -> Any:
        """The operation's result; raises its error, or TimeoutError after ``timeout_s``."""
        polling = polling_future.DEFAULT_POLLING.with_delay(
            initial=self.poll_s, maximum=max(self.poll_s, 10.0), multiplier=1.5
        )
        return operation.result(timeout=max(timeout_s, 0.0), retry=self.retry, polling=polling)


def _make_client(provider_config: Mapping[str, Any]) -> tpu_v2.TpuClient:
    """A REST client on ``endpoint_url`` if given, with Application Default Credentials.

    A plain ``http://`` endpoint (a local fake) gets anonymous credentials: a real token is
    never sent in clear text. The REST transport keeps an explicit scheme, so
    ``http://127.0.0.1:PORT`` works as the ``api_endpoint``.
    """
    endpoint = provider_config.get("endpoint_url")
    if not endpoint:
        return tpu_v2.TpuClient(transport="rest")
    endpoint = str(endpoint).rstrip("/")
    credentials = AnonymousCredentials() if endpoint.startswith("http://") else None
    return tpu_v2.TpuClient(
        transport="rest",
        credentials=credentials,
        client_options=ClientOptions(api_endpoint=endpoint),
    )
