"""A fake Compute Engine REST server: the subset of the API the GCE plugin and the catalog
refresh use, spoken to by the real ``google-cloud-compute`` client.

Serves ``instances`` (bulkInsert, get, delete, setLabels, getSerialPortOutput,
aggregatedList with label and name filters and pages), ``zoneOperations.get``,
``machineTypes`` / ``acceleratorTypes`` aggregatedList, and ``firewalls`` (insert, get, delete
on the project's ``networks``) with ``globalOperations.get``. Inserts check the machine type
and attached GPUs against the zone, names, labels and regional quotas (``quotas``:
``"REGION/METRIC" -> limit``, metrics ``CPUS`` and ``NVIDIA_<MODEL>_GPUS``), honour
``requestId`` (a resend answers the first operation) and ``minCount`` against a zone's
remaining ``capacity``. Operations finish when read ``operation_polls`` times and their verb
is not held (:meth:`ComputeCloud.hold`), so tests never wait on real time. With
``service_account_exists`` (the embedded IAM's), a VM naming a service account that does not
exist is refused, as Compute Engine does. Faults: :class:`Fault`. Each VM's serial port holds
a canned boot log (:data:`BOOT_LOG`) that tests replace with
:meth:`ComputeCloud.set_serial_output`.
"""

from __future__ import annotations

import itertools
import re
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from providers.local.consoles import read_console
from providers.local.gcp.rest import ApiError, FakeControls, LostAnswer, now_rfc3339

BASE = "https://www.googleapis.com/compute/v1"
_PREFIX = r"^/compute/v1/projects/([^/]+)"
_ZONE_INSTANCES = re.compile(_PREFIX + r"/zones/([^/]+)/instances(?:/([^/]+))?(?:/(\w+))?$")
_OPERATION = re.compile(_PREFIX + r"/zones/([^/]+)/operations/([^/]+)$")
_FIREWALLS = re.compile(_PREFIX + r"/global/firewalls(?:/([^/]+))?$")
_GLOBAL_OPERATION = re.compile(_PREFIX + r"/global/operations/([^/]+)$")
_AGGREGATED = re.compile(_PREFIX + r"/aggregated/(instances|machineTypes|acceleratorTypes)$")
_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_LABEL = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")
_TERM = re.compile(r'\(?\s*([\w.-]+)\s*=\s*"?([^")]*)"?\s*\)?')
FAULT_KINDS = (
    "stockout",  # the operation fails: ZONE_RESOURCE_POOL_EXHAUSTED
    "stockout_details",  # ... ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS
    "quota",  # the operation fails: QUOTA_EXCEEDED naming the metric and region
    "permission",  # 403 naming the IAM permission
    "rate_limit",  # 403 rateLimitExceeded
    "unavailable",  # 503
    "lost_answer",  # the call is served, then the connection drops before the answer
)
_PERMISSIONS = {
    "bulkInsert": "compute.instances.create",
    "get": "compute.instances.get",
    "delete": "compute.instances.delete",
    "setLabels": "compute.instances.setLabels",
    "serialPort": "compute.instances.getSerialPortOutput",
    "list": "compute.instances.list",
    "operation": "compute.zoneOperations.get",
    "machineTypes": "compute.machineTypes.list",
    "acceleratorTypes": "compute.acceleratorTypes.list",
    "firewalls.insert": "compute.firewalls.create",
    "firewalls.get": "compute.firewalls.get",
    "firewalls.delete": "compute.firewalls.delete",
    "globalOperation": "compute.globalOperations.get",
}


BOOT_LOG = """\
SeaBIOS (version 1.8.2-google)
Booting from Hard Disk 0...
[    0.000000] Linux version 6.1.0-27-cloud-amd64
[    2.114201] systemd[1]: Reached target Basic System.
Starting Google Compute Engine Startup Scripts...
google_metadata_script_runner[612]: Starting startup scripts (version 20240712.00).
google_metadata_script_runner[612]: Found startup-script in metadata.
"""
"""What a VM's serial port shows until a test sets its own."""


@dataclass
class Fault:
    """``kind`` on calls to ``method`` (any if None) in ``zone`` (any if None), ``times``
    times (None: until cleared)."""

    kind: str
    method: str | None = None
    zone: str | None = None
    times: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; known: {', '.join(FAULT_KINDS)}")


def _zone_url(project: str, zone: str) -> str:
    return f"{BASE}/projects/{project}/zones/{zone}"


