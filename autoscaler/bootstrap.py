"""How a launched node sets itself up: the boot script every cloud runs at first boot (each
cloud's plugin says how it is delivered and how a node learns its own id).

No SSH: everything Ray's cluster launcher would do over SSH travels in the boot data and
runs in Ray's order, each step logged with its command and exit status (to the console and
``/var/log/accel-autoscaler-boot.log``); a failing step ends the boot:

1. the node's id (the cloud's metadata service), ``bootstrap_before`` (ours);
2. ``file_mounts``, unpacked from the boot data at their remote paths;
3. ``initialization_commands`` on the host;
4. the agent's install (:func:`install_step`: the node side alone, see :func:`node_package`,
   skipped where the node has this release; Ray too where the agent itself starts it);
5. with ``docker``: ``docker pull`` (``pull_before_run``), then one long-running container
   with the user's run options, host networking, ``/dev/shm`` sized for Ray and the
   accelerators detection found passed through (``autoscaler.container``); the file mounts
   copied in; an image without ``bash``/``python3`` gets one clear line;
6. ``setup_commands`` then ``head_setup_commands`` / ``worker_setup_commands``, in the
   container when there is one;
7. the agent, on the host where it sees the devices (a head also gets its cluster YAML and
   runs ``autoscale monitor`` as a systemd service receiving the agents' signed reports);
8. the Ray start commands, in the container, with ``$RAY_HEAD_IP`` set, rewritten for our
   monitor (``autoscaler.ray_cluster.start_commands``); or, with ``ray_start`` and none,
   the agent runs ``ray start`` itself;
9. ``bootstrap_after`` (ours).
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import shlex
from collections.abc import Sequence
from importlib import metadata
from typing import TYPE_CHECKING, Any

from autoscaler.config.file_mounts import pack, raw_size
from autoscaler.config.node_setup import NodeSetup, node_setup
from autoscaler.ray_cluster.start_commands import head_port, rewrite_line
from autoscaler.release import DISTRIBUTION, package_version
from autoscaler.report_channel import REPORT_PORT, ReportTarget

if TYPE_CHECKING:
    from autoscaler.config import ClusterConfig

CONTROL_EXTRA = "control"
VERSION_LINE = "autoscale, version {version}"
"""What ``autoscale --version`` prints."""
CONFIG_DIR = "/etc/accel-autoscaler"
SECRET_PATH = f"{CONFIG_DIR}/report-secret"
HEREDOC = "ACCEL_AUTOSCALER_CLUSTER_YAML"
MONITOR_UNIT = "accel-autoscaler-monitor"
MONITOR_LOG = "/var/log/accel-autoscaler/monitor.log"
MONITOR_STATE = "/var/lib/accel-autoscaler"
BOOT_LOG = "/var/log/accel-autoscaler-boot.log"
AGENT_LOG = "/var/log/accel-autoscaler-agent.log"
MOUNTS_DIR = f"{MONITOR_STATE}/file-mounts"
LOG_PREFIX = "[accel-autoscaler boot]"

_HELPERS = r"""
log() { echo "LOG_PREFIX $*"; }
ACCEL_CONTAINER=""
ACCEL_SHELL=bash
ACCEL_ENV=(RAY_HEAD_IP RAY_NODE_TYPE_NAME RAY_CLOUD_INSTANCE_ID RAY_OVERRIDE_LABELS)
ACCEL_ENV+=(RAY_enable_autoscaler_v2)
# A user's command runs as Ray's launcher runs it: its own shell, the user's ~/.profile read.
ACCEL_RUN='if [ -f ~/.profile ]; then . ~/.profile >/dev/null 2>&1 || true; fi; eval "$1"'
# run_step NAME WHERE COMMAND: one boot step (WHERE: host, or node: the container if any),
# logged with its exit status; a failing step ends the boot.
run_step() {
  local name=$1 where=$2 command=$3 status=0 env=() var
  log "$name: $command"
  for var in "${ACCEL_ENV[@]}"; do
    if [ "$var" = RAY_OVERRIDE_LABELS ] && [ -n "${ACCEL_OWN_LABELS:-}" ]; then
      continue  # the user's line sets its own --labels
    fi
    if [ -n "${!var+x}" ]; then env+=(-e "$var"); fi
  done
  if [ "$where" = node ] && [ -n "$ACCEL_CONTAINER" ]; then
    docker exec "${env[@]}" "$ACCEL_CONTAINER" \
      "$ACCEL_SHELL" -c "$ACCEL_RUN" "$ACCEL_SHELL" "$command" </dev/null || status=$?
  elif [ -n "${ACCEL_OWN_LABELS:-}" ]; then
    env -u RAY_OVERRIDE_LABELS bash -c "$ACCEL_RUN" bash "$command" </dev/null || status=$?
  else
    bash -c "$ACCEL_RUN" bash "$command" </dev/null || status=$?
  fi
  log "$name: exit $status"
  if [ "$status" -ne 0 ]; then
    log "boot stopped: $name failed (exit $status)"
    exit "$status"
  fi
}
# place INDEX DEST: file mount INDEX at DEST on the host.
place() {
  local source="MOUNTS_DIR/$1" dest=$2
  mkdir -p "$(dirname "$dest")" && rm -rf "$dest" && cp -a "$source" "$dest"
}
# place_in_container INDEX DEST: file mount INDEX at DEST in the container (~: its home).
place_in_container() {
  local source="MOUNTS_DIR/$1" dest=$2 home
  home=$(docker exec "$ACCEL_CONTAINER" sh -c 'echo ~')
  case $dest in "~") dest=$home ;; "~/"*) dest="$home/${dest#"~/"}" ;; esac
  docker exec "$ACCEL_CONTAINER" mkdir -p "$(dirname "$dest")"
  docker exec "$ACCEL_CONTAINER" rm -rf "$dest"
  docker cp "$source" "$ACCEL_CONTAINER:$dest"
}
""".replace("LOG_PREFIX", LOG_PREFIX).replace("MOUNTS_DIR", MOUNTS_DIR)


COMPRESSION_BOUND = 64
"""File mounts whose raw size passes this many times the cap are refused without packing."""
_INSTEAD = (
    "put large files in the image, or in object storage fetched by setup_commands, and keep "
    "file_mounts for small ones"
)


def boot_data_problem(config: ClusterConfig) -> str | None:
    """One line when a node type's boot data would pass its cloud's cap: the total, the cap,
    what the file mounts take, and what to do instead (None when every node type fits)."""
    cloud = config.cloud
    mounts = config.spec.file_mounts or {}
    raw = raw_size(mounts, COMPRESSION_BOUND * cloud.boot_data_limit)
    if raw > COMPRESSION_BOUND * cloud.boot_data_limit:
        return (
            f"file_mounts hold over {raw:,} bytes, far past the {cloud.boot_data_limit:,}-byte "
            f"cap of {cloud.boot_data_name}: {_INSTEAD}"
        )
    report = ReportTarget("x" * 43, f"http://255.255.255.255:{REPORT_PORT}")
    version = package_version()
    sizes = {
        name: len(
            agent_script(
                config,
                name,
                name == config.head_node_type,
                cloud.node_identity_script,
                node_package(version, name == config.head_node_type, None),
                "255.255.255.255:65535",
                report,
            ).encode()
        )
        for name in config.spec.available_node_types
    }
    name, size = max(sizes.items(), key=lambda item: item[1])
    if size <= cloud.boot_data_limit:
        return None
    packed = len(pack(mounts))
    return (
        f"boot data of node type {name} is {size:,} bytes, over the {cloud.boot_data_limit:,}"
        f"-byte cap of {cloud.boot_data_name} (file_mounts take {packed:,} of them, "
        f"compressed): {_INSTEAD}"
    )


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


def agent_script(
    config: ClusterConfig,
    node_type: str,
    head: bool,
    node_identity_script: str,
    package: str,
    ray_address: str | None = None,
    report: ReportTarget | None = None,
) -> str:
    """The bash script a node of ``node_type`` (the head, or a worker) runs at first boot.

    ``node_identity_script`` (the cloud's) sets ``NODE_ID`` and ``HOST``. A worker's Ray
    joins ``ray_address`` (else the head that ``report`` points at); agents report to the
    head's endpoint when ``report`` says where (else into their own tags)."""
    spec = config.spec
    own = spec.available_node_types[node_type]
    setup = node_setup(spec, node_type, head)
    agent_starts_ray = own.ray_start and not setup.starts_ray
    # The head's monitor serves reports on the head's own address (as a worker reaches it).
    report_url = (
        f'"http://$RAY_HEAD_IP:{REPORT_PORT}"'
        if head
        else report and report.url and shlex.quote(report.url)
    )
    agent = _agent_command(config, agent_starts_ray, report if report_url else None, report_url)
    lines = [
        "#!/bin/bash",
        f"# accel-autoscaler: cluster {_comment(spec.cluster_name)}, node type "
        f"{_comment(node_type)} ({'head' if head else 'worker'})",
        "set -euo pipefail",
        f"mkdir -p {CONFIG_DIR} {MONITOR_STATE}",
        f"exec > >(tee -a {BOOT_LOG}) 2>&1",
        _HELPERS.strip("\n"),
        'log "boot started"',
        node_identity_script.rstrip(),
        f"export RAY_NODE_TYPE_NAME={shlex.quote(node_type)}",
        *_head_address(head, ray_address, report),
        *(own.bootstrap_before or ()),
        *_file_mounts_on_host(setup),
        *_steps("initialization_commands", "host", setup.initialization_commands),
        'log "installing the agent"',
        *install_step(package, agent_starts_ray),
        *_boot_env(setup),
        *_container(setup),
        *_setup_steps(spec, setup, head),
        *(_secret(report.secret) if report is not None and report_url else []),
        *(
            _head_monitor(
                config.head_yaml(), own.ray_start, report, head_port(setup.start_ray_commands)
            )
            if head
            else []
        ),
        'log "starting the agent"',
        f'nohup {agent} --node-id "$NODE_ID" --host "$HOST" >>{AGENT_LOG} 2>&1 &',
        *_start_ray(setup, head),
        *(own.bootstrap_after or ()),
        'log "boot finished"',
    ]
    return "\n".join(lines) + "\n"


def _comment(text: str) -> str:
    return " ".join(str(text).split())


def _agent_command(
    config: ClusterConfig, ray_start: bool, report: ReportTarget | None, report_url: str | None
) -> str:
    """The agent's command line; ``report_url`` is shell text (quoted, may expand)."""
    provider = config.spec.provider.model_dump()
    settings = {k: v for k, v in provider.items() if v is not None and k != "emulator"}
    argv = [
        "autoscale",
        "node",
        "agent",
        "--cluster",
        config.spec.cluster_name,
        "--provider-config",
        json.dumps(settings, sort_keys=True),
    ]
    if ray_start:
        argv.append("--ray-start")
    command = shlex.join(argv)
    if report is not None and report_url:
        command += f" --report-url {report_url} --report-secret-file {SECRET_PATH}"
    return command


def _head_address(head: bool, ray_address: str | None, report: ReportTarget | None) -> list[str]:
    """``RAY_HEAD_IP`` (and, for the agent's own ``ray start``, ``RAY_ADDRESS``)."""
    if head:
        return ["export RAY_HEAD_IP=$(hostname -I | awk '{print $1}')"]
    host = ray_address.rpartition(":")[0] if ray_address else None
    if host is None and report is not None and report.url:
        host = report.url.split("://", 1)[-1].rsplit(":", 1)[0]
    lines = (
        [f"export RAY_HEAD_IP={shlex.quote(host)}"]
        if host
        else ['log "the Ray head\'s address is not known here: RAY_HEAD_IP is not set"']
    )
    if ray_address:
        lines.append(f"export RAY_ADDRESS={shlex.quote(ray_address)}")
    return lines


def _step(name: str, where: str, command: str, env: str = "") -> str:
    return f"{env}run_step {shlex.quote(name)} {where} {shlex.quote(command)}"


def _steps(key: str, where: str, commands: Sequence[str]) -> list[str]:
    return [_step(f"{key}[{i}]", where, command) for i, command in enumerate(commands)]


def _setup_steps(spec: Any, setup: NodeSetup, head: bool) -> list[str]:
    """Setup commands named as the YAML names them (``setup_commands[0]``, then
    ``head_setup_commands[0]`` or ``worker_setup_commands[0]``)."""
    common = len(spec.setup_commands or ())
    role = "head_setup_commands" if head else "worker_setup_commands"
    return _steps("setup_commands", "node", setup.setup_commands[:common]) + _steps(
        role, "node", setup.setup_commands[common:]
    )


def _file_mounts_on_host(setup: NodeSetup) -> list[str]:
    archive = pack(setup.file_mounts)
    if not archive:
        return []
    lines = [
        f'log "file_mounts: {len(setup.file_mounts)} path(s)"',
        f"rm -rf {MOUNTS_DIR} && mkdir -p {MOUNTS_DIR}",
        f"base64 -d <<'ACCEL_FILE_MOUNTS' | tar -xzf - -C {MOUNTS_DIR}",
        *_wrapped(archive),
        "ACCEL_FILE_MOUNTS",
    ]
    lines += [f"place {i} {_host_path(remote)}" for i, remote in enumerate(setup.file_mounts)]
    return lines


def _wrapped(text: str, width: int = 76) -> list[str]:
    """Base64 ``text`` in lines, as ``base64`` writes it."""
    return [text[i : i + width] for i in range(0, len(text), width)]


def _host_path(remote: str) -> str:
    """``remote`` as a shell word, ``~`` expanding to the home of the user running the boot."""
    if remote == "~":
        return "~"
    if remote.startswith("~/"):
        return "~/" + shlex.quote(remote[2:])
    return shlex.quote(remote)


def _boot_env(setup: NodeSetup) -> list[str]:
    """What detection on this host gives the container and ``ray start``."""
    if setup.docker is None and not setup.starts_ray:
        return []
    argv = ["autoscale node boot-env", '--node-id "$NODE_ID"', '--host "$HOST"']
    if setup.docker is not None and not setup.docker.size_shm:
        argv.append("--no-shm")
    if setup.docker is not None and not setup.docker.pass_devices:
        argv.append("--no-devices")
    return [f'eval "$({" ".join(argv)})"']


def _container(setup: NodeSetup) -> list[str]:
    docker = setup.docker
    if docker is None:
        return []
    image, name = shlex.quote(docker.image), shlex.quote(docker.container_name)
    run = (
        f"docker rm -f {name} >/dev/null 2>&1; docker run --rm -d --name {name} --net=host "
        f"$ACCEL_DOCKER_FLAGS -e LC_ALL=C.UTF-8 -e LANG=C.UTF-8 "
        f"{' '.join(docker.run_options)} {image} tail -f /dev/null"
    )
    lines = []
    if docker.pull_before_run:
        lines.append(_step("docker pull", "host", f"docker pull {image}"))
    lines += [
        _step("docker run", "host", run),
        f"ACCEL_CONTAINER={name}",
        'missing=$(docker exec "$ACCEL_CONTAINER" sh -c '
        "'for t in bash python3; do command -v $t >/dev/null || printf \"%s \" $t; done' || true)",
        'if [ -n "$missing" ]; then',
        f'  log "image {_comment(docker.image)} has no ${{missing% }}: setup and Ray start '
        'commands need bash and python3 in the image (they run with sh now)"',
        "  ACCEL_SHELL=sh",
        "fi",
    ]
    lines += [
        f"place_in_container {i} {shlex.quote(remote)}"
        for i, remote in enumerate(setup.file_mounts)
    ]
    return lines


def _start_ray(setup: NodeSetup, head: bool) -> list[str]:
    """The user's Ray start commands, rewritten for our monitor, with the flags detection
    found computed on the host first."""
    key = "head_start_ray_commands" if head else "worker_start_ray_commands"
    lines = ["export RAY_enable_autoscaler_v2=1"] if head and setup.starts_ray else []
    for i, command in enumerate(setup.start_ray_commands):
        text, starts = rewrite_line(command, head, f"ACCEL_RAY_FLAGS_{i}")
        for start in starts:
            argv = ["autoscale", "node", "ray-flags"]
            for name in start.omit:
                argv += ["--omit", name]
            if start.resources is not None:
                argv += ["--resources", json.dumps(dict(start.resources), sort_keys=True)]
            lines += [f"{start.variable}=$({shlex.join(argv)})", f"export {start.variable}"]
            lines += [f"ACCEL_ENV+=({start.variable})"]
        own_labels = "ACCEL_OWN_LABELS=1 " if "--labels" in command else ""
        lines.append(_step(f"{key}[{i}]", "node", text, own_labels))
    return lines


def _secret(secret: str) -> list[str]:
    """The cluster's report secret, readable by root only."""
    return [
        f"mkdir -p {CONFIG_DIR}",
        f"(umask 077 && printf '%s' {shlex.quote(secret)} > {SECRET_PATH})",
    ]


def _head_monitor(
    cluster_yaml: str, ray_start: bool, report: ReportTarget | None, ray_port: int
) -> list[str]:
    """Write the cluster YAML on the head (compressed in the boot data) and run the monitor
    there as a systemd service:
    restarted on failure, resuming from the cloud's tags and its state file."""
    monitor = [f"{CONFIG_DIR}/cluster.yaml"]
    if report is not None:
        monitor += ["--report-port", str(REPORT_PORT), "--report-secret-file", SECRET_PATH]
        monitor += ["--report-address", "$HEAD_IP"]
    if ray_start:
        monitor += ["--ray-address", f"$HEAD_IP:{ray_port}"]
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
        'log "head: cluster YAML and the monitor service"',
        f"mkdir -p {CONFIG_DIR} {MONITOR_STATE} {MONITOR_LOG.rsplit('/', 1)[0]}",
        f"base64 -d <<'{HEREDOC}' | gunzip > {CONFIG_DIR}/cluster.yaml",
        *_wrapped(base64.b64encode(gzip.compress(cluster_yaml.encode(), mtime=0)).decode()),
        HEREDOC,
        "HEAD_IP=$(hostname -I | awk '{print $1}')",
        "AUTOSCALE=$(command -v autoscale)",
        f"cat > /etc/systemd/system/{MONITOR_UNIT}.service <<UNIT",
        *unit,
        "UNIT",
        "systemctl daemon-reload",
        f"systemctl enable --now {MONITOR_UNIT}.service",
    ]
