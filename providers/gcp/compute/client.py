"""The Compute Engine API for one project through the real client (REST), with the shared
retries (``providers.gcp.api``). Zonal operations are polled with ``zoneOperations.get`` on
the same endpoint until a deadline (:meth:`ComputeApi.wait`).

``bulk_insert`` is sent without the automatic retry: after a lost answer the caller looks up
what it launched before sending again (with the same ``requestId``).
"""

from __future__ import annotations

import concurrent.futures
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import compute_v1

from providers.gcp.api import CallSettings, client_kwargs, project_of

PAGE_SIZE = 500


def label_filter(labels: Mapping[str, str], name: str | None = None) -> str:
    """A list filter matching every label in ``labels`` (and the instance ``name``)."""
    terms = [f'(labels.{key} = "{value}")' for key, value in sorted(labels.items())]
    if name is not None:
        terms.append(f'(name = "{name}")')
    return " ".join(terms)


def request_id(*parts: str) -> str:
    """A deterministic ``requestId`` (a UUID, as Compute Engine wants) for the same request."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "\0".join(parts)))


class ComputeApi:
    """Instances, their zonal operations, and the machine and accelerator type tables."""

    def __init__(self, provider_config: Mapping[str, Any]) -> None:
        self.project = project_of(provider_config)
        self.settings = CallSettings(provider_config)
        kwargs = client_kwargs(provider_config)
        self.instances = compute_v1.InstancesClient(**kwargs)
        self.operations = compute_v1.ZoneOperationsClient(**kwargs)
        self._kwargs = kwargs

    def _call(self) -> dict[str, Any]:
        return {"retry": self.settings.retry, "timeout": self.settings.timeout_s}

    def list(
        self, labels: Mapping[str, str], name: str | None = None
    ) -> Iterator[compute_v1.Instance]:
        """Every instance in every zone carrying ``labels`` (and called ``name``), all pages."""
        request = compute_v1.AggregatedListInstancesRequest(
            project=self.project, filter=label_filter(labels, name), max_results=PAGE_SIZE
        )
        for _, scoped in self.instances.aggregated_list(request=request, **self._call()):
            yield from scoped.instances

    def get(self, zone: str, name: str) -> compute_v1.Instance:
        return self.instances.get(project=self.project, zone=zone, instance=name, **self._call())

    def bulk_insert(
        self, zone: str, resource: compute_v1.BulkInsertInstanceResource, request: str
    ) -> compute_v1.Operation:
        return self.instances.bulk_insert_unary(
            request=compute_v1.BulkInsertInstanceRequest(
                project=self.project,
                zone=zone,
                bulk_insert_instance_resource_resource=resource,
                request_id=request,
            ),
            retry=None,
            timeout=self.settings.timeout_s,
        )

    def delete(self, zone: str, name: str) -> compute_v1.Operation:
        return self.instances.delete_unary(
            request=compute_v1.DeleteInstanceRequest(
                project=self.project,
                zone=zone,
                instance=name,
                request_id=request_id("delete", self.project, zone, name),
            ),
            **self._call(),
        )

    def set_labels(
        self, zone: str, name: str, labels: Mapping[str, str], fingerprint: str
    ) -> compute_v1.Operation:
        body = compute_v1.InstancesSetLabelsRequest(
            labels=dict(labels), label_fingerprint=fingerprint
        )
        return self.instances.set_labels_unary(
            project=self.project,
            zone=zone,
            instance=name,
            instances_set_labels_request_resource=body,
            **self._call(),
        )

    def serial_port_output(self, zone: str, name: str, last_bytes: int) -> str:
        """The last ``last_bytes`` of the VM's first serial port (a negative ``start``)."""
        answer = self.instances.get_serial_port_output(
            request=compute_v1.GetSerialPortOutputInstanceRequest(
                project=self.project, zone=zone, instance=name, port=1, start=-last_bytes
            ),
            **self._call(),
        )
        return answer.contents

    def wait(self, zone: str, operation: compute_v1.Operation, timeout_s: float) -> None:
        """Poll ``operation`` until DONE; raises its error as the client library would, or
        ``concurrent.futures.TimeoutError`` after ``timeout_s``."""
        deadline = time.monotonic() + max(timeout_s, 0.0)
        while operation.status != compute_v1.Operation.Status.DONE:
            if time.monotonic() >= deadline:
                raise concurrent.futures.TimeoutError(f"operation {operation.name} is running")
            time.sleep(self.settings.poll_s)
            operation = self.operations.get(
                project=self.project, zone=zone, operation=operation.name, **self._call()
            )
        if operation.error.errors:
            raise gexc.from_http_status(
                operation.http_error_status_code or 400,
                operation.http_error_message or operation.error.errors[0].message,
                errors=list(operation.error.errors),
            )

    # Facts (catalog refresh) ---------------------------------------------------------------
    def machine_types(self) -> Iterator[tuple[str, compute_v1.MachineType]]:
        """(zone, machine type) for every zone, from ``machineTypes.aggregatedList``."""
        client = compute_v1.MachineTypesClient(**self._kwargs)
        request = compute_v1.AggregatedListMachineTypesRequest(project=self.project)
        for scope, scoped in client.aggregated_list(request=request, **self._call()):
            for machine in scoped.machine_types:
                yield scope.rsplit("/", 1)[-1], machine

    def accelerator_types(self) -> Iterator[tuple[str, compute_v1.AcceleratorType]]:
        """(zone, accelerator type) for every zone, from ``acceleratorTypes.aggregatedList``."""
        client = compute_v1.AcceleratorTypesClient(**self._kwargs)
        request = compute_v1.AggregatedListAcceleratorTypesRequest(project=self.project)
        for scope, scoped in client.aggregated_list(request=request, **self._call()):
            for accelerator in scoped.accelerator_types:
                yield scope.rsplit("/", 1)[-1], accelerator
