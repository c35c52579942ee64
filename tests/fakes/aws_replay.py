"""A local HTTP server that replays recorded AWS API responses to real boto3 clients.

Speaks the two wire protocols the price refresh uses: JSON 1.1 (the Price List API,
``X-Amz-Target: AWSPriceListService.<Operation>``) and EC2's query protocol (form body,
XML answer). Each recording is ``{"service", "request", "response"}``: a request matches when
every recorded field equals what was sent (``Filters`` compared as a set, ``NextToken`` always
compared, EC2's ``region`` read from the request signature). Anything unrecorded gets a 400
naming what was sent, so a client asking for the wrong thing fails loudly.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

RECORDED_PRICES = Path(__file__).parent / "recorded_prices"
_SIGNED_REGION = re.compile(r"Credential=[^/]+/\d{8}/([^/]+)/")


def load_recordings(folder: Path = RECORDED_PRICES) -> list[dict[str, Any]]:
    return [json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))]


def _same(key: str, recorded: Any, sent: Any) -> bool:
    if key == "Filters":
        return _filter_set(recorded) == _filter_set(sent)
    return recorded == sent


def _filter_set(filters: list[dict[str, str]] | None) -> set[str]:
    return {json.dumps(f, sort_keys=True) for f in filters or []}


def matches(recorded: Mapping[str, Any], sent: Mapping[str, Any]) -> bool:
    keys = {*recorded, "NextToken"}
    return all(_same(key, recorded.get(key), sent.get(key)) for key in keys)


class _Handler(BaseHTTPRequestHandler):
    recordings: list[dict[str, Any]] = []
    requests: list[tuple[str, dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        target = self.headers.get("X-Amz-Target")
        if target:
            service, sent = "pricing", {"Operation": target.split(".")[-1], **json.loads(body)}
        else:
            signed = _SIGNED_REGION.search(self.headers.get("Authorization", ""))
            service, sent = "ec2", {"region": signed and signed.group(1), **dict(parse_qsl(body))}
        self.requests.append((service, sent))
        for recording in self.recordings:
            if recording["service"] == service and matches(recording["request"], sent):
                return self._answer(service, recording.get("status", 200), recording["response"])
        self._answer(service, 400, _unrecorded(service, sent))

    def _answer(self, service: str, status: int, response: Any) -> None:
        if service == "pricing":
            payload, kind = json.dumps(response).encode(), "application/x-amz-json-1.1"
        else:
            payload, kind = response.encode(), "text/xml"
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *_args: Any) -> None:
        pass


def _unrecorded(service: str, sent: Mapping[str, Any]) -> Any:
    message = f"no recording for {json.dumps(sent, sort_keys=True)}"
    if service == "pricing":
        return {"__type": "ValidationException", "Message": message}
    return (
        "<Response><Errors><Error><Code>InvalidParameterValue</Code>"
        f"<Message>{message}</Message></Error></Errors><RequestID>x</RequestID></Response>"
    )


@contextmanager
def replay_server(recordings: list[dict[str, Any]]) -> Iterator[tuple[str, list]]:
    """``(endpoint_url, requests seen)`` of a server on 127.0.0.1 replaying ``recordings``."""
    handler = type("Handler", (_Handler,), {"recordings": recordings, "requests": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler.requests
    finally:
        server.shutdown()
        server.server_close()
