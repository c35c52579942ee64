"""A fake Cloud TPU v2 REST server: the subset of the API the GCP TPU plugin uses.

Serves create (``POST .../nodes?nodeId=``), get, list (``pageSize``/``pageToken``), delete,
patch (``updateMask=labels``) and operations get, with Google-style JSON errors so the real
client library raises its real exception classes. Creates and deletes are long-running
operations that finish after a configurable delay. Slices get one network endpoint per host.

Faults for tests are injected with :meth:`TpuCloud.inject` (or ``POST /_emulator/faults``
with the same fields as JSON; ``DELETE /_emulator/faults`` clears them). State lives in
memory, behind one lock, and is bounded.

Run it standalone: ``python -m providers.gcp_tpu.emulator --host 127.0.0.1 --port 8470``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import math
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from google.cloud.tpu_v2.types import cloud_tpu

from accel.tpu_generations import generation, parse_pod_type
from instance_catalog.tpu import tpu_slice

logger = logging.getLogger(__name__)

FAULTS_PATH = "/_emulator/faults"
_NODES = re.compile(r"^/v2/projects/([^/]+)/locations/([^/]+)/nodes(?:/([^/:]+))?$")
_OPERATION = re.compile(r"^/v2/projects/([^/]+)/locations/([^/]+)/operations/([^/:]+)$")
_NODE_ID = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")
_TYPE_URL = "type.googleapis.com/"
_MAX_PAGE_SIZE = 100
FAULT_KINDS = (
    "stockout",  # the create operation fails: no more capacity in the zone (code 8)
    "stockout_call",  # the create call itself fails with RESOURCE_EXHAUSTED, no quota details
    "quota",  # 429 RESOURCE_EXHAUSTED with a QuotaFailure naming the TPU quota
    "rate_limit",  # 429 RESOURCE_EXHAUSTED, ErrorInfo RATE_LIMIT_EXCEEDED (requests per minute)
    "permission",  # 403 PERMISSION_DENIED naming the IAM permission
    "unavailable",  # 503 UNAVAILABLE
    "operation_error",  # the operation fails with ``code``/``message``
)
_FAULT_METHODS = {
    "stockout": ("create",),
    "stockout_call": ("create",),
    "quota": ("create",),
    "operation_error": ("create", "delete"),
}
"""Calls a fault kind can hit (the others hit any call)."""
_VERB_PERMISSIONS = {
    "create": "tpu.nodes.create",
    "get": "tpu.nodes.get",
    "list": "tpu.nodes.list",
    "delete": "tpu.nodes.delete",
    "patch": "tpu.nodes.update",
    "operation": "tpu.operations.get",
}


class ApiError(Exception):
    """An error response in the Google JSON error format."""

    def __init__(
        self, http: int, status: str, message: str, details: list[dict] | None = None
    ) -> None:
        super().__init__(message)
        self.http = http
        self.body = {
            "error": {"code": http, "message": message, "status": status, "details": details or []}
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


def _now_rfc3339() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _any(message_type: str, fields: dict) -> dict:
    return {"@type": _TYPE_URL + message_type, **fields}


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


class TpuCloud:
    """The emulated TPU API state: nodes and operations of every project and zone."""

    def __init__(
        self,
        create_delay_s: float = 0.0,
        delete_delay_s: float = 0.0,
        max_nodes: int = 1000,
        max_operations: int = 10_000,
        operation_polls: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
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

    # Holding operations (tests) ----------------------------------------------------------
    def hold(self, verb: str) -> None:
        """Keep ``create``/``delete``/``update`` operations running until :meth:`release`."""
        with self._lock:
            self._held.add(verb)

    def release(self, verb: str) -> None:
        with self._lock:
            self._held.discard(verb)
            self._advance()

    # Faults -------------------------------------------------------------------------------
    def inject(self, fault: Fault) -> None:
        with self._lock:
            self._faults.append(fault)

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

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
                    _any(
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
                    _any(
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
                    _any(
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
                "createTime": _now_rfc3339(),
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
                "createTime": _now_rfc3339(),
                "labels": dict(labels or {}),
                "networkEndpoints": self._endpoints(hosts, {}),
            }

    def node_names(self) -> list[str]:
        """Every node's full name, any project and zone (for tests)."""
        with self._lock:
            self._advance()
            return sorted(self._nodes)

    # Internals ----------------------------------------------------------------------------
    def _node(self, name: str) -> dict:
        if name not in self._nodes:
            raise ApiError(404, "NOT_FOUND", f"Resource '{name}' was not found.")
        return self._nodes[name]

    def _new_operation(
        self, parent: str, verb: str, target: str, delay_s: float, finish: tuple
    ) -> dict:
        name = f"{parent}/operations/operation-{uuid.uuid4().hex}"
        metadata = _any(
            "google.cloud.tpu.v2.OperationMetadata",
            {"createTime": _now_rfc3339(), "target": target, "verb": verb, "apiVersion": "v2"},
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
        now = self.clock()
        for name, (due, reads_left, verb, finish) in list(self._pending.items()):
            if due <= now and reads_left <= 0 and verb not in self._held:
                del self._pending[name]
                self._finish(name, *finish)

    def _finish(
        self, op_name: str, verb: str, node_name: str, hosts: int, fault: Fault | None
    ) -> None:
        operation = self._operations.get(op_name)
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
            operation["response"] = _any("google.protobuf.Empty", {})
        else:
            operation["response"] = _any("google.cloud.tpu.v2.Node", dict(node))

    def _endpoints(self, hosts: int, network_config: dict) -> list[dict]:
        endpoints = []
        for _ in range(hosts):
            n = next(self._addresses)
            endpoint: dict[str, Any] = {
                "ipAddress": f"10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}",
                "port": 8470,
            }
            if network_config.get("enableExternalIps"):
                endpoint["accessConfig"] = {
                    "externalIp": f"34.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}"
                }
            endpoints.append(endpoint)
        return endpoints


class _Handler(BaseHTTPRequestHandler):
    cloud: TpuCloud
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s - " + format, self.address_string(), *args)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def _serve(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        try:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else {}
            self._reply(200, self._route(method, url.path, query, body))
        except ApiError as exc:
            self._reply(exc.http, exc.body)
        except (ValueError, TypeError) as exc:
            self._reply(400, ApiError(400, "INVALID_ARGUMENT", f"Bad request: {exc}").body)

    def _route(self, method: str, path: str, query: dict[str, str], body: dict) -> dict:
        cloud = self.cloud
        if path == FAULTS_PATH and method == "POST":
            cloud.inject(Fault(**body))
            return {}
        if path == FAULTS_PATH and method == "DELETE":
            cloud.clear_faults()
            return {}
        match = _OPERATION.match(path)
        if match and method == "GET":
            return cloud.operation(*match.groups())
        match = _NODES.match(path)
        if match:
            project, zone, node_id = match.groups()
            if node_id is None and method == "POST":
                return cloud.create(project, zone, query.get("nodeId", ""), body)
            if node_id is None and method == "GET":
                size = int(query.get("pageSize") or 0)
                return cloud.list(project, zone, size, query.get("pageToken", ""))
            if node_id is not None and method == "GET":
                return cloud.get(project, zone, node_id)
            if node_id is not None and method == "DELETE":
                return cloud.delete(project, zone, node_id)
            if node_id is not None and method == "PATCH":
                return cloud.patch(project, zone, node_id, query.get("updateMask", ""), body)
        raise ApiError(404, "NOT_FOUND", f"{method} {path} is not part of the emulated API.")

    def _reply(self, code: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class TpuEmulator:
    """The fake server on a background thread: ``with TpuEmulator() as emu: emu.url``."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, cloud: TpuCloud | None = None):
        self.cloud = cloud or TpuCloud()
        handler = type("Handler", (_Handler,), {"cloud": self.cloud})
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> TpuEmulator:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def serve_forever(self) -> None:
        """Serve on the calling thread until interrupted."""
        try:
            self._server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            self._server.server_close()

    def __enter__(self) -> TpuEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Fake Cloud TPU v2 REST server.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8470)
    parser.add_argument(
        "--create-delay", type=float, default=2.0, help="seconds a create operation takes"
    )
    parser.add_argument(
        "--delete-delay", type=float, default=1.0, help="seconds a delete operation takes"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    cloud = TpuCloud(create_delay_s=args.create_delay, delete_delay_s=args.delete_delay)
    emulator = TpuEmulator(args.host, args.port, cloud)
    logger.info("fake Cloud TPU API listening on %s", emulator.url)
    emulator.serve_forever()


if __name__ == "__main__":
    main()
