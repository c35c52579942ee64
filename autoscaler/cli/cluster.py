"""``autoscale up|request|monitor|status|down``: run a cluster against its cloud."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from autoscaler.cli.output import print_json, print_table
from autoscaler.cli.plan import InputError, check_boot_data, format_resources

if TYPE_CHECKING:
    from autoscaler.cluster import Cluster
    from autoscaler.config import ClusterConfig

CLUSTER_YAML = click.argument("cluster_yaml", type=click.Path(dir_okay=False))
DEFAULT_INTERVAL_S = 5.0
"""Seconds between monitor rounds: a round never waits on the cloud, so this is how soon
new demand is acted on."""


def _config(path: str) -> ClusterConfig:
    from autoscaler.config import ConfigError, load_cluster_config

    try:
        return load_cluster_config(path)
    except ConfigError as err:
        raise InputError(str(err)) from None


def _debug() -> bool:
    ctx = click.get_current_context(silent=True)
    return bool(ctx and ctx.find_root().params.get("debug"))


@contextmanager
def _cluster(path: str, read_only: bool = False) -> Iterator[Cluster]:
    """The opened cluster; cloud and cluster failures end as one message (exit 1).
    ``read_only``: the state file cannot be written (read commands)."""
    from autoscaler.cluster import ClusterError, open_cluster
    from providers import UnknownProviderError
    from providers.background import BackgroundError
    from providers.errors import ProviderError

    config = _config(path)
    try:
        cluster = open_cluster(config, read_only=read_only)
        try:
            yield cluster
        finally:
            cluster.close()
    except (ClusterError, ProviderError, BackgroundError, UnknownProviderError) as err:
        if _debug():
            raise
        raise click.ClickException(str(err)) from None


@contextmanager
def _progress() -> Iterator[Callable[[str], None]]:
    """A spinner with the current step on stderr; silent when stderr is not a terminal."""
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        disable=not console.is_terminal,
        transient=True,
    ) as progress:
        task = progress.add_task("starting", total=None)
        yield lambda text: progress.update(task, description=text)


def _confirm(question: str) -> None:
    """Ask, or refuse without a terminal to ask on."""
    if not sys.stdin.isatty():
        raise click.ClickException(f"{question} Refusing without a terminal: pass --yes")
    click.confirm(question, abort=True)


# up -----------------------------------------------------------------------------------------
@click.command()
@CLUSTER_YAML
@click.option("-y", "--yes", is_flag=True, help="Launch without asking.")
@click.option("--wait", is_flag=True, help="Wait until every node has reported.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=1800.0,
    show_default=True,
    help="Seconds --wait waits.",
)
def up(cluster_yaml: str, yes: bool, wait: bool, timeout: float) -> None:
    """Create or reuse the head node and bring every node type to its min_workers."""
    from autoscaler import bring_up
    from autoscaler.monitor import all_reported, summarize, tick_until
    from autoscaler.status_view import build_status

    check_boot_data(_config(cluster_yaml), launching=True)
    with _cluster(cluster_yaml) as cluster:
        for warning in cluster.config.warnings:
            click.echo(f"warning: {warning}", err=True)
        with _progress() as step:
            step("preflight checks")
            problems = bring_up.preflight(cluster)
            if problems:
                raise click.ClickException(
                    "preflight failed:\n" + "\n".join(f"  - {p}" for p in problems)
                )
            step("planning")
            launches = bring_up.preview(cluster)
        if launches and not yes:
            what = ", ".join(f"{n} x {t}" for t, n in launches.items())
            _confirm(f"Launch {what} for cluster {cluster.name}?")
        with _progress() as step:
            result = bring_up.up(cluster, Path(cluster_yaml), step)
            reported = True
            if wait:
                step("waiting for every node to report")
                reported, _ = tick_until(cluster.reconciler(), all_reported, timeout)
            status = build_status(cluster)
    for resource in result.account:
        what = "created" if resource.created else "reused"
        click.echo(f"{resource.kind} {resource.name}: {what}")
    if result.head is not None:
        click.echo(f"head {result.head.id}: {'created' if result.head_created else 'reused'}")
    click.echo(f"reconcile: {summarize(result.tick).line()}")
    for failure in result.tick.failures:
        click.echo(f"launch failed: {failure}", err=True)
    _print_status(status)
    if not reported:
        waiting = sum(1 for n in status["nodes"] if n["accelerators"] is None)
        raise click.ClickException(f"timed out after {timeout:g}s: {waiting} node(s) not reported")


# request ------------------------------------------------------------------------------------
@click.command()
@CLUSTER_YAML
@click.option("--demand", "demand_source", help="Demand JSON file (or inline JSON).")
@click.option("--bundles", help="JSON list of bundles; '[]' clears the demand.")
def request(cluster_yaml: str, demand_source: str | None, bundles: str | None) -> None:
    """Record the cluster's demand (replacing the previous one)."""
    from autoscaler.cluster import state_path
    from autoscaler.demand import DemandError, load_demand, parse_bundles
    from autoscaler.state import StateStore, demand_body

    if (demand_source is None) == (bundles is None):
        raise click.UsageError("give exactly one of --demand or --bundles")
    config = _config(cluster_yaml)
    try:
        demand = load_demand(demand_source) if demand_source is not None else parse_bundles(bundles)
    except DemandError as err:
        raise InputError(str(err)) from None
    store = StateStore(state_path(config.spec.cluster_name))
    try:
        store.set_demand(demand_body(demand), time.time())
    finally:
        store.close()
    count = sum(b.count for b in demand.bundles)
    groups = sum(g.count for g in demand.placement_groups)
    if count or groups:
        click.echo(
            f"recorded demand of {config.spec.cluster_name}: {count} bundle(s), "
            f"{groups} placement group(s)"
        )
    else:
        click.echo(f"cleared the demand of {config.spec.cluster_name}")


