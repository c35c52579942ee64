"""``autoscale node``: what this node has, and running workloads on its devices."""

from __future__ import annotations

import json
import math
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from accel.ledger import Lease, NodeLedger

from accel.allocation import AllocationError
from accel.node import (
    InvalidOverrideError,
    NodeInventory,
    apply_overrides,
    detect_node,
    overrides_from_env,
    parse_resources_json,
    ray_start_args,
)
from autoscaler.cli.output import format_bytes, format_quantity, print_json, print_table

ASSIGNED_ENV_VAR = "AUTOSCALE_ASSIGNED"
LEASE_ENV_VAR = "AUTOSCALE_LEASE_ID"
WAIT_POLL_S = 0.2
PR_SET_PDEATHSIG = 1


@click.group()
def node() -> None:
    """Inspect this node's accelerators and run workloads on them."""


def _inventory(resources_json: str | None = None, num_gpus: float | None = None) -> NodeInventory:
    """Detection merged with ``AUTOSCALE_NODE_RESOURCES`` and then the given flags."""
    try:
        overrides = overrides_from_env(os.environ)
        if resources_json is not None:
            overrides.update(parse_resources_json(resources_json, source="--resources"))
        return apply_overrides(detect_node(), overrides, num_gpus=num_gpus)
    except InvalidOverrideError as err:
        raise click.UsageError(str(err)) from err


@node.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--ray-start-args", "print_ray_args", is_flag=True, help="Print `ray start` flags.")
@click.option("--num-gpus", type=click.FloatRange(min=0), help="Override the GPU count.")
@click.option("--resources", "resources_json", help="Override resources, e.g. '{\"TPU\": 4}'.")
def detect(
    as_json: bool, print_ray_args: bool, num_gpus: float | None, resources_json: str | None
) -> None:
    """Detect CPU, memory and every accelerator on this node."""
    inventory = _inventory(resources_json, num_gpus)
    if print_ray_args:
        click.echo(shlex.join(["ray", "start", *ray_start_args(inventory)]))
    elif as_json:
        print_json(inventory.to_dict())
    else:
        _print_inventory(inventory)
    for warning in inventory.warnings:
        click.echo(f"warning: {warning}", err=True)


def _print_inventory(inventory: NodeInventory) -> None:
    print_table(
        "Resources",
        ["resource", "quantity"],
        [
            (name, format_bytes(value) if name == "memory" else format_quantity(value))
            for name, value in inventory.resources.items()
        ],
    )
    for detection in inventory.detections:
        print_table(
            f"{detection.resource}: {detection.count} x {detection.accelerator_type or 'unknown'}"
            f" ({detection.family})",
            ["index", "id", "model", "type", "memory", "uuid"],
            [
                (
                    d.index,
                    d.id,
                    d.model,
                    d.accelerator_type,
                    f"{d.memory_mib} MiB" if d.memory_mib else None,
                    d.uuid,
                )
                for d in detection.devices
            ],
        )
    if not inventory.detections:
        click.echo("No accelerators found.")


