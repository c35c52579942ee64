"""What both quickstarts (``quickstart.py``, ``quickstart_ray.py``) print and wait on."""

from __future__ import annotations

import click

from autoscaler.cli.output import print_table

TICK_S = 0.5
STEP_TIMEOUT_S = 90.0


def say(step: int, text: str, steps: int = 6) -> None:
    click.secho(f"\n[{step}/{steps}] {text}", bold=True)


def settle(reconciler, done) -> None:
    """Tick until ``done(result)``, printing a round's summary whenever the fleet changes."""
    from autoscaler.monitor import summarize, tick_until

    last = []

    def show(result) -> None:
        summary = summarize(result)
        if not last or summary.fleet() != last[-1]:
            click.echo(f"   {summary.line()}")
            last.append(summary.fleet())

    settled, _ = tick_until(reconciler, done, STEP_TIMEOUT_S, TICK_S, on_round=show)
    if not settled:
        raise click.ClickException("the cluster did not settle in time; see `autoscale status`")


def only_min_workers_left(reconciler, result) -> bool:
    """Every worker type is down to its min_workers."""
    alive: dict[str, int] = {}
    for view in result.nodes:
        if view.kind != "head" and view.state != "terminating":
            alive[view.node_type] = alive.get(view.node_type, 0) + 1
    return all(n <= reconciler.types[t].min_workers for t, n in alive.items())


def print_nodes(reconciler) -> None:
    views = reconciler.observe().views
    rows = []
    for view in sorted(views, key=lambda v: (v.node_type, v.id)):
        report = view.reports.get(0)
        tokens = ", ".join(
            k.split(":", 1)[1]
            for k in (report.resources if report else {})
            if k.startswith("accelerator_type:")
        )
        rows.append((view.id, view.node_type, view.state, tokens or "-", view.kind))
    print_table("Nodes", ["node", "type", "state", "accelerators", "kind"], rows)
