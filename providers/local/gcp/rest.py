"""HTTP plumbing the fake Google APIs share: Google-style JSON errors (so the real client
libraries raise their real exception classes), a JSON request handler and a server on a
background thread."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

logger = logging.getLogger(__name__)

TYPE_URL = "type.googleapis.com/"
Route = Callable[[str, str, dict[str, str], dict], dict]
"""(method, path, query, JSON body) -> JSON answer; raises :class:`ApiError`."""


class ApiError(Exception):
    """An error response in the Google JSON error format."""

    def __init__(
        self,
        http: int,
        status: str,
        message: str,
        details: list[dict] | None = None,
        errors: list[dict] | None = None,
    ) -> None:
        super().__init__(message)
        self.http = http
        error: dict[str, Any] = {"code": http, "message": message, "status": status}
        if details:
            error["details"] = details
        if errors:
            error["errors"] = errors
        self.body = {"error": error}


class LostAnswer(Exception):
    """The call was served but its answer never reaches the client (connection dropped)."""


def any_detail(message_type: str, fields: dict) -> dict:
    return {"@type": TYPE_URL + message_type, **fields}


def now_rfc3339() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


class FakeControls:
    """What tests do to a fake cloud: hold operations of a verb until released, and inject
    faults. A subclass sets ``_lock``, ``_held``, ``_faults`` and defines ``_advance``
    (finish what is due)."""

    _lock: threading.Lock
    _held: set[str]
    _faults: list

    def hold(self, verb: str) -> None:
        """Keep operations of ``verb`` running until :meth:`release`."""
        with self._lock:
            self._held.add(verb)

    def release(self, verb: str) -> None:
        with self._lock:
            self._held.discard(verb)
            self._advance()

    def inject(self, fault: Any) -> None:
        with self._lock:
            self._faults.append(fault)

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def _advance(self) -> None:
        raise NotImplementedError


class _Handler(BaseHTTPRequestHandler):
    route: Route
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
            self._reply(200, type(self).route(method, url.path, query, body))
        except ApiError as exc:
            self._reply(exc.http, exc.body)
        except LostAnswer:
            self.close_connection = True
            self.connection.close()
        except (ValueError, TypeError, KeyError) as exc:
            self._reply(400, ApiError(400, "INVALID_ARGUMENT", f"Bad request: {exc}").body)

    def _reply(self, code: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class FakeServer:
    """A fake API on a background thread: ``with Server(...) as server: server.url``."""

    def __init__(self, route: Route, host: str = "127.0.0.1", port: int = 0) -> None:
        handler = type("Handler", (_Handler,), {"route": staticmethod(route)})
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeServer:
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

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
