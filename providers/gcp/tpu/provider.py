"""GCP TPU VM node provider: a node is one TPU slice (``tpu_v2.Node``), however many hosts.

Ownership is the ``accel-cluster-name`` label. The v2 API cannot filter a list by label, so
every listing reads each watched zone's nodes (all pages) and keeps only this cluster's;
every get, delete and label update checks the label first. Creation is idempotent: the node
id derives from the cluster, launch request id and index, so a retry finds ALREADY_EXISTS,
never a twin. Zones are tried in order; a stockout moves on to the next.

A node type with ``queuedResource`` asks through a queued resource of the same id: until its
node exists it is listed as a pending node (so demand does not launch twice), a FAILED or
SUSPENDED one is listed stopped (so it is deleted and replaced), and deleting the node
deletes the request with it. A PREEMPTED node stays listed (stopped) until it is deleted.
"""

from __future__ import annotations

import concurrent.futures
import logging
import random
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from google.api_core import exceptions as gexc
from google.api_core.operation import Operation
from google.auth.exceptions import GoogleAuthError
from google.cloud import tpu_v2

from providers.base import (
    LIVE_CLOUD_STATES,
    TAG_LAUNCH_REQUEST,
    LaunchResult,
    NodeProvider,
    Offering,
    OperationStatus,
    ProviderNode,
    split_zones,
)
from providers.errors import CapacityError, InvalidConfigError, ProviderError, launch_failure
from providers.gcp.api import cloud_call
from providers.gcp.cloud import GcpCloud
from providers.gcp.errors import API_ERRORS, classify, is_already_exists, is_not_found
from providers.gcp.labels import NAME, check_cluster_name, check_labels, owned, resource_name
from providers.gcp.tpu.client import TpuApi
from providers.gcp.tpu.launch import (
    LaunchSpec,
    launch_spec,
    queued_labels,
    queued_node,
    to_provider_node,
)

logger = logging.getLogger(__name__)

LABEL_WRITE_TRIES = 5
"""Label writes per call before giving up on one lost to concurrent writers."""

node_id_for = resource_name


