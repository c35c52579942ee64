"""``autoscale plan``: what to launch for a demand, offline (no cloud access)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import click

from autoscaler.cli.output import format_bytes, format_quantity, print_json, print_table

if TYPE_CHECKING:
    from autoscaler.config import ClusterConfig
    from autoscaler.planner.model import Demand, NodeType, Plan, PlanRequest


class InputError(click.ClickException):
    """A problem in the user's config or demand: one line per problem, exit code 2."""

    exit_code = 2


@click.command()
@click.argument("cluster_yaml", type=click.Path(dir_okay=False))
@click.option("--demand", "demand_source", help="Demand JSON file (or inline JSON).")
@click.option("--bundles", help="JSON list of bundles, e.g. '[{\"GPU\": 1}]'.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option(
    "--explain",
    is_flag=True,
    help="Add the accelerator conservation policy, planner notes, warnings, ignored Ray keys.",
)
@click.option(
    "--witness",
    is_flag=True,
    help="Add what every node holds (bundles, devices) and check it (with --json: the proof).",
)
def plan(
    cluster_yaml: str,
    demand_source: str | None,
    bundles: str | None,
    as_json: bool,
    explain: bool,
    witness: bool,
) -> None:
    """Plan the cheapest launches for DEMAND on CLUSTER_YAML's node types."""
    import time

    _import_numpy_without_blas_threads()
    from autoscaler.planner.aliases import canonical_demand
    from autoscaler.planner.model import PlanRequest
    from autoscaler.planner.planner import plan as make_plan

    config, demand = _load(cluster_yaml, demand_source, bundles)
    check_boot_data(config, quiet=as_json)
    node_types = config.node_types()
    demand, alias_notes = canonical_demand(demand, node_types)
    request = PlanRequest(
        node_types=node_types,
        demand=demand,
        existing=config.head_existing_nodes(),
        limits=config.limits(),
    )
    start = time.perf_counter()
    result = make_plan(request, witness)
    seconds = time.perf_counter() - start
    result = replace(result, notes=result.notes + alias_notes)
    problems = _check(request, result) if witness else None
    if as_json:
        data = plan_dict(result, config if explain else None)
        data["planning_seconds"] = round(seconds, 4)
        if witness:
            data["witness"] = dict(result.witness)
            data["witness"]["verified"] = not problems
            data["witness"]["problems"] = problems
        print_json(data)
        return
    print_plan(result, {t.name: t for t in config.node_types()})
    if problems is not None:
        click.echo(
            "Witness: every node's contents check out"
            if not problems
            else "Witness problems:\n" + "\n".join(f"  - {p}" for p in problems)
        )
    if explain:
        _print_explain(result, config)
    elif config.warnings:
        click.echo(f"{len(config.warnings)} config warning(s): see --explain", err=True)


BLAS_THREADS_VAR = "OPENBLAS_NUM_THREADS"


def _import_numpy_without_blas_threads() -> None:
    """Import numpy with its BLAS on one thread, unless numpy is loaded or the user chose.

    numpy's OpenBLAS starts (and spins) a thread per core as it loads, tens of milliseconds
    of a short command on a busy machine; the planner does no BLAS work. The variable is
    read once, at load, and removed again, so nothing this process starts inherits it."""
    import os
    import sys

    if "numpy" in sys.modules or BLAS_THREADS_VAR in os.environ:
        return
    os.environ[BLAS_THREADS_VAR] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        del os.environ[BLAS_THREADS_VAR]


def _load(
    cluster_yaml: str, demand_source: str | None, bundles: str | None
) -> tuple[ClusterConfig, Demand]:
    from autoscaler.config import ConfigError, load_cluster_config
    from autoscaler.demand import DemandError, combine, load_demand, parse_bundles

    try:
        config = load_cluster_config(cluster_yaml)
        parts = [load_demand(demand_source)] if demand_source else []
        parts += [parse_bundles(bundles)] if bundles else []
    except (ConfigError, DemandError) as err:
        raise InputError(str(err)) from None
    return config, combine(*parts)


def check_boot_data(config: ClusterConfig, launching: bool = False, quiet: bool = False) -> None:
    """Say each Ray key not acted on (one warning line each, on stderr, unless ``quiet``:
    ``--json`` has them), and stop when a node's boot data would pass its cloud's cap, or
    (``launching``) lacks a file mount."""
    from autoscaler.bootstrap import boot_data_problem
    from autoscaler.config.file_mounts import missing_mounts

    missing = missing_mounts(config.spec.file_mounts or {})
    if missing and launching:
        raise InputError("\n".join(missing))
    for line in () if quiet else (*config.not_acted_on(), *missing):
        click.echo(f"warning: {line}", err=True)
    problem = boot_data_problem(config)
    if problem:
        raise InputError(problem)


