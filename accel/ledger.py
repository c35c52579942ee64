"""The node-wide device ledger shared by every process on a node.

Each ``autoscale node run`` takes a *lease*: the resources it asked for and, per accelerator
resource, the devices and share it was granted. Leases live in one JSON file guarded by a
file lock, so concurrent runs never hand out the same share twice. A lease whose holder
processes have all died (checked by pid *and* start time, so a reused pid does not count) is
reclaimed by the next process that touches the ledger.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock

from accel.allocation import AllocationError, DeviceAllocator, Grant, from_units, to_units
from accel.families import families_for_resource
from accel.node import NODE_RESOURCES_ENV_VAR, NodeInventory
from accel.resource_rules import exclusive_conflict, quantity_error
from accel.user_input import brief

logger = logging.getLogger(__name__)

STATE_DIR_ENV_VAR = "AUTOSCALE_NODE_STATE_DIR"
LEDGER_VERSION = 1
LOCK_TIMEOUT_S = 30.0


def default_state_dir(env: Mapping[str, str] | None = None) -> Path:
    """``AUTOSCALE_NODE_STATE_DIR``, else a per-user state folder."""
    env = os.environ if env is None else env
    if env.get(STATE_DIR_ENV_VAR):
        return Path(env[STATE_DIR_ENV_VAR])
    from platformdirs import user_state_dir

    return Path(user_state_dir("accel-autoscaler")) / "node"


@dataclass(frozen=True)
class ProcessRef:
    """A process identified by pid and start time, so pid reuse is not mistaken for it."""

    pid: int
    create_time: float

    @classmethod
    def of(cls, pid: int) -> ProcessRef:
        import psutil

        return cls(pid, psutil.Process(pid).create_time())

    def alive(self) -> bool:
        import psutil

        try:
            process = psutil.Process(self.pid)
            return (
                abs(process.create_time() - self.create_time) < 0.01
                and process.status() != psutil.STATUS_ZOMBIE
            )
        except psutil.Error:
            return False


@dataclass(frozen=True)
class Lease:
    lease_id: str
    resources: Mapping[str, float]
    grants: Mapping[str, Grant]
    holders: tuple[ProcessRef, ...]
    command: tuple[str, ...] = ()
    started_at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "lease_id": self.lease_id,
            "resources": dict(self.resources),
            "grants": {
                name: {"ids": list(g.ids), "fraction": g.fraction}
                for name, g in self.grants.items()
            },
            "holders": [{"pid": h.pid, "create_time": h.create_time} for h in self.holders],
            "command": list(self.command),
            "started_at": self.started_at,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Lease:
        return cls(
            lease_id=data["lease_id"],
            resources={k: float(v) for k, v in data["resources"].items()},
            grants={
                name: Grant(tuple(g["ids"]), to_units(g["fraction"]))
                for name, g in data["grants"].items()
            },
            holders=tuple(ProcessRef(h["pid"], h["create_time"]) for h in data["holders"]),
            command=tuple(data.get("command", ())),
            started_at=float(data.get("started_at", 0.0)),
        )


class ResourcesUnavailableError(AllocationError):
    """The request is valid but does not fit what is free right now."""


@dataclass
class LedgerView:
    """Free capacity after replaying every live lease over the inventory."""

    allocators: dict[str, DeviceAllocator]
    free_scalars: dict[str, int] = field(default_factory=dict)
    """Free share units of every non-device resource."""


class NodeLedger:
    """Leases on one node's resources, persisted under ``state_dir``."""

    def __init__(
        self,
        state_dir: Path,
        inventory: NodeInventory,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.state_dir = Path(state_dir)
        self.inventory = inventory
        self._clock = clock
        self._path = self.state_dir / "ledger.json"
        self._lock = FileLock(str(self.state_dir / "ledger.lock"), timeout=LOCK_TIMEOUT_S)

    # Public operations ---------------------------------------------------------------
    def acquire(
        self, request: Mapping[str, float], holder: ProcessRef, command: Sequence[str] = ()
    ) -> Lease:
        """Grant ``request`` or raise: :class:`AllocationError` if it can never be valid,
        :class:`ResourcesUnavailableError` if it does not fit now."""
        self._validate(request)
        with self._locked() as leases:
            view = self._view(leases)
            grants = self._grant(request, view)
            lease = Lease(
                lease_id=uuid.uuid4().hex[:12],
                resources=dict(request),
                grants=grants,
                holders=(holder,),
                command=tuple(command),
                started_at=self._clock(),
            )
            leases.append(lease)
            return lease

    def add_holder(self, lease_id: str, holder: ProcessRef) -> None:
        """Also keep the lease alive while ``holder`` runs (the workload's own process)."""
        with self._locked() as leases:
            for position, lease in enumerate(leases):
                if lease.lease_id == lease_id:
                    leases[position] = Lease(
                        lease.lease_id,
                        lease.resources,
                        lease.grants,
                        (*lease.holders, holder),
                        lease.command,
                        lease.started_at,
                    )

    def release(self, lease_id: str) -> None:
        with self._locked() as leases:
            leases[:] = [lease for lease in leases if lease.lease_id != lease_id]

    def snapshot(self) -> tuple[list[Lease], LedgerView]:
        """Live leases and the free capacity they leave (reclaiming dead leases)."""
        with self._locked() as leases:
            return list(leases), self._view(leases)

    # Internals -----------------------------------------------------------------------
    def _validate(self, request: Mapping[str, float]) -> None:
        conflict = exclusive_conflict(request)
        if conflict:
            raise AllocationError(conflict)
        for name, quantity in request.items():
            if name not in self.inventory.resources:
                raise AllocationError(_unknown_resource_message(name, self.inventory.resources))
            family = self.inventory.family_for(name)
            error = quantity_error(quantity)
            if error:
                error = f"{name} quantity {error}"
            elif family:
                error = family.validate_quantity(quantity)
            if error:
                raise AllocationError(error)
            total = self.inventory.resources[name]
            if quantity > total:
                raise AllocationError(
                    f"{name}: {quantity:g} requested but this node has only {total:g}"
                )

    def _view(self, leases: list[Lease]) -> LedgerView:
        view = LedgerView(
            allocators={
                name: DeviceAllocator(pool.ids) for name, pool in self.inventory.pools.items()
            },
            free_scalars={
                name: to_units(total)
                for name, total in self.inventory.resources.items()
                if name not in self.inventory.pools
            },
        )
        for lease in leases:
            for name, grant in lease.grants.items():
                try:
                    view.allocators[name].reserve(grant)
                except (KeyError, AllocationError) as err:
                    logger.warning("lease %s no longer matches the node: %s", lease.lease_id, err)
            for name, quantity in lease.resources.items():
                if name in view.free_scalars:
                    view.free_scalars[name] -= to_units(quantity)
        return view

    def _grant(self, request: Mapping[str, float], view: LedgerView) -> dict[str, Grant]:
        for name, quantity in request.items():
            free = view.free_scalars.get(name)
            if free is not None and to_units(quantity) > free:
                raise ResourcesUnavailableError(
                    f"{name}: {quantity:g} requested, {from_units(max(free, 0)):g} free"
                )
        grants: dict[str, Grant] = {}
        for name, quantity in request.items():
            if name in view.allocators:
                try:
                    grants[name] = view.allocators[name].allocate(quantity)
                except AllocationError as err:
                    raise ResourcesUnavailableError(f"{name}: {err}") from err
        return grants

    @contextmanager
    def _locked(self) -> Iterator[list[Lease]]:
        """Load the live leases under the lock, let the caller change them, save them."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with self._lock:
            leases = self._load()
            live = [lease for lease in leases if any(h.alive() for h in lease.holders)]
            for lease in leases:
                if lease not in live:
                    logger.info("reclaimed lease %s of dead process(es)", lease.lease_id)
            yield live
            if live != leases:
                self._save(live)

    def _load(self) -> list[Lease]:
        try:
            data = json.loads(self._path.read_text())
            return [Lease.from_dict(entry) for entry in data["leases"]]
        except FileNotFoundError:
            return []
        except (ValueError, KeyError, TypeError) as err:
            corrupt = self._path.with_suffix(f".corrupt-{int(self._clock())}")
            self._path.replace(corrupt)
            logger.warning("ledger was unreadable (%s); moved it to %s", err, corrupt)
            return []

    def _save(self, leases: list[Lease]) -> None:
        payload = {"version": LEDGER_VERSION, "leases": [lease.to_dict() for lease in leases]}
        fd, tmp = tempfile.mkstemp(dir=self.state_dir, prefix=".ledger-", suffix=".json")
        with os.fdopen(fd, "w") as handle:
            json.dump(payload, handle, indent=1)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self._path)


def _unknown_resource_message(name: str, resources: Mapping[str, float]) -> str:
    if families_for_resource(name):
        return (
            f"this node has no {name} devices (none detected; set "
            f"{NODE_RESOURCES_ENV_VAR} to declare logical ones)"
        )
    close = difflib.get_close_matches(name, list(resources), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"resource {brief(name)} is not on this node (it has: {', '.join(resources)}){hint}"