def _region(zone: str) -> str:
    return zone.rsplit("-", 1)[0]


class ComputeCloud(FakeControls):
    """The emulated Compute Engine state: VMs, operations, zones' types, capacity, quotas."""

    def __init__(
        self,
        machine_types: Mapping[str, Mapping[str, dict]] | None = None,
        accelerator_types: Mapping[str, Mapping[str, dict]] | None = None,
        operation_polls: int = 0,
        quotas: Mapping[str, float] | None = None,
        max_instances: int = 5000,
        service_account_exists: Callable[[str], bool] | None = None,
        consoles: Path | None = None,
    ) -> None:
        if machine_types is None or accelerator_types is None:
            from providers.local.gcp.zones import served_zone_tables

            machine_types, accelerator_types = served_zone_tables()
        self.machine_types = {z: dict(t) for z, t in machine_types.items()}
        """Zone -> machine type name -> ``{guestCpus, memoryMb, accelerators?}``."""
        self.accelerator_types = {z: dict(t) for z, t in accelerator_types.items()}
        """Zone -> accelerator type name -> ``{description, maximumCardsPerInstance}``."""
        self.operation_polls = operation_polls
        self.quotas = dict(quotas or {})
        self.capacity: dict[str, int] = {}
        """Zone -> VMs it can still start (absent: unlimited)."""
        self.max_instances = max_instances
        self.service_account_exists = service_account_exists
        self.networks = {"default"}
        """VPC networks every project has."""
        self.consoles = consoles
        """The simulated hosts' consoles (``providers.local.consoles``), for serial ports."""
        self.calls: dict[str, int] = {}
        self._lock = threading.Lock()
        self._instances: dict[tuple[str, str, str], dict] = {}
        self._operations: dict[tuple[str, str, str], dict] = {}
        self._pending: dict[tuple[str, str, str], list] = {}
        """operation key -> [reads still needed, verb, finish]."""
        self._requests: dict[str, tuple[str, str, str]] = {}
        self._firewalls: dict[tuple[str, str], dict] = {}
        self._global_operations: dict[tuple[str, str], dict] = {}
        self._faults: list[Fault] = []
        self._held: set[str] = set()
        self._ids = itertools.count(1000)
        self._serial: dict[str, str] = {}
        """VM name -> its serial port output (absent: :data:`BOOT_LOG`)."""

    # Tests (hold, release, inject, clear_faults: FakeControls) ---------------------------
    def preempt(self, project: str, zone: str, name: str) -> None:
        """Preempt a spot VM: it stops (TERMINATED) and stays listed until deleted."""
        with self._lock:
            self._instance(project, zone, name)["status"] = "TERMINATED"

    def put_instance(self, project: str, zone: str, name: str, labels: dict[str, str]) -> None:
        """Seed a VM directly (e.g. one another tool created), bypassing faults."""
        with self._lock:
            self._instances[(project, zone, name)] = self._new_instance(
                project, zone, name, {"machineType": "n1-standard-1", "labels": labels}
            )
            self._instances[(project, zone, name)]["status"] = "RUNNING"

    def set_serial_output(self, name: str, text: str) -> None:
        """What VM ``name``'s serial port 1 shows (any zone, any project)."""
        with self._lock:
            self._serial[name] = text

    def instance_names(self) -> list[str]:
        """``zone/name`` of every VM, any project (for tests)."""
        with self._lock:
            self._advance()
            return sorted(f"{zone}/{name}" for _, zone, name in self._instances)

    # Faults ---------------------------------------------------------------------------------
    def _enter(self, method: str, zone: str, resource: str) -> Fault | None:
        """Count the call, raise an injected call fault; returns an operation fault."""
        self.calls[method] = self.calls.get(method, 0) + 1
        for fault in list(self._faults):
            if fault.method in (None, method) and fault.zone in (None, zone):
                if (
                    fault.kind in ("stockout", "stockout_details", "quota")
                    and method != "bulkInsert"
                ):
                    continue
                if fault.times is not None:
                    fault.times -= 1
                    if fault.times <= 0:
                        self._faults.remove(fault)
                self._raise_call_fault(fault, method, resource)
                return fault
        return None

    @staticmethod
    def _raise_call_fault(fault: Fault, method: str, resource: str) -> None:
        if fault.kind == "permission":
            permission = _PERMISSIONS.get(method, "compute.instances.get")
            raise ApiError(
                403,
                "PERMISSION_DENIED",
                f"Required '{permission}' permission for '{resource}'",
                errors=[{"message": "Forbidden", "domain": "global", "reason": "forbidden"}],
            )
        if fault.kind == "rate_limit":
            raise ApiError(
                403,
                "PERMISSION_DENIED",
                "Rate Limit Exceeded",
                errors=[{"message": "Rate Limit Exceeded", "reason": "rateLimitExceeded"}],
            )
        if fault.kind == "unavailable":
            raise ApiError(503, "UNAVAILABLE", "The service is currently unavailable.")

    # Instances -------------------------------------------------------------------------------
    def bulk_insert(self, project: str, zone: str, body: dict, request: str) -> dict:
        with self._lock:
            self._advance()
            resource = f"projects/{project}/zones/{zone}/instances"
            fault = self._enter("bulkInsert", zone, resource)
            if request and request in self._requests:
                return dict(self._operations[self._requests[request]])
            names = [
                props.get("name", n)
                for n, props in (body.get("perInstanceProperties") or {}).items()
            ]
            count = int(body.get("count") or len(names))
            minimum = int(body.get("minCount") or count)
            if len(names) != count:
                raise ApiError(400, "INVALID_ARGUMENT", "perInstanceProperties must name every VM.")
            properties = body.get("instanceProperties") or {}
            self._validate(project, zone, names, properties)
            error = self._operation_error(fault, project, zone, properties, count, minimum)
            made = []
            if error is None:
                room = self.capacity.get(zone)
                made = names if room is None else names[:room]
                if room is not None:
                    self.capacity[zone] = room - len(made)
                for name in made:
                    self._instances[(project, zone, name)] = self._new_instance(
                        project, zone, name, properties
                    )
            operation = self._new_operation(project, zone, "bulkInsert", resource, error, made)
            if request:
                self._requests[request] = (project, zone, operation["name"])
            if fault is not None and fault.kind == "lost_answer":
                raise LostAnswer
            return operation

    def _validate(self, project: str, zone: str, names: list[str], properties: dict) -> None:
        machine = str(properties.get("machineType", "")).rsplit("/", 1)[-1]
        if zone not in self.machine_types:
            raise ApiError(
                404, "NOT_FOUND", f"The resource 'projects/{project}/zones/{zone}' was not found"
            )
        if machine not in self.machine_types[zone]:
            raise ApiError(
                400,
                "INVALID_ARGUMENT",
                f"Invalid value for field 'resource.machineType': '{machine}'. Machine type "
                f"with name '{machine}' does not exist in zone '{zone}'.",
                errors=[{"reason": "invalid", "message": "Invalid machine type"}],
            )
        for gpu in properties.get("guestAccelerators") or ():
            kind = str(gpu.get("acceleratorType", "")).rsplit("/", 1)[-1]
            offered = self.accelerator_types.get(zone, {}).get(kind)
            if offered is None:
                raise ApiError(
                    400,
                    "INVALID_ARGUMENT",
                    f"Invalid value for field 'resource.guestAccelerators[0].acceleratorType': "
                    f"'{kind}'. Accelerator type '{kind}' does not exist in zone '{zone}'.",
                    errors=[{"reason": "invalid", "message": "Invalid accelerator type"}],
                )
        for name in names:
            if not _NAME.match(name):
                raise ApiError(
                    400, "INVALID_ARGUMENT", f"Invalid value for field 'name': '{name}'."
                )
            if (project, zone, name) in self._instances:
                raise ApiError(
                    409,
                    "ALREADY_EXISTS",
                    f"The resource 'projects/{project}/zones/{zone}/instances/{name}' "
                    "already exists",
                    errors=[{"reason": "alreadyExists", "message": "already exists"}],
                )
        for key, value in (properties.get("labels") or {}).items():
            if not _LABEL.match(key) or not _LABEL_VALUE.match(str(value)):
                raise ApiError(400, "INVALID_ARGUMENT", f"Invalid label {key}={value!r}.")
        for tag in (properties.get("tags") or {}).get("items") or ():
            if not _NAME.match(str(tag)):
                raise ApiError(400, "INVALID_ARGUMENT", f"Invalid value for field 'tags': {tag!r}.")
        for account in properties.get("serviceAccounts") or ():
            email = str(account.get("email", ""))
            exists = self.service_account_exists
            if exists is not None and email != "default" and not exists(email):
                raise ApiError(
                    400,
                    "INVALID_ARGUMENT",
                    f"The resource 'projects/{project}/serviceAccounts/{email}' was not found",
                    errors=[{"reason": "invalid", "message": "service account not found"}],
                )
        if len(self._instances) + len(names) > self.max_instances:
            raise ApiError(429, "RESOURCE_EXHAUSTED", "The emulator holds too many instances.")

    def _operation_error(
        self,
        fault: Fault | None,
        project: str,
        zone: str,
        properties: dict,
        count: int,
        minimum: int,
    ) -> dict | None:
        """Why the insert fails as a whole: a stockout, a quota, or too little capacity."""
        kind = fault.kind if fault is not None else None
        if kind is None and self.capacity.get(zone, minimum) < minimum:
            kind = "stockout"
        if kind in ("stockout", "stockout_details"):
            code = "ZONE_RESOURCE_POOL_EXHAUSTED" + (
                "_WITH_DETAILS" if kind.endswith("details") else ""
            )
            return {
                "code": code,
                "message": f"The zone 'projects/{project}/zones/{zone}' does not have enough "
                "resources available to fulfill the request.  Try a different zone, or try again "
                "later.",
            }
        over = self._over_quota(project, zone, properties, minimum)
        if kind == "quota" or over:
            metric, limit = over or ("CPUS", 0.0)
            region = _region(zone)
            return {
                "code": "QUOTA_EXCEEDED",
                "message": f"Quota '{metric}' exceeded.  Limit: {limit} in region {region}.",
                "errorDetails": [
                    {
                        "quotaInfo": {
                            "metricName": f"compute.googleapis.com/{metric.lower()}",
                            "limitName": f"{metric}-per-project-region",
                            "dimensions": {"region": region},
                            "limit": limit,
                        }
                    }
                ],
            }
        return None

    def _over_quota(
        self, project: str, zone: str, properties: dict, count: int
    ) -> tuple[str, float] | None:
        region = _region(zone)
        wanted = self._usage(zone, properties)
        used: dict[str, float] = {}
        for (p, z, _), vm in self._instances.items():
            if p == project and _region(z) == region:
                for metric, amount in self._usage(z, vm).items():
                    used[metric] = used.get(metric, 0.0) + amount
        for metric, amount in wanted.items():
            limit = self.quotas.get(f"{region}/{metric}")
            if limit is not None and used.get(metric, 0.0) + amount * count > limit:
                return metric, limit
        return None

    def _usage(self, zone: str, properties: dict) -> dict[str, float]:
        machine = str(properties.get("machineType", "")).rsplit("/", 1)[-1]
        facts = self.machine_types.get(zone, {}).get(machine, {})
        usage = {"CPUS": float(facts.get("guestCpus", 0))}
        gpus = [
            *facts.get("accelerators", []),
            *(
                {
                    "guestAcceleratorType": g.get("acceleratorType", ""),
                    "guestAcceleratorCount": g.get("acceleratorCount", 1),
                }
                for g in properties.get("guestAccelerators") or ()
            ),
        ]
        for gpu in gpus:
            kind = str(gpu["guestAcceleratorType"]).rsplit("/", 1)[-1]
            metric = re.sub(r"^NVIDIA_TESLA_", "NVIDIA_", kind.upper().replace("-", "_")) + "_GPUS"
            usage[metric] = usage.get(metric, 0.0) + float(gpu.get("guestAcceleratorCount", 1))
        return usage

    def _new_instance(self, project: str, zone: str, name: str, properties: dict) -> dict:
        machine = str(properties.get("machineType", "")).rsplit("/", 1)[-1]
        number = next(self._ids)
        return {
            **{k: v for k, v in properties.items() if k not in ("machineType", "labels")},
            "kind": "compute#instance",
            "id": str(number),
            "name": name,
            "zone": _zone_url(project, zone),
            "machineType": f"{_zone_url(project, zone)}/machineTypes/{machine}",
            "status": "PROVISIONING",
            "creationTimestamp": now_rfc3339(),
            "labels": dict(properties.get("labels") or {}),
            "labelFingerprint": uuid.uuid4().hex[:12],
            "networkInterfaces": [
                {
                    "network": "global/networks/default",
                    # The local cloud's private network is this machine's loopback.
                    "networkIP": f"127.128.{number >> 8 & 255}.{number % 250 + 1}",
                }
            ],
            "selfLink": f"{_zone_url(project, zone)}/instances/{name}",
        }

    def get(self, project: str, zone: str, name: str) -> dict:
        with self._lock:
            self._advance()
            self._enter("get", zone, f"projects/{project}/zones/{zone}/instances/{name}")
            return dict(self._instance(project, zone, name))

    def serial_port(self, project: str, zone: str, name: str, query: Mapping[str, str]) -> dict:
        """``getSerialPortOutput``: from byte ``start`` (negative: the last -start bytes)."""
        with self._lock:
            self._advance()
            resource = f"projects/{project}/zones/{zone}/instances/{name}"
            self._enter("serialPort", zone, resource)
            self._instance(project, zone, name)
            booted = read_console(self.consoles, name)  # the node id is the VM name
            text = (self._serial.get(name) or booted or BOOT_LOG).encode()
            start = int(query.get("start") or 0)
            begin = max(0, len(text) + start) if start < 0 else min(start, len(text))
            return {
                "kind": "compute#serialPortOutput",
                "contents": text[begin:].decode(errors="replace"),
                "start": str(begin),
                "next": str(len(text)),
                "selfLink": f"{BASE}/{resource}/serialPort?port={query.get('port', '1')}",
            }

    def delete(self, project: str, zone: str, name: str, request: str) -> dict:
        with self._lock:
            self._advance()
            resource = f"projects/{project}/zones/{zone}/instances/{name}"
            self._enter("delete", zone, resource)
            if request and request in self._requests:
                return dict(self._operations[self._requests[request]])
            self._instance(project, zone, name)["status"] = "STOPPING"
            operation = self._new_operation(project, zone, "delete", resource, None, [name])
            if request:
                self._requests[request] = (project, zone, operation["name"])
            return operation

    def set_labels(self, project: str, zone: str, name: str, body: dict) -> dict:
        with self._lock:
            self._advance()
            resource = f"projects/{project}/zones/{zone}/instances/{name}"
            self._enter("setLabels", zone, resource)
            vm = self._instance(project, zone, name)
            if body.get("labelFingerprint") != vm["labelFingerprint"]:
                raise ApiError(
                    412,
                    "FAILED_PRECONDITION",
                    "Labels fingerprint either invalid or resource labels have changed",
                    errors=[{"reason": "conditionNotMet", "message": "fingerprint"}],
                )
            for key, value in (body.get("labels") or {}).items():
                if not _LABEL.match(key) or not _LABEL_VALUE.match(str(value)):
                    raise ApiError(400, "INVALID_ARGUMENT", f"Invalid label {key}={value!r}.")
            vm["labels"] = dict(body.get("labels") or {})
            vm["labelFingerprint"] = uuid.uuid4().hex[:12]
            return self._new_operation(project, zone, "setLabels", resource, None, [])

    def aggregated(self, project: str, collection: str, query: Mapping[str, str]) -> dict:
        with self._lock:
            self._advance()
            self._enter("list" if collection == "instances" else collection, "", project)
            if collection == "machineTypes":
                return _scoped(project, self.machine_types, "machineTypes")
            if collection == "acceleratorTypes":
                return _scoped(project, self.accelerator_types, "acceleratorTypes")
            terms = _TERM.findall(query.get("filter", ""))
            matches = [
                vm
                for (p, _, _), vm in sorted(self._instances.items())
                if p == project and all(_field(vm, key) == value for key, value in terms)
            ]
            start = int(query.get("pageToken") or 0)
            size = int(query.get("maxResults") or 500)
            items: dict[str, dict] = {}
            for vm in matches[start : start + size]:
                scope = f"zones/{vm['zone'].rsplit('/', 1)[-1]}"
                items.setdefault(scope, {"instances": []})["instances"].append(dict(vm))
            answer: dict[str, Any] = {"kind": "compute#instanceAggregatedList", "items": items}
            if start + size < len(matches):
                answer["nextPageToken"] = str(start + size)
            return answer

    def operation(self, project: str, zone: str, name: str) -> dict:
        with self._lock:
            self._enter("operation", zone, name)
            key = (project, zone, name)
            if key not in self._operations:
                raise ApiError(404, "NOT_FOUND", f"The resource '{name}' was not found")
            if key in self._pending:
                self._pending[key][0] -= 1
            self._advance()
            return dict(self._operations[key])

    # Firewalls ------------------------------------------------------------------------------
    def insert_firewall(self, project: str, body: dict, request: str) -> dict:
        with self._lock:
            name = str(body.get("name", ""))
            resource = f"projects/{project}/global/firewalls/{name}"
            self._enter("firewalls.insert", "", resource)
            if request and request in self._requests:
                return dict(self._global_operations[self._requests[request][::2]])
            if not _NAME.match(name):
                raise ApiError(400, "INVALID_ARGUMENT", f"Invalid firewall name '{name}'.")
            if (project, name) in self._firewalls:
                raise ApiError(
                    409,
                    "ALREADY_EXISTS",
                    f"The resource '{resource}' already exists",
                    errors=[{"reason": "alreadyExists", "message": "already exists"}],
                )
            network = str(body.get("network") or "global/networks/default").rsplit("/", 1)[-1]
            if network not in self.networks:
                raise _not_found(f"projects/{project}/global/networks/{network}")
            for tag in [*(body.get("sourceTags") or ()), *(body.get("targetTags") or ())]:
                if not _NAME.match(str(tag)):
                    raise ApiError(400, "INVALID_ARGUMENT", f"Invalid tag {tag!r}.")
            if not body.get("allowed") and not body.get("denied"):
                raise ApiError(400, "INVALID_ARGUMENT", "A firewall needs allowed or denied.")
            self._firewalls[(project, name)] = {
                **body,
                "kind": "compute#firewall",
                "id": str(next(self._ids)),
                "name": name,
                "network": f"{BASE}/projects/{project}/global/networks/{network}",
                "direction": body.get("direction") or "INGRESS",
                "priority": int(body.get("priority") or 1000),
                "creationTimestamp": now_rfc3339(),
                "selfLink": f"{BASE}/{resource}",
            }
            operation = self._global_operation(project, "insert", resource)
            if request:
                self._requests[request] = (project, "", operation["name"])
            return operation

    def get_firewall(self, project: str, name: str) -> dict:
        with self._lock:
            resource = f"projects/{project}/global/firewalls/{name}"
            self._enter("firewalls.get", "", resource)
            return dict(self._firewall(project, name))

    def delete_firewall(self, project: str, name: str) -> dict:
        with self._lock:
            resource = f"projects/{project}/global/firewalls/{name}"
            self._enter("firewalls.delete", "", resource)
            self._firewall(project, name)
            del self._firewalls[(project, name)]
            return self._global_operation(project, "delete", resource)

    def firewall_names(self, project: str) -> list[str]:
        """Every firewall rule of ``project`` (for tests)."""
        with self._lock:
            return sorted(name for p, name in self._firewalls if p == project)

    def put_firewall(self, project: str, name: str, description: str = "") -> None:
        """Seed a firewall rule directly (e.g. one someone else made)."""
        with self._lock:
            self._firewalls[(project, name)] = {
                "name": name,
                "id": str(next(self._ids)),
                "description": description,
                "network": f"{BASE}/projects/{project}/global/networks/default",
                "allowed": [{"IPProtocol": "tcp", "ports": ["80"]}],
            }

    def global_operation_get(self, project: str, name: str) -> dict:
        with self._lock:
            self._enter("globalOperation", "", name)
            operation = self._global_operations.get((project, name))
            if operation is None:
                raise ApiError(404, "NOT_FOUND", f"The resource '{name}' was not found")
            return dict(operation)

    def _firewall(self, project: str, name: str) -> dict:
        rule = self._firewalls.get((project, name))
        if rule is None:
            raise _not_found(f"projects/{project}/global/firewalls/{name}")
        return rule

    def _global_operation(self, project: str, verb: str, target: str) -> dict:
        """A global operation, done at once (firewall changes are quick and never fail here)."""
        name = f"operation-{uuid.uuid4().hex}"
        operation = {
            "kind": "compute#operation",
            "id": str(next(self._ids)),
            "name": name,
            "operationType": verb,
            "targetLink": f"{BASE}/{target}",
            "status": "DONE",
            "progress": 100,
            "insertTime": now_rfc3339(),
            "selfLink": f"{BASE}/projects/{project}/global/operations/{name}",
        }
        self._global_operations[(project, name)] = operation
        return dict(operation)

    # Internals -------------------------------------------------------------------------------
    def _instance(self, project: str, zone: str, name: str) -> dict:
        vm = self._instances.get((project, zone, name))
        if vm is None:
            raise _not_found(f"projects/{project}/zones/{zone}/instances/{name}")
        return vm

    def _new_operation(
        self, project: str, zone: str, verb: str, target: str, error: dict | None, names: list[str]
    ) -> dict:
        name = f"operation-{uuid.uuid4().hex}"
        operation: dict[str, Any] = {
            "kind": "compute#operation",
            "id": str(next(self._ids)),
            "name": name,
            "zone": _zone_url(project, zone),
            "operationType": verb,
            "targetLink": f"{BASE}/{target}",
            "status": "RUNNING",
            "insertTime": now_rfc3339(),
            "selfLink": f"{_zone_url(project, zone)}/operations/{name}",
        }
        key = (project, zone, name)
        self._operations[key] = operation
        self._pending[key] = [self.operation_polls, verb, (error, names)]
        self._advance()
        return dict(operation)

    def _advance(self) -> None:
        for key, (reads_left, verb, (error, names)) in list(self._pending.items()):
            if reads_left > 0 or verb in self._held:
                continue
            del self._pending[key]
            project, zone, _ = key
            operation = self._operations[key]
            operation["status"] = "DONE"
            if error is not None:
                operation["error"] = {"errors": [error]}
                forbidden = error["code"] == "QUOTA_EXCEEDED"
                operation["httpErrorStatusCode"] = 403 if forbidden else 503
                # Google puts the HTTP status text here; its own words are in the errors
                operation["httpErrorMessage"] = "FORBIDDEN" if forbidden else "SERVICE UNAVAILABLE"
            for name in names:
                vm = self._instances.get((project, zone, name))
                if vm is None:
                    continue
                if verb == "delete":
                    del self._instances[(project, zone, name)]
                elif vm["status"] == "PROVISIONING":
                    vm["status"] = "RUNNING"

    # HTTP ------------------------------------------------------------------------------------
    def route(self, method: str, path: str, query: dict[str, str], body: dict) -> dict:
        """Serve one request of the Compute Engine v1 REST API."""
        match = _OPERATION.match(path)
        if match and method == "GET":
            return self.operation(*match.groups())
        match = _FIREWALLS.match(path)
        if match:
            project, name = match.groups()
            if name is None and method == "POST":
                return self.insert_firewall(project, body, query.get("requestId", ""))
            if name is not None and method == "GET":
                return self.get_firewall(project, name)
            if name is not None and method == "DELETE":
                return self.delete_firewall(project, name)
        match = _GLOBAL_OPERATION.match(path)
        if match and method == "GET":
            return self.global_operation_get(*match.groups())
        match = _AGGREGATED.match(path)
        if match and method == "GET":
            return self.aggregated(match.group(1), match.group(2), query)
        match = _ZONE_INSTANCES.match(path)
        if match:
            project, zone, name, verb = match.groups()
            request = query.get("requestId", "")
            if name == "bulkInsert" and verb is None and method == "POST":
                return self.bulk_insert(project, zone, body, request)
            if name and verb is None and method == "GET":
                return self.get(project, zone, name)
            if name and verb is None and method == "DELETE":
                return self.delete(project, zone, name, request)
            if name and verb == "setLabels" and method == "POST":
                return self.set_labels(project, zone, name, body)
            if name and verb == "serialPort" and method == "GET":
                return self.serial_port(project, zone, name, query)
        raise ApiError(404, "NOT_FOUND", f"{method} {path} is not part of the emulated API.")


def _field(vm: dict, key: str) -> str | None:
    if key.startswith("labels."):
        return vm.get("labels", {}).get(key[len("labels.") :])
    value = vm.get(key)
    return None if value is None else str(value)


def _scoped(project: str, table: Mapping[str, Mapping[str, dict]], kind: str) -> dict:
    items = {}
    for zone, entries in sorted(table.items()):
        items[f"zones/{zone}"] = {
            kind: [
                {
                    **facts,
                    "name": name,
                    "zone": zone,
                    "selfLink": f"{_zone_url(project, zone)}/{kind}/{name}",
                }
                for name, facts in sorted(entries.items())
            ]
        }
    return {"items": items}


def _not_found(resource: str) -> ApiError:
    """Compute Engine's answer for a missing resource (``projects/...`` path)."""
    return ApiError(
        404,
        "NOT_FOUND",
        f"The resource '{resource}' was not found",
        errors=[{"reason": "notFound", "message": "not found"}],
    )
