"""A fake Cloud TPU v2 REST server: the subset of the API the GCP TPU plugin uses.

Serves create (``POST .../nodes?nodeId=``), get, list (``pageSize``/``pageToken``), delete,
patch (``updateMask=labels``) and operations get, with Google-style JSON errors so the real
client library raises its real exception classes. Creates and deletes are long-running
operations that finish after a configurable delay. Slices get one network endpoint per host.

Faults for tests are injected with :meth:`TpuCloud.inject` (or ``POST /_emulator/faults``
with the same fields as JSON; ``DELETE /_emulator/faults`` clears them). State lives in
memory, behind one lock, and is bounded.

The embedded local GCP (``providers.local.gcp.server``) serves it beside the fake Compute Engine.
"""

from __future__ import annotations

import itertools
import logging
import math
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from google.cloud.tpu_v2.types import cloud_tpu

from accel.tpu_generations import generation, parse_pod_type
from instance_catalog.tpu import tpu_slice, tpu_slice_types, tpu_zones
from providers.local.gcp.rest import (
    ApiError,
    FakeControls,
    FakeServer,
    any_detail,
    now_rfc3339,
)

logger = logging.getLogger(__name__)

FAULTS_PATH = "/_emulator/faults"
_NODES = re.compile(r"^/v2/projects/([^/]+)/locations/([^/]+)/nodes(?:/([^/:]+))?$")
_OPERATION = re.compile(r"^/v2/projects/([^/]+)/locations/([^/]+)/operations/([^/:]+)$")
_QUEUED = re.compile(r"^/v2/projects/([^/]+)/locations/([^/]+)/queuedResources(?:/([^/:]+))?$")
_ACCELERATOR_TYPES = re.compile(r"^/v2/projects/([^/]+)/locations/([^/]+)/acceleratorTypes$")
_LOCATIONS = re.compile(r"^/v2/projects/([^/]+)/locations$")
_NODE_ID = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")
_MAX_PAGE_SIZE = 100
FAULT_KINDS = (
    "stockout",  # the create operation fails: no more capacity in the zone (code 8)
    "stockout_call",  # the create call itself fails with RESOURCE_EXHAUSTED, no quota details
    "quota",  # 429 RESOURCE_EXHAUSTED with a QuotaFailure naming the TPU quota
    "rate_limit",  # 429 RESOURCE_EXHAUSTED, ErrorInfo RATE_LIMIT_EXCEEDED (requests per minute)
    "permission",  # 403 PERMISSION_DENIED naming the IAM permission
    "unavailable",  # 503 UNAVAILABLE
    "operation_error",  # the operation fails with ``code``/``message``
    "queued_failed",  # a queued resource fails instead of getting capacity
)
_FAULT_METHODS = {
    "stockout": ("create",),
    "stockout_call": ("create",),
    "quota": ("create",),
    "operation_error": ("create", "delete"),
    "queued_failed": ("provision",),
}
"""Calls a fault kind can hit (the others hit any call)."""
_VERB_PERMISSIONS = {
    "create": "tpu.nodes.create",
    "get": "tpu.nodes.get",
    "list": "tpu.nodes.list",
    "delete": "tpu.nodes.delete",
    "patch": "tpu.nodes.update",
    "operation": "tpu.operations.get",
    "create_queued": "tpu.queuedResources.create",
    "list_queued": "tpu.queuedResources.list",
    "get_queued": "tpu.queuedResources.get",
    "delete_queued": "tpu.queuedResources.delete",
}


@dataclass
class Fault:
    """An injected fault: ``kind`` on calls to ``method`` (any if None) matching the filters."""

    kind: str
    method: str | None = None
    zone: str | None = None
    accelerator_type: str | None = None
    times: int | None = None
    """How many calls it hits; None: until cleared."""
    code: int = 13
    message: str = "Internal error."

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; known: {', '.join(FAULT_KINDS)}")