# monitor ------------------------------------------------------------------------------------
@click.command()
@CLUSTER_YAML
@click.option("--once", is_flag=True, help="One reconcile round, then exit.")
@click.option(
    "--interval",
    type=click.FloatRange(min=0),
    default=DEFAULT_INTERVAL_S,
    show_default=True,
    help="Seconds between rounds (Ray's autoscaler reacts within 5).",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    help="Serve Prometheus metrics on 127.0.0.1:PORT.",
)
@click.option(
    "--ray-address",
    envvar="RAY_ADDRESS",
    help="Scale for this Ray cluster (its head's host:port; default $RAY_ADDRESS, then the "
    "YAML's ray_address): its pending work is the demand, its nodes the capacity.",
)
@click.option(
    "--report-port",
    type=click.IntRange(0, 65535),
    help="Serve the nodes' report endpoint on this port (on --report-address when it is "
    "this machine's, else all interfaces).",
)
@click.option(
    "--report-address",
    help="The address launched nodes reach the report endpoint at (with --report-port).",
)
@click.option(
    "--report-secret-file",
    type=click.Path(dir_okay=False),
    help="The cluster's report secret (default: the one `up` made for this cluster).",
)
def monitor(
    cluster_yaml: str,
    once: bool,
    interval: float,
    metrics_port: int | None,
    ray_address: str | None,
    report_port: int | None,
    report_address: str | None,
    report_secret_file: str | None,
) -> None:
    """Run the reconcile loop: one summary line per round; Ctrl-C stops. With
    --report-port it also receives the nodes' reports (the monitor on the head does)."""
    from autoscaler.monitor import InfeasibleWatch, run_rounds, summarize

    infeasible = InfeasibleWatch()

    def report(result, error) -> None:
        if error is not None:
            if once:
                raise click.ClickException(f"round failed: {error}")
            click.echo(f"{_clock(time.time())} round failed: {error}", err=True)
            return
        click.echo(f"{_clock(time.time())} {summarize(result).line()}")
        for line in infeasible.update(result.plan):
            click.echo(f"{_clock(time.time())} {line}")
        if once and result.held:
            raise click.ClickException(
                "; ".join(
                    f"{h.node_type} is held, not replaced: {h.what} "
                    f"(until {_clock(h.held_until)}; see `autoscale status`)"
                    for h in result.held
                )
            )

    with _cluster(cluster_yaml) as cluster:
        cluster.ray = _ray_cluster(ray_address or cluster.config.spec.ray_address)
        if cluster.ray is not None:
            _attach(cluster)
        endpoint = None
        if report_port is not None:
            endpoint, cluster.report = _report_endpoint(
                cluster, report_port, report_address, report_secret_file
            )
        metrics, server = None, None
        if metrics_port is not None:
            from autoscaler.metrics import Metrics

            metrics = Metrics(cluster.config)
            try:
                server = metrics.serve(metrics_port)
            except OSError as err:
                raise click.ClickException(
                    f"cannot serve metrics on 127.0.0.1:{metrics_port}: {err}"
                ) from None
            click.echo(f"metrics on http://127.0.0.1:{metrics_port}/metrics", err=True)
        try:
            run_rounds(
                cluster.reconciler(), interval, report, rounds=1 if once else None, metrics=metrics
            )
        except KeyboardInterrupt:
            click.echo("stopped", err=True)
        finally:
            if server is not None:
                server.shutdown()
            if endpoint is not None:
                endpoint.stop()