def _check(request: PlanRequest, result: Plan) -> list[str]:
    """The witness checked against the request (deferred units count as launched)."""
    from autoscaler.planner.verify import verify

    launched = result.launch_counts()
    for name, units in result.deferred:
        launched[name] = launched.get(name, 0) + units
    return verify(request, result.witness or {}, launched)


def plan_dict(result: Plan, config: ClusterConfig | None = None) -> dict[str, Any]:
    """The ``--json`` document; ``config`` adds the ``explain`` section."""
    data: dict[str, Any] = {
        "launch": result.launch_counts(),
        "infeasible": [
            {"resources": dict(i.resources), "count": i.count, "reason": i.reason}
            for i in result.infeasible
        ],
        "cost_per_hour": result.cost_per_hour,
        "lower_bound_per_hour": result.lower_bound_per_hour,
        "node_count": result.node_count,
        "node_lower_bound": result.node_lower_bound,
        "work_budget_reached": result.budget_reached,
    }
    if config is not None:
        data["explain"] = {
            "notes": list(result.notes),
            "warnings": list(config.warnings),
            "prices": price_lines(config),
            "ignored_keys": list(config.ignored_keys()),
            "not_acted_on": list(config.not_acted_on()),
        }
    return data


def format_resources(resources: Mapping[str, float]) -> str:
    return ", ".join(
        f"{name}: {format_bytes(q) if name == 'memory' else format_quantity(q)}"
        for name, q in resources.items()
    )


def print_plan(result: Plan, node_types: Mapping[str, NodeType]) -> None:
    """The plan as tables: launches with what they serve, infeasible demand, cost and bound."""
    rows = []
    for launch in result.launches:
        price = node_types[launch.node_type].price
        serves = "; ".join(f"{n} x {{{format_resources(r)}}}" for r, n in launch.serves)
        rows.append(
            (
                launch.node_type,
                launch.count,
                serves or launch.reason,
                None if price is None else f"{price * launch.count:.4f}",
            )
        )
    if rows:
        print_table("Launch", ["node type", "count", "serves", "$/hour"], rows)
    else:
        click.echo("Nothing to launch.")
    if result.infeasible:
        print_table(
            "Infeasible demand",
            ["resources", "count", "reason"],
            [(format_resources(i.resources), i.count, i.reason) for i in result.infeasible],
        )
    for node_type, units in result.deferred:
        click.echo(f"Deferred by limits: {units} x {node_type}")
    if result.placed_on_existing:
        click.echo(f"Placed on existing nodes: {result.placed_on_existing}")
    click.echo(
        f"Total: ${result.cost_per_hour:.4f}/hour; lower bound "
        f"${result.lower_bound_per_hour:.4f}/hour ({_gap_text(result.gap)}); "
        f"{result.node_count} node(s), at least {result.node_lower_bound}"
    )


def _gap_text(gap: float) -> str:
    return f"gap: cost {gap:.1%} above it" if math.isfinite(gap) else "gap: no bound proved"


def _print_explain(result: Plan, config: ClusterConfig) -> None:
    policy = config.spec.accelerator_conservation
    click.echo(
        f"\naccelerator_conservation: {policy} ("
        + (
            "CPU-only work may use room on accelerator nodes that exist or are launched for "
            "accelerator work; no accelerator node is launched for it while a plain type fits"
            if policy == "spare"
            else "CPU-only work stays off accelerator nodes whenever a plain type fits it"
        )
        + "). The lower bounds hold for this policy."
    )
    sections = (
        ("Planner notes", result.notes),
        ("Config warnings", config.warnings),
        ("Catalog prices (source, date)", price_lines(config)),
        ("Ray keys kept but not acted on", config.not_acted_on()),
    )
    for title, lines in sections:
        if lines:
            click.echo(f"\n{title}:")
            for line in lines:
                click.echo(f"  - {line}")


def price_lines(config: ClusterConfig) -> list[str]:
    """Per node type priced from the catalog: the figure planned with, its source and date,
    and a warning when it is older than 90 days, undated or a flagged anomaly."""
    from datetime import datetime, timezone

    from instance_catalog.catalog import UnknownInstanceTypeError, load_catalog
    from instance_catalog.prices import price_line

    today = datetime.now(timezone.utc).date()
    lines = []
    for node_type in config.node_types():
        offering = node_type.offering
        spec = config.spec.available_node_types[node_type.name]
        if offering is None or spec.cost_per_hour is not None:
            continue
        try:
            entry = load_catalog().get(offering.instance_type, config.spec.provider.type)
        except UnknownInstanceTypeError:
            continue
        spot = offering.market == "spot"
        lines.append(f"{node_type.name}: {price_line(entry, offering.region, spot, today)}")
    return lines