class GcpTpuNodeProvider(NodeProvider):
    """TPU VM slices of one cluster in the zones it uses, in one project."""

    cloud = GcpCloud()

    def __init__(
        self,
        provider_config: Mapping[str, Any],
        cluster_name: str,
        zones: Sequence[str] = (),
    ) -> None:
        super().__init__(provider_config, cluster_name)
        check_cluster_name(cluster_name)
        self.api = TpuApi(provider_config)
        self.settings = self.api.settings
        own = split_zones(provider_config.get("availability_zone"))
        self.zones = list(dict.fromkeys([*own, *zones]))
        """Zones watched: the provider's, then every zone a TPU node type launches in (none:
        only ``zone/name`` ids are found, as a node's own agent addresses itself)."""

    # Listing --------------------------------------------------------------------------
    def nodes(self, tag_filters: Mapping[str, str] | None = None) -> list[ProviderNode]:
        found: dict[str, ProviderNode] = {}
        for zone in self.zones:
            with cloud_call(action="tpu.nodes.list"):
                listed = [n for n in self.api.list_nodes(zone) if self._owns(n)]
                queued = [q for q in self.api.list_queued(zone) if self._owns_queued(q)]
            found.update((node.id, node) for node in map(to_provider_node, listed))
            for waiting in filter(None, map(queued_node, queued)):
                found.setdefault(waiting.id, waiting)  # until its node exists
        wanted = dict(tag_filters or {})
        return [
            node
            for node in sorted(found.values(), key=lambda n: n.id)
            if node.state in LIVE_CLOUD_STATES
            and all(node.tags.get(key) == value for key, value in wanted.items())
        ]

    def node(self, node_id: str) -> ProviderNode | None:
        located = self._locate(node_id)
        return located[1] if located else None

    # Changing -------------------------------------------------------------------------
    def create_node(
        self,
        node_config: Mapping[str, Any],
        tags: Mapping[str, str],
        count: int,
        launch_request_id: str,
        all_or_nothing: bool = False,
    ) -> LaunchResult:
        labels = check_labels(self.ownership_tags({**tags, TAG_LAUNCH_REQUEST: launch_request_id}))
        spec = launch_spec(node_config, labels)
        offering = self.cloud.offering(node_config, self.provider_config)
        zones = list(offering.zones if offering and offering.zones else self.zones)
        if not zones:
            raise InvalidConfigError(
                "no zone to launch in: set provider.availability_zone or the node type's own",
                field="availability_zone",
            )
        if count < 1:
            unit = Offering(spec.instance_type, zones[0], spec.market)
            return LaunchResult(launch_request_id, 0, offering=unit)
        errors: list[ProviderError] = []
        nodes: list[ProviderNode] = []
        running: list[str] = []
        launched_with = None
        for zone in zones:
            unit = Offering(spec.instance_type, zone, spec.market)
            made = self._create_in(
                zone, spec, unit, launch_request_id, len(nodes), count, errors, running
            )
            nodes.extend(made)
            launched_with = unit if made else launched_with
            if len(nodes) >= count or running or not isinstance(errors[-1], CapacityError):
                break  # done, left running, or quota/permission/config everywhere
        if all_or_nothing and 0 < len(nodes) < count:
            logger.warning(
                "gang launch %s got %d of %d slices; rolling back",
                launch_request_id,
                len(nodes),
                count,
            )
            self.terminate_nodes([node.id for node in nodes])
            nodes = []
        if not nodes and not running:
            raise launch_failure(errors)
        return LaunchResult(
            launch_request_id,
            count,
            tuple(nodes),
            launched_with,
            tuple(errors),
            in_progress=count - len(nodes) if running else 0,
            operations=tuple(running),
        )

    def operation_status(self, handle: str) -> OperationStatus:
        """A create left running: done or not, and the cloud's error if it failed."""
        _, name, instance_type, market = handle.split(":")
        offering = Offering(instance_type, name.split("/")[3], market)
        with cloud_call(offering, "tpu.operations.get"):
            try:
                operation = self.api.operation(name)
            except API_ERRORS as exc:
                if is_not_found(exc):
                    return OperationStatus(done=True)
                raise
        if not operation.done:
            return OperationStatus(done=False)
        if operation.error.code:
            exc = gexc.from_grpc_status(
                operation.error.code, operation.error.message, errors=(operation.error,)
            )
            return OperationStatus(True, classify(exc, offering, "tpu.nodes.create"))
        return OperationStatus(done=True)

    def _create_in(
        self,
        zone: str,
        spec: LaunchSpec,
        offering: Offering,
        launch_request_id: str,
        start: int,
        count: int,
        errors: list[ProviderError],
        running: list[str],
    ) -> list[ProviderNode]:
        """Slices ``start`` .. ``count - 1`` of the launch request in ``zone``, waiting for
        their creates a few seconds in all (``operation_wait_s``): the handle of one still
        running goes to ``running``, its slice (once listed) is pending capacity."""
        deadline = time.monotonic() + self.settings.operation_wait_s
        started: list[tuple[str, Operation | None]] = []
        for index in range(start, count):
            node_id = node_id_for(self.cluster_name, launch_request_id, index)
            try:
                if spec.queued is not None:
                    operation = self.api.create_queued(zone, node_id, spec.queued_resource(node_id))
                else:
                    operation = self.api.create_node(zone, node_id, spec.node)
                started.append((node_id, operation))
            except API_ERRORS as exc:
                if not is_already_exists(exc):
                    errors.append(classify(exc, offering, "tpu.nodes.create"))
                    break  # the same offering would fail the same way
                logger.info("TPU %s already exists: launch %s retried", node_id, launch_request_id)
                started.append((node_id, None))
        nodes = []
        for node_id, operation in started:
            node = self._finish_create(
                zone, node_id, operation, deadline, offering, errors, running
            )
            if node is not None:
                nodes.append(node)
        return nodes

    def _finish_create(
        self,
        zone: str,
        node_id: str,
        operation: Operation | None,
        deadline: float,
        offering: Offering,
        errors: list[ProviderError],
        running: list[str],
    ) -> ProviderNode | None:
        """Wait for the create (until ``deadline``), then the owned node, or None + an error
        (None, its handle in ``running``, while the create goes on and lists nothing yet)."""
        still_running = False
        if operation is not None:
            try:
                self.settings.wait(operation, deadline - time.monotonic())
            except concurrent.futures.TimeoutError:
                logger.info("creating TPU %s is still running; looked at again later", node_id)
                name = operation.operation.name
                running.append(f"tpu:{name}:{offering.instance_type}:{offering.market}")
                still_running = True
            except API_ERRORS as exc:
                errors.append(classify(exc, offering, "tpu.nodes.create"))
                self._discard_failed(zone, node_id)
                return None
        try:
            located = self._in_zone(zone, node_id)
        except ProviderError as err:
            errors.append(err)
            return None
        if located is None and not still_running:
            errors.append(
                InvalidConfigError(f"TPU node {node_id} exists but is not this cluster's", offering)
            )
        return located

    def _discard_failed(self, zone: str, node_id: str) -> None:
        """Delete what a failed create left behind, if anything and if ours (no leaks)."""
        try:
            if self._in_zone(zone, node_id) is not None:
                self._delete(zone, node_id)
                logger.info("deleting TPU %s left by a failed create", node_id)
        except (ProviderError, *API_ERRORS) as exc:
            logger.warning("could not clean up TPU %s after a failed create: %s", node_id, exc)

    def terminate_nodes(self, node_ids: Sequence[str]) -> list[str]:
        acted: list[str] = []
        operations: list[tuple[str, Operation]] = []
        errors: list[ProviderError] = []
        for node_id in dict.fromkeys(node_ids):
            try:
                located = self._locate(node_id)
                if located is None:
                    logger.warning(
                        "not terminating %s: no such node of cluster %s", node_id, self.cluster_name
                    )
                    continue
                zone, node = located
                if node.state != "terminating":
                    operations.extend((node_id, op) for op in self._delete(zone, node.id))
                acted.append(node_id)
            except ProviderError as err:
                errors.append(err)
        for failed in self._wait_all(operations, "tpu.nodes.delete", errors):
            acted.remove(failed)
        if errors and not acted:
            raise errors[0]
        for err in errors:
            logger.warning("terminating TPU nodes: %s", err)
        return acted

    def _delete(self, zone: str, node_id: str) -> list[Operation]:
        """Delete the node's queued resource (with its node) if it has one, else the node."""
        with cloud_call(action="tpu.queuedResources.delete"):
            try:
                self.api.get_queued(zone, node_id)
                return [self.api.delete_queued(zone, node_id)]
            except API_ERRORS as exc:
                if not is_not_found(exc):
                    raise
        with cloud_call(action="tpu.nodes.delete"):
            try:
                return [self.api.delete_node(zone, node_id)]
            except API_ERRORS as exc:
                if is_not_found(exc):
                    return []
                raise

    def set_tags(self, node_ids: Iterable[str], tags: Mapping[str, str]) -> None:
        """Merge ``tags`` into each node's labels. The TPU API replaces labels whole (no
        fingerprint), so the hosts of one slice writing at once can undo each other's write:
        each write is read back and redone, a few times, until its labels are there. Raises
        :class:`ProviderError` where other writers still undid it: the write did not happen,
        so the caller (a host's agent) retries it later."""
        updates = check_labels(self.ownership_tags(tags))
        pending = list(dict.fromkeys(node_ids))
        for attempt in range(LABEL_WRITE_TRIES):
            if attempt:
                time.sleep(random.uniform(0.05, 0.25) * attempt)  # apart from the other host
            pending = self._write_labels(pending, updates)
            if not pending:
                return
        raise ProviderError(
            f"labels of TPU nodes {', '.join(pending)} were overwritten by concurrent writes "
            f"{LABEL_WRITE_TRIES} times",
            code="CONCURRENT_LABEL_WRITES",
        )

    def _write_labels(self, node_ids: Sequence[str], updates: Mapping[str, str]) -> list[str]:
        """Write ``updates`` into each node's labels; the ids whose labels, read back, lack
        them (another writer's update landed over ours)."""
        operations: list[tuple[str, Operation]] = []
        errors: list[ProviderError] = []
        for node_id in node_ids:
            try:
                located = self._locate(node_id)
                if located is None or located[1].state not in LIVE_CLOUD_STATES:
                    logger.warning(
                        "not tagging %s: no such node of cluster %s", node_id, self.cluster_name
                    )
                    continue
                zone, node = located
                with cloud_call(action="tpu.nodes.update"):
                    labels = {**node.tags, **updates}
                    operations.append((node_id, self.api.update_labels(zone, node.id, labels)))
            except ProviderError as err:
                errors.append(err)
        self._wait_all(operations, "tpu.nodes.update", errors)
        if errors:
            raise errors[0]
        lost = []
        for node_id, _ in operations:
            node = self.node(node_id)
            if node is not None and any(node.tags.get(k, "") != v for k, v in updates.items()):
                lost.append(node_id)
        return lost

    # Before launching ----------------------------------------------------------------
    def preflight(self, node_configs: Mapping[str, Mapping[str, Any]]) -> list[str]:
        """The TPU API answers for the project and zones, and each node config is a valid
        TPU node."""
        try:
            for zone in self.zones:
                with cloud_call(action="tpu.nodes.list"):
                    next(iter(self.api.list_nodes(zone)), None)
        except ProviderError as err:
            where = f"{self.provider_config.get('project_id')}/{', '.join(self.zones)}"
            return [f"the Cloud TPU API does not answer for {where}: {err}"]
        except GoogleAuthError as err:
            return [f"no usable GCP credentials: {err}"]
        problems = []
        for name, node_config in node_configs.items():
            try:
                launch_spec(node_config, {})
            except ProviderError as err:
                problems.append(f"{name}: {err}")
        return problems

    # Helpers ----------------------------------------------------------------------------
    def _owns(self, node: tpu_v2.Node) -> bool:
        return owned(node.labels, self.cluster_name)

    def _owns_queued(self, queued: tpu_v2.QueuedResource) -> bool:
        return owned(queued_labels(queued), self.cluster_name)

    def _locate(self, node_id: str) -> tuple[str, ProviderNode] | None:
        """(zone, node) of an owned node or waiting queued resource; ``zone/name`` (what the
        node's agent knows) looks only in that zone."""
        zone, _, name = (node_id or "").rpartition("/")
        for candidate in [zone] if zone else self.zones:
            found = self._in_zone(candidate, name)
            if found is not None:
                return candidate, found
        return None

    def _in_zone(self, zone: str, node_id: str) -> ProviderNode | None:
        """The owned node (or waiting queued resource) ``node_id`` in ``zone``, else None."""
        if not NAME.match(node_id or ""):
            return None
        with cloud_call(action="tpu.nodes.get"):
            try:
                node = self.api.get_node(zone, node_id)
                return to_provider_node(node) if self._owns(node) else None
            except API_ERRORS as exc:
                if not is_not_found(exc):
                    raise
            try:
                queued = self.api.get_queued(zone, node_id)
            except API_ERRORS as exc:
                if is_not_found(exc):
                    return None
                raise
        return queued_node(queued) if self._owns_queued(queued) else None

    def _wait_all(
        self, operations: list[tuple[str, Operation]], action: str, errors: list[ProviderError]
    ) -> list[str]:
        """Wait for ``operations`` a few seconds in all (``operation_wait_s``: the rest go on
        in the cloud, and the next listing shows them); returns the ids that failed."""
        deadline = time.monotonic() + self.settings.operation_wait_s
        failed = []
        for node_id, operation in operations:
            try:
                self.settings.wait(operation, deadline - time.monotonic())
            except concurrent.futures.TimeoutError:
                logger.info("%s on TPU node %s is still running", action, node_id)
            except API_ERRORS as exc:
                if is_not_found(exc):
                    continue
                errors.append(classify(exc, action=action))
                failed.append(node_id)
        return failed
