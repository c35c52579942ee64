"""How a launched node starts its agent: the script every cloud runs at first boot (each
cloud's plugin says how it is delivered and how a node learns its own id).

The script installs the node side of this package (not the control plane: see
:func:`node_package`) unless the node already has this version, finds the node's own id
from the cloud's metadata service, and starts ``autoscale node agent`` for the cluster. A node
type's ``bootstrap_before`` and ``bootstrap_after`` commands run around it. With
``ray_start`` a worker joins the Ray cluster and the head starts it.

The head also gets the cluster YAML and runs ``autoscale monitor`` as a systemd service
(restarted on failure, logs in ``/var/log/accel-autoscaler/monitor.log``, state in
``/var/lib/accel-autoscaler``), serving the report endpoint every agent sends its reports to,
signed with the cluster's secret (written owner-only to ``/etc/accel-autoscaler``).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from importlib import metadata
from typing import Any

from autoscaler.ray_cluster.join import HEAD_PORT
from autoscaler.report_channel import REPORT_PORT, ReportTarget

DISTRIBUTION = "accel-autoscaler"
CONTROL_EXTRA = "control"
VERSION_LINE = "autoscale, version {version}"
"""What ``autoscale --version`` prints."""
CONFIG_DIR = "/etc/accel-autoscaler"
SECRET_PATH = f"{CONFIG_DIR}/report-secret"
HEREDOC = "ACCEL_AUTOSCALER_CLUSTER_YAML"
MONITOR_UNIT = "accel-autoscaler-monitor"
MONITOR_LOG = "/var/log/accel-autoscaler/monitor.log"
MONITOR_STATE = "/var/lib/accel-autoscaler"


def agent_script(
    cluster_name: str,
    provider_config: Mapping[str, Any],
    node_identity_script: str,
    package: str,
    before: Sequence[str] = (),
    after: Sequence[str] = (),
    ray_start: bool = False,
    node_type: str = "",
    ray_address: str | None = None,
    head_config: str | None = None,
    report: ReportTarget | None = None,
) -> str:
    """The bash script a node runs at first boot; ``node_identity_script`` (the cloud's) sets
    ``NODE_ID`` and ``HOST``. With ``ray_start`` the agent runs ``ray start`` as
    ``node_type``, joining ``ray_address``; a head (``head_config``: its cluster YAML) starts
    the Ray head instead. A head runs the monitor service; agents report to its endpoint
    when ``report`` says where (else into their own tags)."""
    config = {k: v for k, v in provider_config.items() if v is not None and k != "emulator"}
    agent = [
        "autoscale",
        "node",
        "agent",
        "--cluster",
        cluster_name,
        "--provider-config",
        json.dumps(config, sort_keys=True),
    ]
    ray_env = []
    if ray_start:
        agent.append("--ray-start")
        ray_env.append(f"export RAY_NODE_TYPE_NAME={shlex.quote(node_type)}")
        if ray_address and head_config is None:
            ray_env.append(f"export RAY_ADDRESS={shlex.quote(ray_address)}")
    head = head_config is not None
    report_url = f"http://127.0.0.1:{REPORT_PORT}" if head else report and report.url
    if report is not None and report_url:
        agent += ["--report-url", report_url, "--report-secret-file", SECRET_PATH]
    lines = [
        "#!/bin/bash",
        "set -euo pipefail",
        *before,
        *install_step(package, ray_start),
        node_identity_script.rstrip(),
        *ray_env,
        *(_secret(report.secret) if report is not None and report_url else []),
        *(_head_monitor(head_config, ray_start, report) if head_config is not None else []),
        f'nohup {shlex.join(agent)} --node-id "$NODE_ID" --host "$HOST" '
        ">>/var/log/accel-autoscaler-agent.log 2>&1 &",
        *after,
    ]
    return "\n".join(lines) + "\n"


def node_package(version: str, head: bool, reports_into: str | None) -> str:
    """The pip requirement a node installs: the node side alone (detection, the agent, its
    report channel, ``ray start`` wiring), plus the control plane on the head (it runs the
    monitor), or the cloud's client (extra ``reports_into``) on a worker that reports into its
    own tags instead of to the head."""
    extras = [CONTROL_EXTRA] if head else [reports_into] if reports_into else []
    return f"{DISTRIBUTION}{'[' + ','.join(extras) + ']' if extras else ''}=={version}"


def install_step(package: str, ray: bool = False) -> list[str]:
    """Install ``package`` unless ``autoscale --version`` already shows the version it pins
    (an image built for this release: no install at all); with ``ray``, install Ray (the
    control plane's version) when the node has no ``ray`` command."""
    pip = f"python3 -m pip install --quiet {shlex.quote(package)}"
    pinned = re.search(r"==\s*([\w.+!-]+)\s*$", package)
    lines = [pip]
    if pinned:
        installed = shlex.quote(VERSION_LINE.format(version=pinned.group(1)))
        lines = [f'[ "$(autoscale --version 2>/dev/null)" = {installed} ] || {pip}']
    if ray:
        lines.append(f"command -v ray >/dev/null || python3 -m pip install --quiet {_ray()}")
    return lines


def _ray() -> str:
    """Ray at the control plane's version (a cluster's nodes must match), else the latest."""
    try:
        return shlex.quote(f"ray[default]=={metadata.version('ray')}")
    except metadata.PackageNotFoundError:
        return shlex.quote("ray[default]")


def _secret(secret: str) -> list[str]:
    """The cluster's report secret, readable by root only."""
    return [
        f"mkdir -p {CONFIG_DIR}",
        f"(umask 077 && printf '%s' {shlex.quote(secret)} > {SECRET_PATH})",
    ]


def _head_monitor(cluster_yaml: str, ray_start: bool, report: ReportTarget | None) -> list[str]:
    """Write the cluster YAML on the head and run the monitor there as a systemd service:
    restarted on failure, resuming from the cloud's tags and its state file."""
    monitor = [f"{CONFIG_DIR}/cluster.yaml"]
    if report is not None:
        monitor += ["--report-port", str(REPORT_PORT), "--report-secret-file", SECRET_PATH]
        monitor += ["--report-address", "$HEAD_IP"]
    if ray_start:
        monitor += ["--ray-address", f"$HEAD_IP:{HEAD_PORT}"]
    unit = [
        "[Unit]",
        "Description=accel-autoscaler monitor",
        "After=network-online.target",
        "Wants=network-online.target",
        "[Service]",
        f"Environment=AUTOSCALE_STATE_DIR={MONITOR_STATE}",
        f"ExecStart=$AUTOSCALE monitor {' '.join(monitor)}",
        "Restart=on-failure",
        "RestartSec=5",
        f"StandardOutput=append:{MONITOR_LOG}",
        f"StandardError=append:{MONITOR_LOG}",
        "[Install]",
        "WantedBy=multi-user.target",
    ]
    return [
        f"mkdir -p {CONFIG_DIR} {MONITOR_STATE} {MONITOR_LOG.rsplit('/', 1)[0]}",
        f"cat > {CONFIG_DIR}/cluster.yaml <<'{HEREDOC}'",
        cluster_yaml.rstrip(),
        HEREDOC,
        "HEAD_IP=$(hostname -I | awk '{print $1}')",
        "AUTOSCALE=$(command -v autoscale)",
        f"cat > /etc/systemd/system/{MONITOR_UNIT}.service <<UNIT",
        *unit,
        "UNIT",
        "systemctl daemon-reload",
        f"systemctl enable --now {MONITOR_UNIT}.service",
    ]
