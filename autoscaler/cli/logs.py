"""``autoscale logs``: a node's console (its boot steps, their commands and exit status)."""

from __future__ import annotations

import click

from autoscaler.cli.cluster import CLUSTER_YAML, _cluster


@click.command()
@CLUSTER_YAML
@click.argument("node_id")
@click.option("--tail", type=click.IntRange(min=1), help="Only the last N lines.")
def logs(cluster_yaml: str, node_id: str, tail: int | None) -> None:
    """Print NODE_ID's console: EC2's console output, the Compute Engine serial port, or in
    the local cloud the simulated host's boot log. Nodes of this cluster only."""
    from autoscaler.node_logs import NodeLogError, node_console

    with _cluster(cluster_yaml, read_only=True) as cluster:
        try:
            text = node_console(cluster, node_id, tail)
        except NodeLogError as err:
            raise click.ClickException(str(err)) from None
    click.echo(text, nl=False)