@node.command(context_settings={"ignore_unknown_options": True})
@click.option(
    "--resources",
    "request_json",
    default="{}",
    show_default=True,
    help='What the workload needs, e.g. \'{"GPU": 0.5, "CPU": 1}\'.',
)
@click.option(
    "--wait",
    "wait_s",
    type=click.FloatRange(min=0),
    default=0,
    help="Seconds to wait for busy devices to free up (default: fail at once).",
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(request_json: str, wait_s: float, command: tuple[str, ...]) -> None:
    """Run COMMAND with devices from the node-wide ledger (use `--` before COMMAND)."""
    if math.isnan(wait_s):
        raise click.BadParameter("must be a number of seconds, got nan", param_hint="--wait")
    try:
        request = parse_resources_json(request_json, source="--resources")
    except InvalidOverrideError as err:
        raise click.UsageError(str(err)) from err
    from accel.ledger import NodeLedger, default_state_dir

    inventory = _inventory()
    ledger = NodeLedger(default_state_dir(), inventory)
    lease = _acquire(ledger, request, command, wait_s)
    try:
        exit_code = _run_with_lease(inventory, ledger, lease, command)
    finally:
        ledger.release(lease.lease_id)
    sys.exit(exit_code)


def _acquire(
    ledger: NodeLedger, request: Mapping[str, float], command: tuple[str, ...], wait_s: float
) -> Lease:
    from accel.ledger import ProcessRef, ResourcesUnavailableError

    deadline = time.monotonic() + wait_s
    me = ProcessRef.of(os.getpid())
    while True:
        try:
            return ledger.acquire(request, me, command)
        except ResourcesUnavailableError as err:
            if time.monotonic() >= deadline:
                hint = "" if wait_s else " (use --wait SECONDS to wait for it)"
                raise click.ClickException(f"not enough free resources: {err}{hint}") from err
            time.sleep(WAIT_POLL_S)
        except AllocationError as err:
            raise click.UsageError(str(err)) from err


def worker_environment(
    inventory: NodeInventory, lease: Lease, base_env: Mapping[str, str]
) -> dict[str, str]:
    """``base_env`` plus each family's visible-device variables and the assignment."""
    env = dict(base_env)
    assigned = {}
    for resource, grant in lease.grants.items():
        family = inventory.family_for(resource)
        pool = inventory.pools[resource]
        for name, value in family.worker_env(grant.ids, len(pool.ids), base_env).items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        assigned[resource] = {"ids": list(grant.ids), "fraction": grant.fraction}
    env[ASSIGNED_ENV_VAR] = json.dumps(assigned, sort_keys=True)
    env[LEASE_ENV_VAR] = lease.lease_id
    return env


def _run_with_lease(
    inventory: NodeInventory, ledger: NodeLedger, lease: Lease, command: tuple[str, ...]
) -> int:
    from accel.ledger import ProcessRef

    env = worker_environment(inventory, lease, os.environ)
    try:
        child = subprocess.Popen(list(command), env=env, preexec_fn=_dies_with_this_process())
    except FileNotFoundError as err:
        raise click.ClickException(f"command not found: {command[0]}") from err
    except PermissionError as err:
        raise click.ClickException(f"command is not executable: {command[0]}") from err
    ledger.add_holder(lease.lease_id, ProcessRef.of(child.pid))
    forwarded = {
        sig: signal.signal(sig, lambda signum, _frame: child.send_signal(signum))
        for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        return child.wait()
    finally:
        for sig, previous in forwarded.items():
            signal.signal(sig, previous)


def _dies_with_this_process() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child die (SIGKILL) when this process dies (Linux).

    Ray's rule: a worker's process dies with it, so a killed runner frees its devices. The
    child asks the kernel for a parent-death signal, then checks that its parent did not die
    before the request was in place. Elsewhere the ledger still reclaims the lease once every
    holder has exited.
    """
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before fork, not in the child
    parent = os.getpid()

    def set_parent_death_signal() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return set_parent_death_signal


@node.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def status(as_json: bool) -> None:
    """Inventory, live leases and free share of every device."""
    from accel.ledger import NodeLedger, default_state_dir

    inventory = _inventory()
    leases, view = NodeLedger(default_state_dir(), inventory).snapshot()
    free = {name: allocator.free_shares() for name, allocator in view.allocators.items()}
    if as_json:
        print_json(
            {
                **inventory.to_dict(),
                "leases": [lease.to_dict() for lease in leases],
                "free_device_shares": free,
            }
        )
        return
    _print_inventory(inventory)
    print_table(
        "Leases",
        ["lease", "pids", "resources", "devices", "command"],
        [
            (
                lease.lease_id,
                ",".join(str(h.pid) for h in lease.holders),
                json.dumps(lease.resources),
                "; ".join(
                    f"{name} {','.join(g.ids)} x{g.fraction:g}" for name, g in lease.grants.items()
                ),
                shlex.join(lease.command),
            )
            for lease in leases
        ],
    )
    print_table(
        "Free share per device",
        ["resource", "device", "free"],
        [
            (name, device_id, f"{share:g}")
            for name, shares in free.items()
            for device_id, share in shares.items()
        ],
    )


@node.command("boot-env")
@click.option("--node-id", required=True, help="This node's id in the cloud.")
@click.option("--host", type=click.IntRange(min=0), default=0, help="Worker index in a slice.")
@click.option("--no-shm", is_flag=True, help="Leave /dev/shm as the user's options size it.")
@click.option("--no-devices", is_flag=True, help="Pass no accelerators to the container.")
def boot_env(node_id: str, host: int, no_shm: bool, no_devices: bool) -> None:
    """Print, as shell ``export`` lines, what the boot script gives the node's container and
    ``ray start`` from detection: docker flags (accelerators, /dev/shm), the Ray labels and
    the instance id."""
    from accel.probe import HostProbe
    from autoscaler.container import device_flags, shm_flag
    from autoscaler.ray_cluster.join import ray_labels
    from autoscaler.ray_cluster.state import instance_key

    probe = HostProbe.from_host()
    inventory = _inventory()
    flags = ([] if no_devices else device_flags(inventory, probe)) + (
        [] if no_shm else [shm_flag(probe)]
    )
    values = {
        "ACCEL_DOCKER_FLAGS": " ".join(flags),
        "RAY_CLOUD_INSTANCE_ID": instance_key(node_id, host),
        "RAY_OVERRIDE_LABELS": json.dumps(ray_labels(inventory), sort_keys=True),
    }
    for name, value in values.items():
        click.echo(f"export {name}={shlex.quote(value)}")


@node.command("ray-flags")
@click.option("--omit", multiple=True, help="A flag the user's `ray start` sets (e.g. num-gpus).")
@click.option("--resources", "resources_json", help="The user's own --resources, kept over ours.")
def ray_flags(omit: tuple[str, ...], resources_json: str | None) -> None:
    """Print the `ray start` flags detection found (resources, accelerator tokens), less
    those the user's line sets, as words the shell expands safely."""
    from autoscaler.ray_cluster.start_commands import boot_flags

    try:
        resources = parse_resources_json(resources_json, "--resources") if resources_json else None
    except InvalidOverrideError as err:
        raise click.UsageError(str(err)) from err
    click.echo(" ".join(boot_flags(_inventory(), omit, resources)))


@node.command()
@click.option("--cluster", "cluster_name", required=True, help="The cluster this node is in.")
@click.option("--provider-config", "provider_json", required=True, help="The provider section.")
@click.option("--node-id", required=True, help="This node's id in the cloud.")
@click.option("--host", type=click.IntRange(min=0), default=0, help="Worker index in a slice.")
@click.option("--interval", type=click.FloatRange(min=0.1), default=5.0, show_default=True)
@click.option("--once", is_flag=True, help="Report once and exit.")
@click.option("--ray-start", is_flag=True, help="Run `ray start` with the detected resources.")
@click.option("--report-url", help="The monitor's report endpoint (else: the node's own tags).")
@click.option(
    "--report-secret-file",
    type=click.Path(dir_okay=False),
    help="The cluster's report secret (with --report-url).",
)
def agent(
    cluster_name: str,
    provider_json: str,
    node_id: str,
    host: int,
    interval: float,
    once: bool,
    ray_start: bool,
    report_url: str | None,
    report_secret_file: str | None,
) -> None:
    """Report this node's accelerators, leases and idle time to the cluster: to the monitor's
    report endpoint (no cloud API calls), or into the node's own tags."""
    from accel.ledger import default_state_dir
    from accel.probe import HostProbe
    from autoscaler.agent import INTO_TAGS, TO_THE_MONITOR, NodeAgent, tag_publisher, tags_hold

    if report_url:
        from autoscaler.report_channel import http_publisher

        if not report_secret_file:
            raise click.UsageError("--report-url needs --report-secret-file")
        try:
            secret = Path(report_secret_file).read_text().strip()
        except OSError as err:
            raise click.UsageError(f"--report-secret-file: {err.strerror or err}") from None
        publish, policy = http_publisher(report_url, secret, node_id, host), TO_THE_MONITOR
        confirm = None  # the monitor's answer is its receipt
    else:
        from providers import get_provider

        try:
            provider_config = json.loads(provider_json)
        except json.JSONDecodeError as err:
            raise click.UsageError(f"--provider-config: not valid JSON ({err.msg})") from err
        provider = get_provider(provider_config, cluster_name)
        publish, policy = tag_publisher(provider, node_id, host), INTO_TAGS
        confirm = tags_hold(provider, node_id, host)
    probe = HostProbe.from_host()
    reporter = NodeAgent(publish, probe, default_state_dir(), policy=policy, confirm=confirm)
    if ray_start:
        _start_ray(_inventory(), node_id, host)
    if once:
        reporter.step()
        return
    reporter.run(interval)


def _start_ray(inventory: NodeInventory, node_id: str, host: int) -> None:
    """``ray start`` joining ``RAY_ADDRESS`` (or as a head) with the detected resources, as
    node type ``RAY_NODE_TYPE_NAME`` (both set by the boot script)."""
    from autoscaler.ray_cluster.join import ray_start

    argv, env = ray_start(
        inventory,
        os.environ.get("RAY_ADDRESS"),
        node_id,
        host,
        os.environ.get("RAY_NODE_TYPE_NAME", ""),
    )
    done = subprocess.run(argv, env={**os.environ, **env}, check=False)
    if done.returncode != 0:
        raise click.ClickException(f"ray start failed with exit code {done.returncode}")
