"""GCP TPU VM node provider: a node is one TPU slice (``tpu_v2.Node``), however many hosts.

Ownership is the ``accel-cluster-name`` label. The v2 API cannot filter a list by label, so
every listing reads the zone's nodes (all pages) and keeps only this cluster's; every get,
delete and label update checks the label first. Creation is idempotent: the node id derives
from the cluster, launch request id and index, so a retry finds ALREADY_EXISTS, never a twin.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import requests
from google.api_core import exceptions as gexc
from google.api_core.operation import Operation
from google.auth.exceptions import GoogleAuthError
from google.cloud import tpu_v2
from google.protobuf import json_format

from accel.tpu_generations import parse_pod_type
from providers.base import (
    CLOUD_PENDING,
    CLOUD_RUNNING,
    CLOUD_STOPPED,
    CLOUD_STOPPING,
    CLOUD_TERMINATED,
    CLOUD_TERMINATING,
    LIVE_CLOUD_STATES,
    ON_DEMAND,
    SPOT,
    TAG_CLUSTER,
    TAG_LAUNCH_REQUEST,
    Host,
    LaunchResult,
    NodeProvider,
    Offering,
    ProviderNode,
)
from providers.errors import InvalidConfigError, NodeNotFoundError, ProviderError
from providers.gcp_tpu.client import TpuApi
from providers.gcp_tpu.cloud import GcpCloud, tpu_slice_type
from providers.gcp_tpu.errors import classify, is_already_exists, is_not_found

logger = logging.getLogger(__name__)

DEFAULT_OPERATION_TIMEOUT_S = 900.0
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

_STATES = {
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
    "DELETING": CLOUD_TERMINATING,
    "PREEMPTED": CLOUD_TERMINATED,
    "TERMINATED": CLOUD_TERMINATED,
}
_API_ERRORS = (gexc.GoogleAPICallError, gexc.RetryError, requests.RequestException)
_NODE_ID = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")
_LABEL_RULE = "lowercase letters, digits, '_' and '-', at most 63 characters"


@contextmanager
def _cloud_call(offering: Offering | None = None, action: str | None = None):
    """Turn a client-library failure into the taxonomy."""
    try:
        yield
    except _API_ERRORS as exc:
        raise classify(exc, offering, action) from exc


def node_id_for(cluster_name: str, launch_request_id: str, index: int) -> str:
    """The deterministic TPU node id of slice ``index`` of a launch request."""
    digest = hashlib.sha256(f"{cluster_name}\0{launch_request_id}".encode()).hexdigest()[:12]
    slug = re.sub(r"[^a-z0-9]+", "-", cluster_name.lower()).strip("-")[:30].rstrip("-")
    if not slug or not slug[0].isalpha():
        slug = f"tpu-{slug}".rstrip("-")
    return f"{slug}-{digest}-{index}"


def check_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """``labels`` as GCP accepts them, or InvalidConfigError naming the offending one."""
    for key, value in labels.items():
        if not _LABEL_KEY.match(key):
            raise InvalidConfigError(
                f"tag key {key!r} is not a valid GCP label key ({_LABEL_RULE})"
            )
        if not isinstance(value, str) or not _LABEL_VALUE.match(value):
            raise InvalidConfigError(
                f"tag {key}={value!r} is not a valid GCP label value ({_LABEL_RULE})"
            )
    return dict(labels)


@dataclass(frozen=True)
class LaunchSpec:
    """The node to create and the offering it draws on."""

    node: tpu_v2.Node
    offering: Offering


def launch_spec(node_config: Mapping[str, Any], zone: str, labels: Mapping[str, str]) -> LaunchSpec:
    """Ray's GCP TPU ``node_config`` (plus ``market: spot``) as a ``tpu_v2.Node``."""
    config = {k: v for k, v in node_config.items() if k not in ("market", "labels")}
    market = node_config.get("market", ON_DEMAND)
    if market not in (ON_DEMAND, SPOT):
        raise InvalidConfigError(f"node_config.market must be {SPOT!r} or {ON_DEMAND!r}")
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
                f"API (known: {', '.join(RUNTIME_VERSIONS)}); set node_config.runtimeVersion"
            )
        config["runtimeVersion"] = runtime
    scheduling = dict(config.get("schedulingConfig") or {})
    if market == SPOT:
        scheduling["spot"] = True
    if scheduling:
        config["schedulingConfig"] = scheduling
    spot = bool(scheduling.get("spot") or scheduling.get("preemptible"))
    config["labels"] = {**node_config.get("labels", {}), **labels}
    node = tpu_v2.Node()
    try:
        json_format.ParseDict(config, tpu_v2.Node.pb(node))
    except json_format.ParseError as exc:
        raise InvalidConfigError(f"node_config is not a valid TPU node: {exc}") from exc
    instance_type = pod.name if pod else accelerator_type
    return LaunchSpec(node, Offering(instance_type, zone, SPOT if spot else ON_DEMAND))


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
        state=_STATES.get(tpu_v2.Node.State(node.state).name, CLOUD_PENDING),
        tags=dict(node.labels),
        instance_type=pod.name if pod else accelerator_type,
        zone=parts[3] if len(parts) > 3 else None,
        market=SPOT if scheduling.spot or scheduling.preemptible else ON_DEMAND,
        hosts=hosts,
        launched_at=node.create_time.timestamp() if node.create_time else None,
    )


