"""Node reports over HTTP to the monitor, instead of through the cloud's tag API.

At scale the cloud's API budget is the scarce thing: an agent that writes its report into its
own tags costs a describe and a tag call per report, shared with everything else in the
account. Here agents POST reports to the monitor on the head (the cluster's private network),
signed with a per-cluster secret that `up` generates and gives each node in its boot data; the
monitor keeps the latest report of every host in its state file, where the reconciler reads
it. Agents make no cloud API call at all.

A request carries ``X-Accel-Timestamp`` and ``X-Accel-Signature`` = HMAC-SHA256(secret,
timestamp + "\\n" + body); a stale timestamp (replay) or a bad signature is refused with 401.
Here: the agents' side and what both sides share; the monitor's endpoint is
:mod:`autoscaler.report_server`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

from autoscaler.report import NodeReport
from providers.local_state import cluster_state_dir

REPORT_PATH = "/v1/reports"
REPORT_PORT = 8077
"""Where the monitor on the head serves reports (the cluster's private network)."""
SECRET_FILE = "report-secret"
MAX_SKEW_S = 300.0
"""How old (or early) a signed request may be."""
MAX_BODY = 64 * 1024
TIMEOUT_S = 5.0


@dataclass(frozen=True)
class ReportTarget:
    """Where launched nodes send reports: the cluster's secret, and the monitor's endpoint as
    workers reach it (None: not known yet, so workers write their tags)."""

    secret: str
    url: str | None = None


def cluster_secret(cluster_name: str) -> str:
    """The cluster's report secret, made on first use and kept (owner-only) in its state
    folder, where `up` gives it to the head in its boot data."""
    path = cluster_state_dir(cluster_name) / SECRET_FILE
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(secrets.token_urlsafe(32))
        return path.read_text().strip()


def sign(secret: str, timestamp: str, body: bytes) -> str:
    message = timestamp.encode() + b"\n" + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def http_publisher(
    url: str, secret: str, node_id: str, host: int = 0, clock: Callable[[], float] = time.time
) -> Callable[[NodeReport], None]:
    """Publish a host's reports to the monitor's report endpoint at ``url``; a failure
    raises (the agent retries with backoff)."""
    import urllib.request

    def publish(report: NodeReport) -> None:
        body = json.dumps({"node_id": node_id, "host": host, "report": report.to_json()}).encode()
        timestamp = f"{clock():.3f}"
        request = urllib.request.Request(
            url.rstrip("/") + REPORT_PATH,
            data=body,
            method="POST",
            headers={
                "Content-Type": "application/json",
                "X-Accel-Timestamp": timestamp,
                "X-Accel-Signature": sign(secret, timestamp, body),
            },
        )
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            response.read()

    return publish


def bind_host(address: str | None) -> str:
    """Where the report endpoint listens: ``address`` when it is this machine's own (the
    head VM's private IP; in the local cloud, the instance's loopback address), so ports
    only collide per address as on separate VMs; else all interfaces (an address in front
    of this machine, e.g. behind NAT)."""
    if not address:
        return "0.0.0.0"
    try:
        with socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET) as probe:
            probe.bind((address, 0))
    except (OSError, UnicodeError):
        return "0.0.0.0"
    return address
