"""Where a user reaches the cluster's Ray (``status``: its GCS address for ``ray job submit``
and its dashboard), and what attach mode must tell them about the Ray head they run.

``request_resources()`` (and Ray Train's and Ray Data's use of it) reaches an autoscaler only
through the head's autoscaler v2 state; a head started without ``RAY_enable_autoscaler_v2=1``
drops those requests, so attaching to one is said in one line, with the fix.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from autoscaler.ray_cluster.start_commands import DEFAULT_PORT, head_port

ATTACH_EVENT = "ray_attach"
"""The event ``monitor --ray-address`` records at start: the address and any warning."""
DASHBOARD_PORT = 8265


def attach_warning(address: str, autoscaler_v2: bool | None) -> str | None:
    """One line when the head at ``address`` drops ``request_resources()`` (None if not)."""
    if autoscaler_v2 is not False:
        return None
    return (
        f"the Ray head at {address} runs without autoscaler v2 state (RAY_enable_autoscaler_v2 "
        "is not set), so request_resources() and Ray Train's and Ray Data's resource requests "
        "never reach this autoscaler: restart the head with RAY_enable_autoscaler_v2=1 "
        "(`RAY_enable_autoscaler_v2=1 ray start --head ...`); its pending tasks and actors "
        "still scale the cluster"
    )


def dashboard_port(start_commands: Sequence[str]) -> int:
    """The head's ``--dashboard-port`` (Ray's default if unset)."""
    for line in start_commands:
        found = re.search(r"--dashboard-port[= ](\d+)", line)
        if found:
            return int(found.group(1))
    return DASHBOARD_PORT


def ray_endpoints(
    spec: Any, head_ips: Iterable[str], events: Iterable[Any]
) -> dict[str, Any] | None:
    """``{address, dashboard, warning}`` of the cluster's Ray: the head ``monitor
    --ray-address`` attached to (its latest attach event), else this cluster's head node
    when it runs Ray (``head_ips``: its private addresses, on this machine's loopback
    network in the local cloud)."""
    attached = [e for e in events if e.kind == ATTACH_EVENT and e.data]
    if attached:
        data: Mapping[str, Any] = attached[-1].data
        host = str(data["address"]).rpartition(":")[0]
        return {
            "address": data["address"],
            "dashboard": f"http://{host}:{DASHBOARD_PORT}",
            "warning": data.get("warning"),
        }
    head = spec.head_node_type
    if head is None or not spec.available_node_types[head].ray_start:
        return None
    host = next(iter(head_ips), None)
    if host is None:
        return None
    start = spec.head_start_ray_commands or ()
    port = head_port(start) if start else DEFAULT_PORT
    return {
        "address": f"{host}:{port}",
        "dashboard": f"http://{host}:{dashboard_port(start)}",
        "warning": None,
    }