class GcpTpuNodeProvider(NodeProvider):
    """TPU VM slices of one cluster in one zone of one project."""

    cloud = GcpCloud()

    def __init__(self, provider_config: Mapping[str, Any], cluster_name: str) -> None:
        super().__init__(provider_config, cluster_name)
        if not cluster_name or not _LABEL_VALUE.match(cluster_name):
            raise InvalidConfigError(
                f"cluster name {cluster_name!r} cannot own GCP resources: it is stored as label "
                f"{TAG_CLUSTER}, whose value allows only {_LABEL_RULE}"
            )
        self.api = TpuApi(provider_config)
        self.zone = self.api.zone
        self.operation_timeout_s = float(
            provider_config.get("operation_timeout_s", DEFAULT_OPERATION_TIMEOUT_S)
        )

    # Listing --------------------------------------------------------------------------
    def nodes(self, tag_filters: Mapping[str, str] | None = None) -> list[ProviderNode]:
        with _cloud_call(action="tpu.nodes.list"):
            listed = [node for node in self.api.list_nodes() if self._owns(node)]
        wanted = dict(tag_filters or {})
        result = []
        for node in map(to_provider_node, listed):
            if node.state in LIVE_CLOUD_STATES and all(
                node.tags.get(key) == value for key, value in wanted.items()
            ):
                result.append(node)
        return result

    def node(self, node_id: str) -> ProviderNode | None:
        node = self._get_owned(node_id)
        return to_provider_node(node) if node is not None else None

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
        spec = launch_spec(node_config, self.zone, labels)
        if count < 1:
            return LaunchResult(launch_request_id, 0, offering=spec.offering)
        deadline = time.monotonic() + self.operation_timeout_s
        errors: list[ProviderError] = []
        started: list[tuple[str, Operation | None]] = []
        for index in range(count):
            node_id = node_id_for(self.cluster_name, launch_request_id, index)
            try:
                started.append((node_id, self.api.create_node(node_id, spec.node)))
            except _API_ERRORS as exc:
                if not is_already_exists(exc):
                    errors.append(classify(exc, spec.offering, "tpu.nodes.create"))
                    break  # the same offering would fail the same way
                logger.info(
                    "TPU node %s already exists: launch %s retried", node_id, launch_request_id
                )
                started.append((node_id, None))
        nodes = []
        for node_id, operation in started:
            node = self._finish_create(node_id, operation, deadline, spec.offering, errors)
            if node is not None:
                nodes.append(node)
        if all_or_nothing and len(nodes) < count and nodes:
            logger.warning(
                "gang launch %s got %d of %d slices; rolling back",
                launch_request_id,
                len(nodes),
                count,
            )
            self.terminate_nodes([node.id for node in nodes])
            nodes = []
        if not nodes:
            raise errors[0]
        return LaunchResult(launch_request_id, count, tuple(nodes), spec.offering, tuple(errors))

    def _finish_create(
        self,
        node_id: str,
        operation: Operation | None,
        deadline: float,
        offering: Offering,
        errors: list[ProviderError],
    ) -> ProviderNode | None:
        """Wait for the create (until ``deadline``), then the owned node, or None + an error."""
        node = None
        if operation is not None:
            try:
                node = self.api.wait(operation, deadline - time.monotonic())
            except concurrent.futures.TimeoutError:
                logger.warning("creating TPU node %s is still running; it stays pending", node_id)
            except _API_ERRORS as exc:
                errors.append(classify(exc, offering, "tpu.nodes.create"))
                self._discard_failed(node_id)
                return None
        if node is None:
            try:
                node = self.api.get_node(node_id)
            except _API_ERRORS as exc:
                errors.append(classify(exc, offering, "tpu.nodes.get"))
                return None
        if not self._owns(node):
            errors.append(
                InvalidConfigError(f"TPU node {node_id} exists but is not this cluster's", offering)
            )
            return None
        return to_provider_node(node)

    def _discard_failed(self, node_id: str) -> None:
        """Delete what a failed create left behind, if anything and if ours (no leaks)."""
        try:
            if self._get_owned(node_id) is not None:
                self.api.delete_node(node_id)
                logger.info("deleting TPU node %s left by a failed create", node_id)
        except (ProviderError, *_API_ERRORS) as exc:
            logger.warning("could not clean up TPU node %s after a failed create: %s", node_id, exc)

    def terminate_nodes(self, node_ids: Sequence[str]) -> list[str]:
        acted: list[str] = []
        operations: list[tuple[str, Operation]] = []
        errors: list[ProviderError] = []
        for node_id in dict.fromkeys(node_ids):
            try:
                node = self._get_owned(node_id)
                if node is None:
                    logger.warning(
                        "not terminating %s: no such node of cluster %s", node_id, self.cluster_name
                    )
                    continue
                if tpu_v2.Node.State(node.state).name != "DELETING":
                    with _cloud_call(action="tpu.nodes.delete"):
                        operations.append((node_id, self.api.delete_node(node_id)))
                acted.append(node_id)
            except NodeNotFoundError as err:  # deleted meanwhile: done
                logger.info("TPU node %s is already gone: %s", node_id, err)
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

    def set_tags(self, node_ids: Iterable[str], tags: Mapping[str, str]) -> None:
        updates = check_labels(self.ownership_tags(tags))
        operations: list[tuple[str, Operation]] = []
        errors: list[ProviderError] = []
        for node_id in dict.fromkeys(node_ids):
            try:
                node = self._get_owned(node_id)
                if node is None:
                    logger.warning(
                        "not tagging %s: no such node of cluster %s", node_id, self.cluster_name
                    )
                    continue
                with _cloud_call(action="tpu.nodes.update"):
                    labels = {**node.labels, **updates}
                    operations.append((node_id, self.api.update_labels(node_id, labels)))
            except ProviderError as err:
                errors.append(err)
        self._wait_all(operations, "tpu.nodes.update", errors)
        if errors:
            raise errors[0]

    # Before launching ----------------------------------------------------------------
    def preflight(self, node_configs: Mapping[str, Mapping[str, Any]]) -> list[str]:
        """The TPU API answers for the project and zone, and each node config is a valid
        TPU node."""
        try:
            with _cloud_call(action="tpu.nodes.list"):
                next(iter(self.api.list_nodes()), None)
        except ProviderError as err:
            where = f"{self.provider_config.get('project_id')}/{self.zone}"
            return [f"the Cloud TPU API does not answer for {where}: {err}"]
        except GoogleAuthError as err:
            return [f"no usable GCP credentials: {err}"]
        problems = []
        for name, node_config in node_configs.items():
            try:
                launch_spec(node_config, self.zone, {})
            except ProviderError as err:
                problems.append(f"{name}: {err}")
        return problems

    # Helpers ----------------------------------------------------------------------------
    def _owns(self, node: tpu_v2.Node) -> bool:
        return node.labels.get(TAG_CLUSTER) == self.cluster_name

    def _get_owned(self, node_id: str) -> tpu_v2.Node | None:
        """The node if it exists and carries this cluster's label, else None."""
        if not _NODE_ID.match(node_id or ""):
            return None
        try:
            node = self.api.get_node(node_id)
        except _API_ERRORS as exc:
            if is_not_found(exc):
                return None
            raise classify(exc, action="tpu.nodes.get") from exc
        return node if self._owns(node) else None

    def _wait_all(
        self, operations: list[tuple[str, Operation]], action: str, errors: list[ProviderError]
    ) -> list[str]:
        """Wait for ``operations`` until one shared deadline; returns the ids that failed."""
        deadline = time.monotonic() + self.operation_timeout_s
        failed = []
        for node_id, operation in operations:
            try:
                self.api.wait(operation, deadline - time.monotonic())
            except concurrent.futures.TimeoutError:
                logger.info("%s on TPU node %s is still running", action, node_id)
            except _API_ERRORS as exc:
                if is_not_found(exc):
                    continue
                errors.append(classify(exc, action=action))
                failed.append(node_id)
        return failed
