"""``autoscale quickstart``: the whole loop on the embedded local cloud, in about a minute.

1. ``up`` the quickstart cluster (the embedded local cloud, node simulator, CPU head);
2. request demand for A100, L4, CPU and Trainium capacity;
3. run the monitor until every node has booted and reported its accelerators;
4. run a workload on a node through ``autoscale node run``;
5. clear the demand and watch idle nodes retire;
6. ``down``, leaving nothing running.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import click

from autoscaler.cli.quickstart_steps import only_min_workers_left, print_nodes, say, settle

DEFAULT_CONFIG = "example-clusters/quickstart.yaml"
DEMAND = {
    "bundles": [
        {"resources": {"GPU": 1, "accelerator_type:A100": 0.001}, "count": 16},
        {"resources": {"GPU": 0.25, "accelerator_type:L4": 0.001}, "count": 8},
        {"resources": {"CPU": 1}, "count": 200},
        {"resources": {"neuron_cores": 32}, "count": 1},
    ],
    "placement_groups": [],
}


@click.command()
@click.option(
    "--config",
    "config_path",
    help=f"Cluster YAML [default: {DEFAULT_CONFIG}, with --ray example-clusters/"
    "quickstart-ray.yaml].",
    type=click.Path(exists=True, dir_okay=False),
)
@click.option(
    "--ray",
    "with_ray",
    is_flag=True,
    help="Start a local Ray head; a real Ray job's pending tasks drive the cluster.",
)
def quickstart(config_path: str | None, with_ray: bool) -> None:
    """Run the autoscaler end to end on the embedded local cloud (no account needed)."""
    if with_ray:
        from autoscaler.cli.quickstart_ray import DEFAULT_CONFIG as RAY_CONFIG
        from autoscaler.cli.quickstart_ray import quickstart_ray

        quickstart_ray(config_path or RAY_CONFIG)
        return
    config_path = config_path or DEFAULT_CONFIG
    from autoscaler.bring_up import up
    from autoscaler.cli.plan import print_plan
    from autoscaler.cluster import open_cluster
    from autoscaler.config import load_cluster_config
    from autoscaler.monitor import all_reported
    from autoscaler.teardown import teardown

    config = load_cluster_config(Path(config_path))
    if not config.spec.provider.emulator:
        raise click.UsageError(f"{config_path}: the quickstart needs `provider.emulator: true`")
    started = time.monotonic()
    cluster = open_cluster(config)
    try:
        say(1, f"autoscale up {config_path}")
        result = up(cluster, Path(config_path))
        head = result.head.id if result.head else "none"
        url = cluster.provider.provider_config["endpoint_url"]
        click.echo(f"   head node {head}; local cloud at {url}")

        say(2, "request demand: 16 x A100 GPU, 8 x 0.25 L4 GPU, 200 x CPU, 1 x 32 NeuronCores")
        cluster.store.set_demand(DEMAND, cluster.clock())

        reconciler = cluster.reconciler()
        print_plan(reconciler.current_plan(), reconciler.types)

        say(3, "monitor until every node reports its accelerators")
        settle(reconciler, lambda r: bool(r.nodes) and all_reported(r) and not r.plan.launches)
        print_nodes(reconciler)

        say(4, "autoscale node run on an A100 node")
        _run_workload(cluster, reconciler)

        say(5, "clear the demand; idle nodes retire after their idle timeout")
        cluster.store.set_demand({"bundles": [], "placement_groups": []}, cluster.clock())
        settle(reconciler, lambda r: only_min_workers_left(reconciler, r))
        print_nodes(reconciler)
    finally:
        say(6, "autoscale down")
        gone = teardown(cluster)
        cluster.close()
        click.echo(f"   terminated {len(gone)} node(s); local cloud and simulator stopped")
    click.echo(f"\nQuickstart finished in {time.monotonic() - started:.0f}s.")


def _run_workload(cluster, reconciler) -> None:
    from providers.local.simulator import node_environment

    views = [
        v
        for v in reconciler.observe().views
        if v.reports and "accelerator_type:A100" in v.reports[0].resources
    ]
    if not views:
        click.echo("   no A100 node to run on")
        return
    node = views[0]
    argv = [
        sys.executable,
        "-m",
        "autoscaler",
        "node",
        "run",
        "--resources",
        '{"GPU": 2}',
        "--",
        sys.executable,
        "-c",
        "import os; print('CUDA_VISIBLE_DEVICES=' + os.environ['CUDA_VISIBLE_DEVICES'],"
        " 'AUTOSCALE_ASSIGNED=' + os.environ['AUTOSCALE_ASSIGNED'])",
    ]
    env = {**os.environ, **node_environment(cluster.name, node.id)}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    click.echo(f"   on {node.id} ({node.node_type}): {done.stdout.strip() or done.stderr.strip()}")
    click.echo(f"   $ autoscale node run --resources '{json.dumps({'GPU': 2})}' -- <workload>")
