"""A cluster's durable local state in one SQLite file (crash-safe, WAL journal).

Demand, launch intents, the per-node lifecycle, the unavailable-offerings cache, the
per-node-type boot failure streaks (and holds) and the event log. The cloud stays the truth
for what exists: deleting this file loses history, never instances (the next sync rebuilds
the node view from the cloud's tags).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filelock import FileLock, Timeout

from autoscaler.lifecycle import NodeRecord
from autoscaler.report import NodeReport

if TYPE_CHECKING:
    from autoscaler.planner.model import Demand

SCHEMA = """
CREATE TABLE IF NOT EXISTS demand (id INTEGER PRIMARY KEY CHECK (id = 1), body TEXT NOT NULL,
    updated_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS intents (request_id TEXT PRIMARY KEY, node_type TEXT NOT NULL,
    count INTEGER NOT NULL, offering TEXT, created_at REAL NOT NULL, status TEXT NOT NULL,
    node_ids TEXT NOT NULL DEFAULT '[]', detail TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS nodes (node_id TEXT PRIMARY KEY, node_type TEXT NOT NULL,
    state TEXT NOT NULL, since REAL NOT NULL, detail TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS offerings (key TEXT PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS boot_failures (node_type TEXT PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL,
    kind TEXT NOT NULL, message TEXT NOT NULL, node_type TEXT, node_id TEXT, data TEXT);
CREATE TABLE IF NOT EXISTS reports (node_id TEXT NOT NULL, host INTEGER NOT NULL,
    body TEXT NOT NULL, received_at REAL NOT NULL, PRIMARY KEY (node_id, host));
"""

ROUND_WAIT_S = 600.0
"""How long a reconcile round waits for another one on the same state to end."""
PREFLIGHT_EVENT = "preflight"
"""The event ``up`` records with its preflight's outcome (``data.ok``)."""
PENDING_INTENT = "pending"
LAUNCHED_INTENT = "launched"
FAILED_INTENT = "failed"


class RoundBusyError(RuntimeError):
    """Another reconcile round on the same state did not end within :data:`ROUND_WAIT_S`."""


@dataclass(frozen=True)
class Intent:
    """A launch recorded before the create call, so a crash can be resolved from tags."""

    request_id: str
    node_type: str
    count: int
    created_at: float
    status: str
    offering: dict[str, Any] | None = None
    node_ids: tuple[str, ...] = ()
    detail: str = ""

    @property
    def operations(self) -> tuple[str, ...]:
        """Create operations the cloud has not finished (``NodeProvider.operation_status``)."""
        return tuple((self.offering or {}).get("operations", ()))


@dataclass(frozen=True)
class Event:
    at: float
    kind: str
    message: str
    node_type: str | None = None
    node_id: str | None = None
    data: dict[str, Any] | None = None


class StateStore:
    """All local state of one cluster."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(
            str(path), timeout=30, isolation_level=None, check_same_thread=False
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(SCHEMA)

    @classmethod
    def open_read_only(cls, path: Path) -> StateStore:
        """The state file opened so nothing can be written (an empty in-memory state when
        there is no file yet): for read commands."""
        store = cls.__new__(cls)
        store.path = path
        if path.exists():
            store._db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
        else:
            store._db = sqlite3.connect(":memory:", isolation_level=None)
            store._db.executescript(SCHEMA)
        return store

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def round_lock(self) -> Iterator[None]:
        """Held for one reconcile round. Monitors sharing this state take turns (the head's
        monitor service and an `autoscale monitor --once` run on the head; on the local
        cloud, the simulated head's monitor and the CLI's): each plans from what the other's
        last round launched, never beside it, so the two never launch for the same demand."""
        lock = FileLock(f"{self.path}.round.lock")
        try:
            lock.acquire(timeout=ROUND_WAIT_S)
        except Timeout:
            raise RoundBusyError(
                f"another reconcile round on {self.path} has run for over {ROUND_WAIT_S:g} s"
            ) from None
        try:
            yield
        finally:
            lock.release()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # Demand -----------------------------------------------------------------------------
    def set_demand(self, body: Mapping[str, Any], now: float) -> None:
        with self.transaction() as db:
            db.execute(
                "INSERT INTO demand (id, body, updated_at) VALUES (1, ?, ?) ON CONFLICT(id) "
                "DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at",
                (json.dumps(body), now),
            )

    def demand(self) -> dict[str, Any]:
        row = self._db.execute("SELECT body FROM demand WHERE id = 1").fetchone()
        return json.loads(row[0]) if row else {"bundles": [], "placement_groups": []}

    # Launch intents ------------------------------------------------------------------------
    def record_intent(self, intent: Intent) -> None:
        with self.transaction() as db:
            db.execute(
                "INSERT INTO intents VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    intent.request_id,
                    intent.node_type,
                    intent.count,
                    json.dumps(intent.offering),
                    intent.created_at,
                    intent.status,
                    json.dumps(list(intent.node_ids)),
                    intent.detail,
                ),
            )

    def settle_intent(
        self,
        request_id: str,
        status: str,
        node_ids: tuple[str, ...] = (),
        detail: str = "",
        operations: tuple[str, ...] = (),
    ) -> None:
        """Record how a launch stands; ``operations``: its creates the cloud has not finished
        (kept pending, looked at in later rounds)."""
        with self.transaction() as db:
            db.execute(
                "UPDATE intents SET status = ?, node_ids = ?, detail = ?, offering = ? "
                "WHERE request_id = ?",
                (
                    status,
                    json.dumps(list(node_ids)),
                    detail,
                    json.dumps({"operations": list(operations)} if operations else None),
                    request_id,
                ),
            )

    def intents(self, status: str | None = None) -> list[Intent]:
        query = (
            "SELECT request_id, node_type, count, created_at, status, offering, node_ids, "
            "detail FROM intents"
        )
        rows = self._db.execute(
            query + (" WHERE status = ?" if status else "") + " ORDER BY created_at",
            (status,) if status else (),
        ).fetchall()
        return [
            Intent(
                r[0],
                r[1],
                r[2],
                r[3],
                r[4],
                json.loads(r[5]) if r[5] else None,
                tuple(json.loads(r[6])),
                r[7],
            )
            for r in rows
        ]

    def forget_intent(self, request_id: str) -> None:
        with self.transaction() as db:
            db.execute("DELETE FROM intents WHERE request_id = ?", (request_id,))

    # Node lifecycle (``autoscaler.lifecycle``) ------------------------------------------
    def node_records(self) -> dict[str, NodeRecord]:
        """node id -> its lifecycle record."""
        rows = self._db.execute(
            "SELECT node_id, node_type, state, since, detail FROM nodes"
        ).fetchall()
        return {
            r[0]: NodeRecord.from_row(r[0], r[1], r[2], r[3], json.loads(r[4] or "{}"))
            for r in rows
        }

    def save_node_records(self, records: Iterable[NodeRecord]) -> None:
        """Store ``records`` (one transaction)."""
        with self.transaction() as db:
            db.executemany(
                "INSERT INTO nodes (node_id, node_type, state, since, detail) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT(node_id) DO UPDATE SET "
                "node_type = excluded.node_type, state = excluded.state, "
                "since = excluded.since, detail = excluded.detail",
                [
                    (r.node_id, r.node_type, r.state, r.since, json.dumps(r.to_json()))
                    for r in records
                ],
            )

    def forget_nodes(self, node_ids: Iterable[str]) -> None:
        """Forget the nodes and their reports (one transaction)."""
        ids = [(node_id,) for node_id in node_ids]
        with self.transaction() as db:
            db.executemany("DELETE FROM nodes WHERE node_id = ?", ids)
            db.executemany("DELETE FROM reports WHERE node_id = ?", ids)

    # Unavailable offerings ---------------------------------------------------------------
    def offerings(self) -> dict[str, dict[str, Any]]:
        return {k: json.loads(v) for k, v in self._db.execute("SELECT key, body FROM offerings")}

    def save_offering(self, key: str, body: Mapping[str, Any] | None) -> None:
        """Store an unavailable-offering record; ``None`` deletes it."""
        self._save_json("offerings", "key", key, body)

    # Boot failure streaks (``autoscaler.boot_failures``) ------------------------------
    def boot_failures(self) -> dict[str, dict[str, Any]]:
        """node type -> its streak of boot failures (empty for a state file made before
        streaks were kept, opened read-only)."""
        try:
            rows = self._db.execute("SELECT node_type, body FROM boot_failures").fetchall()
        except sqlite3.OperationalError:
            return {}
        return {node_type: json.loads(body) for node_type, body in rows}

    def save_boot_failures(self, node_type: str, body: Mapping[str, Any] | None) -> None:
        """Store a node type's streak; ``None`` ends it."""
        self._save_json("boot_failures", "node_type", node_type, body)

    def _save_json(
        self, table: str, key_column: str, key: str, body: Mapping[str, Any] | None
    ) -> None:
        """Upsert ``body`` as JSON under ``key`` in a (key, body) table; ``None`` deletes."""
        with self.transaction() as db:
            if body is None:
                db.execute(f"DELETE FROM {table} WHERE {key_column} = ?", (key,))
                return
            db.execute(
                f"INSERT INTO {table} ({key_column}, body) VALUES (?, ?) "
                f"ON CONFLICT({key_column}) DO UPDATE SET body = excluded.body",
                (key, json.dumps(body)),
            )

    # Node reports (from the report endpoint) -------------------------------------------
    def save_report(self, node_id: str, host: int, report: NodeReport, received_at: float) -> None:
        """Keep ``report`` as the host's latest, unless a newer one is already kept."""
        with self.transaction() as db:
            db.execute(
                "INSERT INTO reports (node_id, host, body, received_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(node_id, host) DO UPDATE SET body = excluded.body, "
                "received_at = excluded.received_at "
                "WHERE json_extract(reports.body, '$.reported_at') <= ?",
                (node_id, host, json.dumps(report.to_json()), received_at, report.reported_at),
            )

    def reports(self) -> dict[str, dict[int, NodeReport]]:
        """node id -> host -> its latest report."""
        found: dict[str, dict[int, NodeReport]] = {}
        for node_id, host, body in self._db.execute("SELECT node_id, host, body FROM reports"):
            found.setdefault(node_id, {})[host] = NodeReport.from_json(json.loads(body))
        return found

    # Events ------------------------------------------------------------------------------
    def add_event(self, event: Event) -> None:
        self.add_events([event])

    def add_events(self, events: Iterable[Event]) -> None:
        """Append ``events`` to the log (one transaction)."""
        with self.transaction() as db:
            db.executemany(
                "INSERT INTO events (at, kind, message, node_type, node_id, data) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (
                        event.at,
                        event.kind,
                        event.message,
                        event.node_type,
                        event.node_id,
                        json.dumps(event.data) if event.data is not None else None,
                    )
                    for event in events
                ],
            )

    def last_event(self, kind: str) -> Event | None:
        """The newest event of ``kind``."""
        row = self._db.execute(
            "SELECT at, kind, message, node_type, node_id, data FROM events WHERE kind = ? "
            "ORDER BY id DESC LIMIT 1",
            (kind,),
        ).fetchone()
        if row is None:
            return None
        return Event(row[0], row[1], row[2], row[3], row[4], json.loads(row[5]) if row[5] else None)

    def events(self, limit: int = 100) -> list[Event]:
        rows = self._db.execute(
            "SELECT at, kind, message, node_type, node_id, data FROM events "
            "ORDER BY id DESC LIMIT ?",
            (limit,),
        ).fetchall()
        return [
            Event(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]) if r[5] else None)
            for r in reversed(rows)
        ]

    # Whole cluster -------------------------------------------------------------------------
    def clear(self) -> None:
        """Forget everything (after `down` confirmed nothing is left)."""
        with self.transaction() as db:
            tables = (
                "demand",
                "intents",
                "nodes",
                "offerings",
                "boot_failures",
                "events",
                "reports",
            )
            for table in tables:
                db.execute(f"DELETE FROM {table}")


def demand_body(demand: Demand) -> dict[str, Any]:
    """A parsed demand as the JSON the store keeps (identical shapes merged)."""
    return {
        "bundles": [{"resources": dict(b.resources), "count": b.count} for b in demand.bundles],
        "placement_groups": [
            {"strategy": g.strategy, "bundles": [dict(b) for b in g.bundles], "count": g.count}
            for g in demand.placement_groups
        ],
    }
