"""The monitor's report endpoint (see :mod:`autoscaler.report_channel`): an HTTP server
whose verified reports go into the cluster's state file, where the reconciler reads them."""

from __future__ import annotations

import hmac
import json
import logging
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from autoscaler.report import NodeReport
from autoscaler.report_channel import MAX_BODY, MAX_SKEW_S, REPORT_PATH, sign
from autoscaler.state import StateStore

logger = logging.getLogger(__name__)


class ReportServer:
    """The monitor's report endpoint: verified reports go into the cluster's state file."""

    def __init__(
        self,
        state_path: Path,
        secret: str,
        host: str = "0.0.0.0",
        port: int = 0,
        clock: Callable[[], float] = time.time,
        node_id_of: Callable[[str], str] = str,
    ) -> None:
        """``node_id_of``: the provider's node id for the id an agent reports as."""
        self.secret = secret
        self.node_id_of = node_id_of
        self.clock = clock
        self._store = StateStore(state_path)
        self._lock = threading.Lock()
        self.received = 0
        self._server = _Server((host, port), _handler(self))
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> ReportServer:
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            self._store.close()

    def accept(self, timestamp: str, signature: str, body: bytes) -> int:
        """Verify and store one request; the HTTP status to answer."""
        try:
            skew = abs(self.clock() - float(timestamp))
        except ValueError:
            return 401
        if skew > MAX_SKEW_S or not hmac.compare_digest(
            sign(self.secret, timestamp, body), signature
        ):
            return 401
        try:
            message = json.loads(body)
            report = NodeReport.from_json(message["report"])
            node_id, host = self.node_id_of(str(message["node_id"])), int(message["host"])
        except (ValueError, KeyError, TypeError):
            return 400
        with self._lock:
            self._store.save_report(node_id, host, report, self.clock())
            self.received += 1
        return 204


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    """Connections waiting to be accepted: thousands of agents report in bursts."""


def _handler(server: ReportServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            logger.debug("report endpoint: " + format, *args)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if self.path != REPORT_PATH or length > MAX_BODY:
                self._answer(404 if self.path != REPORT_PATH else 413)
                return
            body = self.rfile.read(length)
            self._answer(
                server.accept(
                    self.headers.get("X-Accel-Timestamp", ""),
                    self.headers.get("X-Accel-Signature", ""),
                    body,
                )
            )

        def _answer(self, code: int) -> None:
            self.send_response(code)
            self.send_header("Content-Length", "0")
            self.end_headers()

    return Handler
