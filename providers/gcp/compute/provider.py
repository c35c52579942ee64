"""Compute Engine VMs of one cluster.

* Ownership: every VM carries the cluster's labels; listings filter on the cluster label
  server-side (``aggregatedList`` over every zone), and a VM without it is never read,
  labelled or deleted, whatever id the caller passes.
* Idempotency: VM names derive from the cluster, launch request and index, and each
  ``bulkInsert`` carries a ``requestId`` derived from what it asks for. After a lost answer the
  launch request's VMs are looked up by label first; only when none appeared is the same
  request sent again.
* Many VMs of one type are one ``bulkInsert``: first all or none (``minCount`` = count), after
  a stockout whatever the zone can give (``minCount`` 1) unless the launch is all or nothing.
* Zones are tried in order; a stockout moves on, a quota, permission or configuration error
  stops at once. No capacity in any zone is a capacity error for the type everywhere.
* A spot VM that Google preempts stays listed (TERMINATED, reported stopped) until deleted.
"""

from __future__ import annotations

import concurrent.futures
import logging
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from google.auth.exceptions import GoogleAuthError
from google.cloud import compute_v1

from providers.base import (
    TAG_CLUSTER,
    TAG_LAUNCH_REQUEST,
    LaunchResult,
    NodeProvider,
    Offering,
    ProviderNode,
    fill_in_order,
)
from providers.errors import CapacityError, InvalidConfigError, ProviderError, launch_failure
from providers.gcp.api import cloud_call
from providers.gcp.cloud import GcpCloud
from providers.gcp.compute.client import ComputeApi, request_id
from providers.gcp.compute.instance import instance_properties, to_provider_node
from providers.gcp.errors import API_ERRORS, LOST_ANSWERS, classify, is_not_found
from providers.gcp.labels import NAME, check_cluster_name, check_labels, resource_name

logger = logging.getLogger(__name__)

MAX_RESENDS = 3
MAX_BACKOFF_S = 20.0
CONSOLE_BYTES = 16384
"""How much of the end of a VM's serial port output ``console_output`` reads."""