def _attach(cluster: Cluster) -> None:
    """Say at start (and record for `status`) when the Ray head drops request_resources()."""
    from autoscaler.ray_cluster.endpoints import ATTACH_EVENT, attach_warning
    from autoscaler.state import Event

    address = cluster.ray.address
    warning = attach_warning(address, cluster.ray.autoscaler_v2())
    if warning:
        click.echo(f"warning: {warning}", err=True)
    data = {"address": address, "warning": warning}
    cluster.store.add_event(
        Event(time.time(), ATTACH_EVENT, f"attached to Ray at {address}", data=data)
    )


def _report_endpoint(cluster, port: int, address: str | None, secret_file: str | None):
    """The report endpoint (started) and where launched nodes reach it."""
    from autoscaler.cluster import state_path
    from autoscaler.report_channel import ReportTarget, bind_host, cluster_secret
    from autoscaler.report_server import ReportServer

    try:
        secret = Path(secret_file).read_text().strip() if secret_file else None
    except OSError as err:
        raise InputError(f"--report-secret-file: {err.strerror or err}") from None
    secret = secret or cluster_secret(cluster.name)
    try:
        endpoint = ReportServer(
            state_path(cluster.name),
            secret,
            host=bind_host(address),
            port=port,
            node_id_of=cluster.provider.cloud.node_id_of,
        ).start()
    except OSError as err:
        raise click.ClickException(f"cannot serve reports on port {port}: {err}") from None
    served = endpoint.url.rsplit(":", 1)[1]
    url = f"http://{address}:{served}" if address else None
    click.echo(f"reports on port {served}" + (f" (nodes send to {url})" if url else ""), err=True)
    return endpoint, ReportTarget(secret, url)


def _ray_cluster(address: str | None):
    """The Ray cluster at ``address`` (None without one); bad input and a missing or too
    old Ray end as one line."""
    if not address:
        return None
    from autoscaler.ray_cluster.address import check_address
    from autoscaler.ray_cluster.client import RayCluster, RaySetupError

    try:
        return RayCluster(check_address(address))
    except ValueError as err:
        raise InputError(f"--ray-address: {err}") from None
    except RaySetupError as err:
        raise click.ClickException(f"--ray-address: {err}") from None


# status -------------------------------------------------------------------------------------
@click.command()
@CLUSTER_YAML
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--events", is_flag=True, help="Add the event log, one line per decision.")
@click.option(
    "--ray-address",
    envvar="RAY_ADDRESS",
    help="Also show this Ray cluster's pending demand and why any of it cannot be served "
    "(its head's host:port; default $RAY_ADDRESS, then the YAML's ray_address).",
)
def status(cluster_yaml: str, as_json: bool, events: bool, ray_address: str | None) -> None:
    """Nodes (listed from the cloud), pending demand (Ray's too) and what is launching for
    it, infeasible demand and why, failures, blocked offerings, cost."""
    from autoscaler.status_view import build_status

    with _cluster(cluster_yaml, read_only=True) as cluster:
        address = ray_address or cluster.config.spec.ray_address
        unusable = None
        try:
            cluster.ray = _ray_cluster(address)
        except InputError:
            raise
        except click.ClickException as err:  # no Ray here: the cloud's view still shows
            unusable = err.message
        data = build_status(cluster, events=events)
        if unusable is not None:
            data["ray"] = {
                **data.get("ray", {}),
                **{"address": address, "error": unusable, "pending": []},
            }
    if as_json:
        print_json(data)
        return
    _print_status(data)
    ray = data.get("ray")
    if ray and ray.get("dashboard"):
        click.echo(f"Ray: {ray['address']} (dashboard {ray['dashboard']})")
        if ray.get("warning"):
            click.echo(f"warning: {ray['warning']}")
    for event in data.get("events", []):
        click.echo(f"{_clock(event['at'])} {event['kind']}: {event['message']}")