def _slice_of(body: dict) -> tuple[str, int]:
    """(normalised accelerator type, hosts) of a create request, or INVALID_ARGUMENT."""
    accelerator_type = body.get("acceleratorType")
    config = body.get("acceleratorConfig")
    if bool(accelerator_type) == bool(config):
        raise ApiError(
            400,
            "INVALID_ARGUMENT",
            "Exactly one of accelerator_type and accelerator_config must be specified.",
        )
    if config:
        kind = config.get("type")
        if isinstance(kind, int):
            kind = cloud_tpu.AcceleratorConfig.Type(kind).name
        gen = generation({"V5LITE_POD": "v5litepod"}.get(str(kind), str(kind)))
        topology = str(config.get("topology", ""))
        if gen is None or not re.fullmatch(r"\d+(x\d+)+", topology):
            raise ApiError(400, "INVALID_ARGUMENT", f"Invalid accelerator config: {config}.")
        chips = math.prod(int(d) for d in topology.split("x"))
        accelerator_type = f"{gen.name}-{chips * gen.cores_per_chip}"
    pod = parse_pod_type(accelerator_type)
    shape = tpu_slice(accelerator_type) if pod else None
    if pod is None or shape is None or pod.generation.name == "v7x":
        raise ApiError(
            400, "INVALID_ARGUMENT", f"Accelerator type {accelerator_type!r} is not supported."
        )
    return pod.name, shape.hosts


def _check_labels(labels: dict) -> None:
    for key, value in labels.items():
        if not _LABEL_KEY.match(key) or not _LABEL_VALUE.match(str(value)):
            raise ApiError(400, "INVALID_ARGUMENT", f"Invalid label {key}={value!r}.")


def _catalog_zones() -> dict[str, list[str]]:
    """Zone -> every published slice type whose generation the catalog places there."""
    zones: dict[str, list[str]] = {}
    for name in tpu_slice_types():
        shape = tpu_slice(name)
        if shape is None or shape.generation == "v7x":
            continue
        for region_zones in tpu_zones(shape.generation).values():
            for zone in region_zones:
                zones.setdefault(zone, []).append(name)
    return zones