class GceNodeProvider(NodeProvider):
    """Compute Engine VMs labelled with this cluster's name, in any zone of the project."""

    cloud = GcpCloud()

    def __init__(self, provider_config: Mapping[str, Any], cluster_name: str) -> None:
        super().__init__(provider_config, cluster_name)
        check_cluster_name(cluster_name)
        self.api = ComputeApi(provider_config)
        self.settings = self.api.settings
        self._zones: dict[str, str] = {}
        """VM name -> zone, as listings and creates found them."""

    # Listing ------------------------------------------------------------------------------
    def nodes(self, tag_filters: Mapping[str, str] | None = None) -> list[ProviderNode]:
        if (tag_filters or {}).get(TAG_CLUSTER, self.cluster_name) != self.cluster_name:
            return []  # another cluster's nodes are never ours to see
        return self._list({**(tag_filters or {}), TAG_CLUSTER: self.cluster_name})

    def node(self, node_id: str) -> ProviderNode | None:
        found = self._owned(node_id)
        return to_provider_node(found[1]) if found else None

    def _list(self, labels: Mapping[str, str], name: str | None = None) -> list[ProviderNode]:
        with cloud_call(action="compute.instances.list"):
            found = [to_provider_node(vm) for vm in self.api.list(labels, name)]
        self._zones.update((node.id, node.zone) for node in found if node.zone)
        return sorted(found, key=lambda node: node.id)

    def _owned(self, node_id: str) -> tuple[str, compute_v1.Instance] | None:
        """(zone, VM) if ``node_id`` (a name, or ``zone/name``) is this cluster's VM."""
        zone, _, name = (node_id or "").rpartition("/")
        if not NAME.match(name):
            return None
        zone = zone or self._zones.get(name)
        if zone is None:
            listed = self._list({TAG_CLUSTER: self.cluster_name}, name)
            if not listed:
                return None
            zone = listed[0].zone
        with cloud_call(action="compute.instances.get"):
            try:
                vm = self.api.get(zone, name)
            except API_ERRORS as exc:
                if is_not_found(exc):
                    return None
                raise
        return (zone, vm) if vm.labels.get(TAG_CLUSTER) == self.cluster_name else None

    # Creating -----------------------------------------------------------------------------
    def create_node(
        self,
        node_config: Mapping[str, Any],
        tags: Mapping[str, str],
        count: int,
        launch_request_id: str,
        all_or_nothing: bool = False,
    ) -> LaunchResult:
        labels = check_labels(self.ownership_tags({**tags, TAG_LAUNCH_REQUEST: launch_request_id}))
        offer = self.cloud.catalog_offer(node_config, self.provider_config)
        has_gpus = offer is not None and offer.accelerator is not None
        properties = instance_properties(node_config, labels, has_gpus)
        offering = self.cloud.offering(node_config, self.provider_config)
        if offering is None or not offering.zones:
            raise InvalidConfigError(
                "no zone to launch in: set provider.availability_zone or the node type's own",
                field="availability_zone",
            )
        held = {n.id: n for n in self._list({TAG_LAUNCH_REQUEST: launch_request_id})}

        def attempt(zone: str) -> tuple[Offering, Callable[[], None]]:
            unit = Offering(offering.instance_type, zone, offering.market)
            return unit, lambda: self._fill(
                zone, unit, properties, launch_request_id, count, all_or_nothing, held
            )

        launched_with, errors = fill_in_order(map(attempt, offering.zones), held, count)
        if all_or_nothing and 0 < len(held) < count:
            self.terminate_nodes(sorted(held))
            held = {}
        if not held:
            raise launch_failure(errors)
        nodes = tuple(sorted(held.values(), key=lambda node: node.id))
        return LaunchResult(launch_request_id, count, nodes, launched_with, tuple(errors))

    def _fill(
        self,
        zone: str,
        offering: Offering,
        properties: compute_v1.InstanceProperties,
        launch_request_id: str,
        count: int,
        all_or_nothing: bool,
        held: dict[str, ProviderNode],
    ) -> None:
        """Bulk-insert the launch request's missing VMs in ``zone`` into ``held``: all of them
        first, then (after a stockout) as many as the zone gives; raises the last error."""
        whole = True
        while len(held) < count:
            names = [
                name
                for index in range(count)
                if (name := resource_name(self.cluster_name, launch_request_id, index)) not in held
            ][: count - len(held)]
            resource = compute_v1.BulkInsertInstanceResource(
                count=len(names),
                min_count=len(names) if whole else 1,
                instance_properties=properties,
                per_instance_properties={name: {"name": name} for name in names},
            )
            request = request_id(launch_request_id, zone, *names, str(whole))
            try:
                self._insert(zone, resource, request, offering, launch_request_id, held)
            except CapacityError:
                if not whole or len(names) == 1 or all_or_nothing:
                    raise
                whole = False
                continue
            fresh = self._list({TAG_LAUNCH_REQUEST: launch_request_id})
            added = [node for node in fresh if node.id not in held]
            held.update((node.id, node) for node in fresh)
            if not added:
                return

    def _insert(
        self,
        zone: str,
        resource: compute_v1.BulkInsertInstanceResource,
        request: str,
        offering: Offering,
        launch_request_id: str,
        held: Mapping[str, ProviderNode],
    ) -> None:
        """Send the bulk insert and wait for it; after a lost answer look for what it made
        (by label) before sending it again with the same ``requestId``."""
        for attempt in range(MAX_RESENDS + 1):
            try:
                operation = self.api.bulk_insert(zone, resource, request)
                break
            except LOST_ANSWERS as exc:
                launched = self._list({TAG_LAUNCH_REQUEST: launch_request_id})
                if any(node.id not in held for node in launched):
                    logger.info("bulkInsert answer lost (%s); it launched VMs", exc)
                    return
                if attempt == MAX_RESENDS:
                    raise classify(exc, offering, "compute.instances.create") from exc
                logger.info("bulkInsert answer lost (%s), nothing launched; again", exc)
                time.sleep(
                    random.uniform(0, min(MAX_BACKOFF_S, 2.0**attempt) * self.settings.poll_s)
                )
            except API_ERRORS as exc:
                raise classify(exc, offering, "compute.instances.create") from exc
        try:
            self.api.wait(zone, operation, self.settings.operation_timeout_s)
        except concurrent.futures.TimeoutError:
            logger.warning("bulkInsert in %s is still running; its VMs stay pending", zone)
        except API_ERRORS as exc:
            raise classify(exc, offering, "compute.instances.create") from exc

    # Changing -----------------------------------------------------------------------------
    def terminate_nodes(self, node_ids: Sequence[str]) -> list[str]:
        acted: list[str] = []
        operations: list[tuple[str, compute_v1.Operation]] = []
        for node_id in dict.fromkeys(node_ids):
            found = self._owned(node_id)
            if found is None:
                logger.warning("not terminating %s: not a VM of %s", node_id, self.cluster_name)
                continue
            zone, vm = found
            with cloud_call(action="compute.instances.delete"):
                try:
                    operations.append((zone, self.api.delete(zone, vm.name)))
                except API_ERRORS as exc:
                    if not is_not_found(exc):
                        raise
            acted.append(node_id)
        self._wait_all(operations, "compute.instances.delete")
        return acted

    def set_tags(self, node_ids: Iterable[str], tags: Mapping[str, str]) -> None:
        if TAG_CLUSTER in tags:
            logger.warning("not changing %s: ownership is not transferable", TAG_CLUSTER)
        updates = check_labels({k: v for k, v in tags.items() if k != TAG_CLUSTER})
        operations = []
        for node_id in dict.fromkeys(node_ids):
            found = self._owned(node_id)
            if found is None:
                logger.warning("not labelling %s: not a VM of %s", node_id, self.cluster_name)
                continue
            zone, vm = found
            labels = {**vm.labels, **updates}
            with cloud_call(action="compute.instances.setLabels"):
                operation = self.api.set_labels(zone, vm.name, labels, vm.label_fingerprint)
                operations.append((zone, operation))
        self._wait_all(operations, "compute.instances.setLabels")

    def _wait_all(self, operations: list[tuple[str, compute_v1.Operation]], action: str) -> None:
        """Wait for ``operations`` until one shared deadline; the first failure raises."""
        deadline = time.monotonic() + self.settings.operation_timeout_s
        for zone, operation in operations:
            try:
                self.api.wait(zone, operation, deadline - time.monotonic())
            except concurrent.futures.TimeoutError:
                logger.info("%s is still running", action)
            except API_ERRORS as exc:
                if not is_not_found(exc):
                    raise classify(exc, action=action) from exc

    # Diagnosing ---------------------------------------------------------------------------
    def console_output(self, node_id: str) -> str | None:
        """The end of an owned VM's serial port 1 (``instances.getSerialPortOutput``), where
        the boot and startup-script logs go; None for a VM that is not the cluster's."""
        found = self._owned(node_id)
        if found is None:
            return None
        zone, vm = found
        with cloud_call(action="compute.instances.getSerialPortOutput"):
            try:
                return self.api.serial_port_output(zone, vm.name, CONSOLE_BYTES) or None
            except API_ERRORS as exc:
                if is_not_found(exc):
                    return None
                raise

    # Before launching --------------------------------------------------------------------
    def preflight(self, node_configs: Mapping[str, Mapping[str, Any]]) -> list[str]:
        """The Compute Engine API answers for the project, and each node config is a VM."""
        try:
            self._list({TAG_CLUSTER: self.cluster_name})
        except ProviderError as err:
            return [f"the Compute Engine API does not answer for {self.api.project}: {err}"]
        except GoogleAuthError as err:
            return [f"no usable GCP credentials: {err}"]
        problems = []
        for name, node_config in node_configs.items():
            try:
                instance_properties(node_config, {}, has_gpus=False)
            except ProviderError as err:
                problems.append(f"{name}: {err}")
        return problems