def _print_status(data: Mapping[str, Any]) -> None:
    rows = [
        (
            n["id"],
            n["node_type"],
            n["kind"],
            n["state"],
            _accelerators(n["accelerators"]),
            ", ".join(n["internal_ips"]) or None,
            ", ".join(n["external_ips"]) or None,
            _duration(n["idle_seconds"]),
            _duration(n["age_seconds"]),
        )
        for n in data["nodes"]
    ]
    if rows:
        columns = ["id", "type", "kind", "state", "accelerators", "internal IP", "external IP"]
        print_table(f"Nodes of {data['cluster']}", [*columns, "idle", "age"], rows)
    else:
        click.echo(f"Cluster {data['cluster']} has no nodes.")
    not_up = [n for n in data["nodes"] if n.get("reason")]
    if not_up:
        print_table(
            "Nodes not up",
            ["id", "type", "why"],
            [(n["id"], n["node_type"], n["reason"]) for n in not_up],
        )
    if data.get("held_node_types"):
        print_table(
            "Held node types (not launched or replaced: their nodes never came up)",
            ["node type", "why", "last node", "its last console lines", "expires in"],
            [
                (
                    h["node_type"],
                    h["reason"],
                    h["last_node_id"],
                    "\n".join(h["console"][-2:]) or None,
                    _duration(h["expires_in_seconds"]),
                )
                for h in data["held_node_types"]
            ],
        )
    ray = data.get("ray")
    if ray is not None and ray.get("error"):
        click.echo(f"Ray at {ray['address']}: not readable ({ray['error']})")
    elif ray is not None and "pending" in ray:
        print_table(
            f"Ray's pending demand (Ray at {ray['address']})",
            ["shape", "count"],
            [
                (
                    format_resources(p["resources"])
                    if "resources" in p
                    else f"{p['placement_group']}: "
                    + " | ".join(format_resources(b) for b in p["bundles"]),
                    p["count"],
                )
                for p in ray["pending"]
            ]
            or [("(none)", 0)],
        )
    if data["launching"]:
        print_table(
            "Launching (pending capacity for the demand)",
            ["node type", "count", "state", "since"],
            [
                (entry["node_type"], entry["count"], entry["state"], _clock(entry["since"]))
                for entry in data["launching"]
            ],
        )
    if data["pending"]:
        print_table(
            "Pending demand (needs new nodes)",
            ["node type", "count", "reason", "serves"],
            [
                (
                    p["node_type"],
                    p["count"],
                    p["reason"],
                    "; ".join(
                        f"{s['count']} x {{{format_resources(s['resources'])}}}"
                        for s in p["serves"]
                    )
                    or None,
                )
                for p in data["pending"]
            ],
        )
    for deferred in data["deferred"]:
        click.echo(f"Deferred by limits: {deferred['count']} x {deferred['node_type']}")
    if data["infeasible"]:
        print_table(
            "Infeasible demand (nothing is launched for it)",
            ["resources", "count", "reason", "closest node type"],
            [
                (
                    format_resources(i["resources"]),
                    i["count"],
                    i["reason"],
                    i["closest_node_type"],
                )
                for i in data["infeasible"]
            ],
        )
    if data["failures"]:
        print_table(
            "Recent launch failures",
            ["when", "node type", "offering", "code", "message"],
            [
                (_clock(f["at"]), f["node_type"], f["offering"], f["code"], f["message"])
                for f in data["failures"]
            ],
        )
    if data["unavailable_offerings"]:
        print_table(
            "Blocked offerings (no create is sent there until the block ends)",
            ["offering", "kind", "code", "the cloud said", "expires in", "needs"],
            [
                (
                    o["offering"],
                    o["kind"],
                    o["code"],
                    o["message"],
                    _duration(o["expires_in_seconds"]),
                    o["detail"] or None,
                )
                for o in data["unavailable_offerings"]
            ],
        )
    if data["account"]:
        print_table(
            "Account resources",
            ["kind", "name", "id"],
            [(r["kind"], r["name"], r["id"]) for r in data["account"]],
        )
    click.echo(f"Cost now: ${data['cost_per_hour']:.4f}/hour")


def _accelerators(accelerators: Mapping[str, int] | None) -> str | None:
    if accelerators is None:
        return "not reported"
    return ", ".join(f"{name}: {count}" for name, count in accelerators.items()) or None


def _duration(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"


def _clock(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


# down ---------------------------------------------------------------------------------------
@click.command()
@CLUSTER_YAML
@click.option("--keep-head", is_flag=True, help="Leave the head node running.")
@click.option("--purge", is_flag=True, help="Also delete the roles, profiles and groups `up` made.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
def down(cluster_yaml: str, keep_head: bool, purge: bool, yes: bool) -> None:
    """Terminate every node the cluster owns, wait until none is left, clear its state."""
    from autoscaler.teardown import doomed, teardown

    with _cluster(cluster_yaml) as cluster:
        targets = doomed(cluster.provider, keep_head)
        if not yes:
            _confirm(
                f"Terminate {len(targets)} node(s) of cluster {cluster.name} and clear its state?"
            )
        with _progress() as step:
            step(f"terminating {len(targets)} node(s)")
            terminated = teardown(cluster, keep_head, purge)
    click.echo(
        f"cluster {cluster.name}: terminated {len(terminated)} node(s)"
        + ("; the head node is kept" if keep_head else "")
    )