class TpuCloud(FakeControls):
    """The emulated TPU API state: nodes and operations of every project and zone."""

    def __init__(
        self,
        create_delay_s: float = 0.0,
        delete_delay_s: float = 0.0,
        max_nodes: int = 1000,
        max_operations: int = 10_000,
        operation_polls: int = 0,
        clock: Callable[[], float] = time.monotonic,
        zones: Mapping[str, list[str]] | None = None,
        service_account_exists: Callable[[str], bool] | None = None,
    ) -> None:
        self.service_account_exists = service_account_exists
        """The embedded IAM's check: a node naming a service account that does not exist is
        refused, as Cloud TPU does."""
        self.create_delay_s = create_delay_s
        self.delete_delay_s = delete_delay_s
        self.operation_polls = operation_polls
        """Reads of an operation before it may finish (tests: polled at least this often)."""
        self.clock = clock
        self._held: set[str] = set()
        self.max_nodes = max_nodes
        self.max_operations = max_operations
        self.calls: dict[str, int] = {}
        """Requests served per method, faults included (for tests)."""
        self._lock = threading.Lock()
        self._nodes: dict[str, dict] = {}
        self._operations: dict[str, dict] = {}
        self._pending: dict[str, list] = {}
        """operation name -> [due time, reads still needed, verb, finish arguments]."""
        self._faults: list[Fault] = []
        self._addresses = itertools.count(2)
        self._queued: dict[str, dict] = {}
        self.zones = zones if zones is not None else _catalog_zones()
        """Zone -> slice types offered there (``acceleratorTypes``, ``locations``)."""

    # Tests: hold, release, inject, clear_faults (FakeControls). Holding ``create``,
    # ``delete`` or ``update`` keeps those operations running; ``provision`` keeps queued
    # resources waiting for capacity.
    def _take_fault(self, method: str, zone: str, accelerator_type: str | None) -> Fault | None:
        for fault in self._faults:
            if (
                fault.method in (None, method)
                and method in _FAULT_METHODS.get(fault.kind, (method,))
                and fault.zone in (None, zone)
                and fault.accelerator_type in (None, accelerator_type)
            ):
                if fault.times is not None:
                    fault.times -= 1
                    if fault.times <= 0:
                        self._faults.remove(fault)
                return fault
        return None

    def _raise_call_fault(
        self,
        fault: Fault | None,
        method: str,
        resource: str,
        zone: str,
        accelerator_type: str | None,
    ) -> None:
        if fault is None or fault.kind in ("stockout", "operation_error"):
            return
        if fault.kind == "stockout_call":
            raise ApiError(
                429,
                "RESOURCE_EXHAUSTED",
                f'There is no more capacity in the zone "{zone}"; you can try in '
                "another zone where Cloud TPU Nodes are offered.",
            )
        if fault.kind == "quota":
            gen = parse_pod_type(accelerator_type)
            quota = (
                f"TPU{(gen.generation.name if gen else 'v4').upper()}PodPerProjectPerZoneForTPUAPI"
            )
            raise ApiError(
                429,
                "RESOURCE_EXHAUSTED",
                f"Quota limit '{quota}' has been exceeded. Limit: 0 in zone {zone}.",
                [
                    any_detail(
                        "google.rpc.QuotaFailure",
                        {
                            "violations": [
                                {
                                    "subject": f"project:{resource.split('/')[1]}",
                                    "description": quota,
                                }
                            ]
                        },
                    )
                ],
            )
        if fault.kind == "rate_limit":
            raise ApiError(
                429,
                "RESOURCE_EXHAUSTED",
                "Quota exceeded for quota metric 'Create requests' "
                "and limit 'Create requests per minute' of service 'tpu.googleapis.com'.",
                [
                    any_detail(
                        "google.rpc.ErrorInfo",
                        {
                            "reason": "RATE_LIMIT_EXCEEDED",
                            "domain": "googleapis.com",
                            "metadata": {
                                "quota_metric": "tpu.googleapis.com/qps/create",
                                "quota_limit": "CreatePerMinutePerProject",
                                "service": "tpu.googleapis.com",
                            },
                        },
                    )
                ],
            )
        if fault.kind == "permission":
            permission = _VERB_PERMISSIONS[method]
            raise ApiError(
                403,
                "PERMISSION_DENIED",
                f"Permission '{permission}' denied on resource '{resource}' (or it may not exist).",
                [
                    any_detail(
                        "google.rpc.ErrorInfo",
                        {
                            "reason": "IAM_PERMISSION_DENIED",
                            "domain": "iam.googleapis.com",
                            "metadata": {"permission": permission, "resource": resource},
                        },
                    )
                ],
            )
        if fault.kind == "unavailable":
            raise ApiError(503, "UNAVAILABLE", "The service is currently unavailable.")

    def _enter(self, method: str, zone: str, resource: str, accelerator_type: str | None = None):
        """Count the call and raise an injected call fault; returns an operation fault."""
        self.calls[method] = self.calls.get(method, 0) + 1
        fault = self._take_fault(method, zone, accelerator_type)
        self._raise_call_fault(fault, method, resource, zone, accelerator_type)
        return fault

    # Nodes --------------------------------------------------------------------------------
    def create(self, project: str, zone: str, node_id: str, body: dict) -> dict:
        parent = f"projects/{project}/locations/{zone}"
        name = f"{parent}/nodes/{node_id}"
        with self._lock:
            self._advance()
            try:
                accelerator_type, hosts = _slice_of(body)
                invalid = None
            except ApiError as exc:
                accelerator_type, hosts, invalid = None, 0, exc
            fault = self._enter("create", zone, name, accelerator_type)
            if invalid is not None:
                raise invalid
            if not _NODE_ID.match(node_id or ""):
                raise ApiError(400, "INVALID_ARGUMENT", f"Invalid node id {node_id!r}.")
            if not body.get("runtimeVersion"):
                raise ApiError(400, "INVALID_ARGUMENT", "runtime_version is required.")
            _check_labels(body.get("labels", {}))
            self._check_identity(project, body)
            config = body.get("acceleratorConfig")
            if config and isinstance(config.get("type"), int):
                body = {
                    **body,
                    "acceleratorConfig": {
                        **config,
                        "type": cloud_tpu.AcceleratorConfig.Type(config["type"]).name,
                    },
                }
            if name in self._nodes:
                raise ApiError(409, "ALREADY_EXISTS", f"Resource '{name}' already exists.")
            if len(self._nodes) >= self.max_nodes:
                raise ApiError(429, "RESOURCE_EXHAUSTED", "The emulator holds too many nodes.")
            node = {
                **{k: v for k, v in body.items() if k not in ("name", "state", "id")},
                "name": name,
                **({"acceleratorType": accelerator_type} if body.get("acceleratorType") else {}),
                "state": "CREATING",
                "createTime": now_rfc3339(),
                "id": str(uuid.uuid4().int % 10**18),
                "apiVersion": "V2",
                "labels": dict(body.get("labels", {})),
            }
            self._nodes[name] = node
            finish = ("create", name, hosts, fault)
            return self._new_operation(parent, "create", name, self.create_delay_s, finish)

    def get(self, project: str, zone: str, node_id: str) -> dict:
        name = f"projects/{project}/locations/{zone}/nodes/{node_id}"
        with self._lock:
            self._advance()
            self._enter("get", zone, name)
            return dict(self._node(name))

    def list(self, project: str, zone: str, page_size: int, page_token: str) -> dict:
        parent = f"projects/{project}/locations/{zone}"
        with self._lock:
            self._advance()
            self._enter("list", zone, parent)
            names = sorted(n for n in self._nodes if n.startswith(parent + "/nodes/"))
            start = int(page_token) if page_token.isdigit() else 0
            size = min(page_size or _MAX_PAGE_SIZE, _MAX_PAGE_SIZE)
            page = [dict(self._nodes[n]) for n in names[start : start + size]]
            result: dict[str, Any] = {"nodes": page}
            if start + size < len(names):
                result["nextPageToken"] = str(start + size)
            return result

    def delete(self, project: str, zone: str, node_id: str) -> dict:
        parent = f"projects/{project}/locations/{zone}"
        name = f"{parent}/nodes/{node_id}"
        with self._lock:
            self._advance()
            fault = self._enter("delete", zone, name)
            node = self._node(name)
            node["state"] = "DELETING"
            finish = ("delete", name, 0, fault)
            return self._new_operation(parent, "delete", name, self.delete_delay_s, finish)

    def patch(self, project: str, zone: str, node_id: str, update_mask: str, body: dict) -> dict:
        parent = f"projects/{project}/locations/{zone}"
        name = f"{parent}/nodes/{node_id}"
        with self._lock:
            self._advance()
            self._enter("patch", zone, name)
            node = self._node(name)
            fields = {f.strip() for f in update_mask.split(",") if f.strip()}
            if fields != {"labels"}:
                raise ApiError(400, "INVALID_ARGUMENT", f"Unsupported update mask {update_mask!r}.")
            _check_labels(body.get("labels", {}))
            node["labels"] = dict(body.get("labels", {}))
            return self._new_operation(parent, "update", name, 0.0, ("update", name, 0, None))

    def operation(self, project: str, zone: str, operation_id: str) -> dict:
        name = f"projects/{project}/locations/{zone}/operations/{operation_id}"
        with self._lock:
            self._enter("operation", zone, name)
            if name not in self._operations:
                raise ApiError(404, "NOT_FOUND", f"Operation '{name}' not found.")
            if name in self._pending:
                self._pending[name][1] -= 1
            self._advance()
            return dict(self._operations[name])

    # Queued resources --------------------------------------------------------------------
    def create_queued(self, project: str, zone: str, queued_id: str, body: dict) -> dict:
        parent = f"projects/{project}/locations/{zone}"
        name = f"{parent}/queuedResources/{queued_id}"
        with self._lock:
            self._advance()
            specs = (body.get("tpu") or {}).get("nodeSpec") or []
            if len(specs) != 1:
                raise ApiError(400, "INVALID_ARGUMENT", "Exactly one node spec is supported.")
            accelerator_type, _ = _slice_of(specs[0].get("node", {}))
            self._enter("create_queued", zone, name, accelerator_type)
            _check_labels(specs[0].get("node", {}).get("labels", {}))
            self._check_identity(project, specs[0].get("node", {}))
            if name in self._queued:
                raise ApiError(409, "ALREADY_EXISTS", f"Resource '{name}' already exists.")
            self._queued[name] = {
                **body,
                "name": name,
                "createTime": now_rfc3339(),
                "state": {"state": "ACCEPTED"},
            }
            finish = ("create_queued", name, 0, None)
            return self._new_operation(parent, "create", name, 0.0, finish)

    def list_queued(self, project: str, zone: str) -> dict:
        parent = f"projects/{project}/locations/{zone}"
        with self._lock:
            self._advance()
            self._enter("list_queued", zone, parent)
            names = sorted(n for n in self._queued if n.startswith(parent + "/"))
            return {"queuedResources": [dict(self._queued[n]) for n in names]}

    def get_queued(self, project: str, zone: str, queued_id: str) -> dict:
        name = f"projects/{project}/locations/{zone}/queuedResources/{queued_id}"
        with self._lock:
            self._advance()
            self._enter("get_queued", zone, name)
            if name not in self._queued:
                raise ApiError(404, "NOT_FOUND", f"Resource '{name}' was not found.")
            return dict(self._queued[name])

    def delete_queued(self, project: str, zone: str, queued_id: str, force: bool) -> dict:
        parent = f"projects/{project}/locations/{zone}"
        name = f"{parent}/queuedResources/{queued_id}"
        with self._lock:
            self._advance()
            self._enter("delete_queued", zone, name)
            if name not in self._queued:
                raise ApiError(404, "NOT_FOUND", f"Resource '{name}' was not found.")
            node = f"{parent}/nodes/{queued_id}"
            if node in self._nodes and not force:
                raise ApiError(400, "FAILED_PRECONDITION", "The queued resource has a node.")
            self._queued[name]["state"] = {"state": "DELETING"}
            finish = ("delete_queued", name, 0, None)
            return self._new_operation(parent, "delete", name, self.delete_delay_s, finish)

    def _provision(self) -> None:
        """Queued resources get their node, unless held (waiting) or failed by a fault."""
        if "provision" in self._held:
            return
        for name, queued in self._queued.items():
            if queued["state"]["state"] != "ACCEPTED":
                continue
            parent, queued_id = name.split("/queuedResources/")
            spec = queued["tpu"]["nodeSpec"][0]
            accelerator_type, hosts = _slice_of(spec["node"])
            fault = self._take_fault("provision", parent.split("/")[3], accelerator_type)
            if fault is not None:
                queued["state"] = {"state": "FAILED"}
                continue
            node = dict(spec["node"])
            if "spot" in queued:
                node["schedulingConfig"] = {**node.get("schedulingConfig", {}), "spot": True}
            self._nodes[f"{parent}/nodes/{queued_id}"] = {
                **node,
                "name": f"{parent}/nodes/{queued_id}",
                "state": "READY",
                "createTime": now_rfc3339(),
                "labels": dict(node.get("labels", {})),
                "networkEndpoints": self._endpoints(hosts, node.get("networkConfig", {})),
            }
            queued["state"] = {"state": "ACTIVE"}

    # Facts --------------------------------------------------------------------------------
    def accelerator_types(self, project: str, zone: str) -> dict:
        with self._lock:
            self._enter("accelerator_types", zone, zone)
            parent = f"projects/{project}/locations/{zone}"
            return {
                "acceleratorTypes": [
                    {"name": f"{parent}/acceleratorTypes/{name}", "type": name}
                    for name in self.zones.get(zone, [])
                ]
            }

    def locations(self, project: str) -> dict:
        with self._lock:
            self._enter("locations", "", project)
            return {
                "locations": [
                    {"name": f"projects/{project}/locations/{zone}", "locationId": zone}
                    for zone in sorted(self.zones)
                ]
            }

    # Tests ---------------------------------------------------------------------------------
    def preempt(self, project: str, zone: str, node_id: str) -> None:
        """Preempt a (spot) node: it stays listed as PREEMPTED until deleted."""
        with self._lock:
            self._node(f"projects/{project}/locations/{zone}/nodes/{node_id}")["state"] = (
                "PREEMPTED"
            )

    def put_node(
        self,
        project: str,
        zone: str,
        node_id: str,
        accelerator_type: str,
        labels: dict[str, str] | None = None,
        state: str = "READY",
    ) -> None:
        """Seed a node directly (e.g. one another tool created), bypassing faults."""
        name = f"projects/{project}/locations/{zone}/nodes/{node_id}"
        accelerator_type, hosts = _slice_of({"acceleratorType": accelerator_type})
        with self._lock:
            self._nodes[name] = {
                "name": name,
                "acceleratorType": accelerator_type,
                "state": state,
                "runtimeVersion": "tpu-ubuntu2204-base",
                "createTime": now_rfc3339(),
                "labels": dict(labels or {}),
                "networkEndpoints": self._endpoints(hosts, {}),
            }

    def node_names(self) -> list[str]:
        """Every node's full name, any project and zone (for tests)."""
        with self._lock:
            self._advance()
            return sorted(self._nodes)

    # Internals ----------------------------------------------------------------------------
    def _check_identity(self, project: str, node: dict) -> None:
        """The node's network tags are valid and its service account exists."""
        for tag in node.get("tags") or ():
            if not _NODE_ID.match(str(tag)):
                raise ApiError(400, "INVALID_ARGUMENT", f"Invalid network tag {tag!r}.")
        email = str((node.get("serviceAccount") or {}).get("email", ""))
        exists = self.service_account_exists
        if email and exists is not None and not exists(email):
            raise ApiError(
                400,
                "INVALID_ARGUMENT",
                f"Service account projects/{project}/serviceAccounts/{email} does not exist.",
            )

    def _node(self, name: str) -> dict:
        if name not in self._nodes:
            raise ApiError(404, "NOT_FOUND", f"Resource '{name}' was not found.")
        return self._nodes[name]

    def _new_operation(
        self, parent: str, verb: str, target: str, delay_s: float, finish: tuple
    ) -> dict:
        name = f"{parent}/operations/operation-{uuid.uuid4().hex}"
        metadata = any_detail(
            "google.cloud.tpu.v2.OperationMetadata",
            {"createTime": now_rfc3339(), "target": target, "verb": verb, "apiVersion": "v2"},
        )
        self._operations[name] = {"name": name, "metadata": metadata, "done": False}
        excess = len(self._operations) - self.max_operations
        for old in [n for n, op in self._operations.items() if op["done"]][: max(excess, 0)]:
            del self._operations[old]
        self._pending[name] = [self.clock() + delay_s, self.operation_polls, verb, finish]
        self._advance()
        return dict(self._operations[name])

    def _advance(self) -> None:
        """Finish every operation whose time has come, read often enough and not held."""
        self._provision()
        now = self.clock()
        for name, (due, reads_left, verb, finish) in list(self._pending.items()):
            if due <= now and reads_left <= 0 and verb not in self._held:
                del self._pending[name]
                self._finish(name, *finish)

    def _finish(
        self, op_name: str, verb: str, node_name: str, hosts: int, fault: Fault | None
    ) -> None:
        operation = self._operations.get(op_name)
        if verb in ("create_queued", "delete_queued"):
            self._finish_queued(operation, verb, node_name)
            return
        node = self._nodes.get(node_name)
        error = None
        zone = node_name.split("/")[3]
        if fault is not None and fault.kind == "stockout":
            error = {
                "code": 8,
                "message": f'There is no more capacity in the zone "{zone}"; '
                "you can try in another zone where Cloud TPU Nodes are offered "
                "(see https://cloud.google.com/tpu/docs/regions) [EID: 0x1f2e3d4c]",
            }
        elif fault is not None and fault.kind == "operation_error":
            error = {"code": fault.code, "message": fault.message}
        elif verb == "create" and node is None:
            error = {"code": 10, "message": "The node was deleted while it was being created."}
        if error is not None and verb == "create":
            self._nodes.pop(node_name, None)
        elif error is not None and node is not None:
            node["state"] = "READY"
        elif verb == "create" and node is not None and node["state"] == "CREATING":
            node["state"] = "READY"
            node["networkEndpoints"] = self._endpoints(hosts, node.get("networkConfig", {}))
        elif verb == "delete":
            self._nodes.pop(node_name, None)
        if operation is None:
            return
        operation["done"] = True
        if error is not None:
            operation["error"] = error
        elif verb == "delete" or node is None:
            operation["response"] = any_detail("google.protobuf.Empty", {})
        else:
            operation["response"] = any_detail("google.cloud.tpu.v2.Node", dict(node))

    def _finish_queued(self, operation: dict | None, verb: str, name: str) -> None:
        queued = self._queued.get(name)
        if verb == "delete_queued":
            self._queued.pop(name, None)
            parent, queued_id = name.split("/queuedResources/")
            self._nodes.pop(f"{parent}/nodes/{queued_id}", None)
        if operation is not None:
            operation["done"] = True
            response = dict(queued) if queued and verb == "create_queued" else {}
            kind = "google.cloud.tpu.v2.QueuedResource" if response else "google.protobuf.Empty"
            operation["response"] = any_detail(kind, response)

    # HTTP ------------------------------------------------------------------------------------
    def route(self, method: str, path: str, query: dict[str, str], body: dict) -> dict:
        """Serve one request of the Cloud TPU v2 REST API (or the faults endpoint)."""
        if path == FAULTS_PATH and method == "POST":
            self.inject(Fault(**body))
            return {}
        if path == FAULTS_PATH and method == "DELETE":
            self.clear_faults()
            return {}
        match = _OPERATION.match(path)
        if match and method == "GET":
            return self.operation(*match.groups())
        match = _QUEUED.match(path)
        if match:
            project, zone, queued_id = match.groups()
            if queued_id is None and method == "POST":
                return self.create_queued(project, zone, query.get("queuedResourceId", ""), body)
            if queued_id is None and method == "GET":
                return self.list_queued(project, zone)
            if queued_id is not None and method == "GET":
                return self.get_queued(project, zone, queued_id)
            if queued_id is not None and method == "DELETE":
                force = query.get("force", "").lower() == "true"
                return self.delete_queued(project, zone, queued_id, force)
        match = _ACCELERATOR_TYPES.match(path)
        if match and method == "GET":
            return self.accelerator_types(*match.groups())
        match = _LOCATIONS.match(path)
        if match and method == "GET":
            return self.locations(match.group(1))
        match = _NODES.match(path)
        if match:
            project, zone, node_id = match.groups()
            if node_id is None and method == "POST":
                return self.create(project, zone, query.get("nodeId", ""), body)
            if node_id is None and method == "GET":
                size = int(query.get("pageSize") or 0)
                return self.list(project, zone, size, query.get("pageToken", ""))
            if node_id is not None and method == "GET":
                return self.get(project, zone, node_id)
            if node_id is not None and method == "DELETE":
                return self.delete(project, zone, node_id)
            if node_id is not None and method == "PATCH":
                return self.patch(project, zone, node_id, query.get("updateMask", ""), body)
        raise ApiError(404, "NOT_FOUND", f"{method} {path} is not part of the emulated API.")

    def _endpoints(self, hosts: int, network_config: dict) -> list[dict]:
        endpoints = []
        for _ in range(hosts):
            n = next(self._addresses)
            endpoint: dict[str, Any] = {
                "ipAddress": f"127.{64 + (n >> 16 & 63)}.{n >> 8 & 255}.{n % 250 + 1}",
                "port": 8470,
            }
            if network_config.get("enableExternalIps"):
                endpoint["accessConfig"] = {
                    "externalIp": f"34.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}"
                }
            endpoints.append(endpoint)
        return endpoints


class TpuEmulator(FakeServer):
    """The fake Cloud TPU API, with what `up` makes in any GCP project beside it (the fake
    IAM and Resource Manager, Compute Engine firewall rules; no VMs, for which see
    :class:`providers.local.gcp.server.GcpEmulator`): ``with TpuEmulator() as emu: emu.url``."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, cloud: TpuCloud | None = None):
        from providers.local.gcp.compute import ComputeCloud
        from providers.local.gcp.iam import IamCloud

        self.cloud = cloud or TpuCloud()
        self.iam = IamCloud()
        self.compute = ComputeCloud(machine_types={}, accelerator_types={})
        if self.cloud.service_account_exists is None:
            self.cloud.service_account_exists = self.iam.account_exists
        super().__init__(self.route, host, port)

    def route(self, method: str, path: str, query: dict[str, str], body: dict) -> dict:
        if path.startswith("/v1/"):
            return self.iam.route(method, path, query, body)
        if path.startswith("/compute/"):
            return self.compute.route(method, path, query, body)
        return self.cloud.route(method, path, query, body)
