"""What a node agent reports about its node, carried in the cloud's own tags or labels.

A report is compact JSON, compressed and base32-encoded (lower case, so GCP label values
accept it), split over numbered keys that each stay under the cloud's value limit
(``Cloud.tag_value_limit``). The version key lets a newer autoscaler read an
older agent, and the checksum makes a half-written report read as "no report".
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

REPORT_VERSION = 1
KEY_PREFIX = "accel-r"
"""Keys are ``accel-r<host>-v`` (version), ``-n`` (chunks), ``-c`` (checksum), ``-<i>``: each
host of a multi-host slice reports under its own worker index."""


@dataclass(frozen=True)
class NodeReport:
    """A node's own view: what it has, what is in use, and since when it is idle."""

    resources: Mapping[str, float]
    """Everything the node advertises (CPU, memory, GPU..., accelerator_type tokens)."""
    devices: Mapping[str, int] = field(default_factory=dict)
    """Detected devices per accelerator resource."""
    free: Mapping[str, float] = field(default_factory=dict)
    """Resources not leased right now."""
    device_free: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    """Free share of each device, per accelerator resource."""
    idle_since: float | None = None
    """Epoch seconds since nothing has been leased; None while busy."""
    reported_at: float = 0.0
    agent: str = ""
    """Agent version, for the event log."""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["device_free"] = {k: list(v) for k, v in self.device_free.items()}
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NodeReport:
        return cls(
            resources=dict(data["resources"]),
            devices=dict(data.get("devices", {})),
            free=dict(data.get("free", {})),
            device_free={k: tuple(v) for k, v in data.get("device_free", {}).items()},
            idle_since=data.get("idle_since"),
            reported_at=float(data.get("reported_at", 0.0)),
            agent=data.get("agent", ""),
        )


def _key(host: int, suffix: str | int) -> str:
    return f"{KEY_PREFIX}{host}-{suffix}"


def encode(report: NodeReport, value_limit: int, host: int = 0) -> dict[str, str]:
    """The tags (or labels) carrying ``report``, each value at most ``value_limit`` long."""
    payload = json.dumps(report.to_json(), separators=(",", ":"), sort_keys=True).encode()
    text = base64.b32encode(zlib.compress(payload, 9)).decode().rstrip("=").lower()
    chunks = [text[i : i + value_limit] for i in range(0, len(text), value_limit)]
    tags = {_key(host, i): chunk for i, chunk in enumerate(chunks)}
    tags[_key(host, "v")] = str(REPORT_VERSION)
    tags[_key(host, "n")] = str(len(chunks))
    tags[_key(host, "c")] = format(zlib.crc32(payload), "x")
    return tags


def decode(tags: Mapping[str, str], host: int = 0) -> NodeReport | None:
    """Host ``host``'s report; None when absent, partial, corrupt or of an unknown version."""
    try:
        if int(tags[_key(host, "v")]) != REPORT_VERSION:
            return None
        text = "".join(tags[_key(host, i)] for i in range(int(tags[_key(host, "n")])))
        padded = text.upper() + "=" * (-len(text) % 8)
        payload = zlib.decompress(base64.b32decode(padded))
        if format(zlib.crc32(payload), "x") != tags[_key(host, "c")]:
            return None
        return NodeReport.from_json(json.loads(payload))
    except (KeyError, ValueError, zlib.error, TypeError):
        return None


def stale_keys(
    old_tags: Mapping[str, str], new_tags: Mapping[str, str], host: int = 0
) -> list[str]:
    """Chunk keys of an older, longer report of ``host`` that the new one no longer uses."""
    prefix = _key(host, "")
    return [k for k in old_tags if k.startswith(prefix) and k not in new_tags]
