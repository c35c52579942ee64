"""``autoscale quickstart --ray``: Ray's pending work drives the embedded local cloud.

1. start a local Ray head (127.0.0.1, no Ray autoscaler: we are its autoscaler);
2. ``up`` the quickstart-ray cluster (no head node: it attaches to that Ray head);
3. submit a Ray job whose tasks ask for A100 GPUs and NeuronCores; they pend;
4. run the monitor: nodes launch, join Ray with their detected accelerators, tasks run;
5. Ray reports the nodes idle: the monitor drains them through Ray and retires them;
6. ``down`` and stop the Ray head, leaving nothing running.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import click
import yaml

from autoscaler.cli.quickstart_steps import (
    STEP_TIMEOUT_S,
    only_min_workers_left,
    print_nodes,
    say,
    settle,
)

DEFAULT_CONFIG = "example-clusters/quickstart-ray.yaml"
STEPS = 6
JOB = """
import os, time, ray
ray.init(log_to_driver=False)

@ray.remote(num_gpus=1, accelerator_type="A100")
def train(i):
    time.sleep(2)
    return (f"A100 task {i} on {os.environ.get('RAY_CLOUD_INSTANCE_ID')}: "
            f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')}")

@ray.remote(resources={"neuron_cores": 1})
def infer(i):
    time.sleep(2)
    return (f"NeuronCore task {i} on {os.environ.get('RAY_CLOUD_INSTANCE_ID')}: "
            f"NEURON_RT_VISIBLE_CORES={os.environ.get('NEURON_RT_VISIBLE_CORES')}")

tasks = [train.remote(i) for i in range(4)] + [infer.remote(i) for i in range(2)]
print("\\n".join(ray.get(tasks)), flush=True)
"""


def quickstart_ray(config_path: str) -> None:
    from autoscaler.bring_up import up
    from autoscaler.cli.plan import print_plan
    from autoscaler.cluster import open_cluster, state_path
    from autoscaler.config import load_cluster_config
    from autoscaler.ray_cluster.client import RayCluster
    from autoscaler.ray_cluster.local_head import LocalRayHead
    from autoscaler.teardown import teardown

    started = time.monotonic()
    data = yaml.safe_load(Path(config_path).read_text())
    if not data.get("provider", {}).get("emulator"):
        raise click.UsageError(f"{config_path}: the quickstart needs `provider.emulator: true`")
    work = state_path(data.get("cluster_name", "default")).parent
    work.mkdir(parents=True, exist_ok=True)

    say(1, "start a local Ray head", STEPS)
    head = LocalRayHead(work / "ray-head.log")
    job = None
    cluster = None
    try:
        head.wait_ready()
        click.echo(f"   Ray head at {head.address} (started with --no-monitor)")
        attached = work / "cluster.yaml"
        attached.write_text(yaml.safe_dump({**data, "ray_address": head.address}))
        config = load_cluster_config(attached)
        cluster = open_cluster(config)
        cluster.ray = RayCluster(head.address)

        say(2, f"autoscale up {config_path} (attached to {head.address})", STEPS)
        up(cluster, attached)
        reconciler = cluster.reconciler()

        say(3, "submit a Ray job: 4 tasks x 1 A100 GPU, 2 tasks x 1 NeuronCore", STEPS)
        env = {**os.environ, "RAY_ADDRESS": head.address, "RAY_USAGE_STATS_ENABLED": "0"}
        job = subprocess.Popen(
            [sys.executable, "-c", JOB],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _wait_for_ray_demand(reconciler)
        click.echo("   the tasks pend in Ray; Ray's pending demand, planned:")
        print_plan(reconciler.current_plan(), reconciler.types)

        say(4, "monitor: launch, join Ray, run the job", STEPS)
        settle(reconciler, lambda r: job.poll() is not None)
        out, err = job.communicate()
        if job.returncode != 0:
            raise click.ClickException(f"the Ray job failed: {err.strip()[-500:]}")
        for line in out.strip().splitlines():
            click.echo(f"   {line}")
        print_nodes(reconciler)

        say(5, "Ray reports the nodes idle: drain them through Ray and retire them", STEPS)
        settle(reconciler, lambda r: only_min_workers_left(reconciler, r))
        for event in reversed(cluster.store.events(50)):
            if event.kind == "terminated":
                click.echo(f"   {event.message}")
    finally:
        if job is not None and job.poll() is None:
            job.kill()
            job.wait()
        say(6, "autoscale down; stop the Ray head", STEPS)
        if cluster is not None:
            gone = teardown(cluster)
            cluster.close()
            click.echo(f"   terminated {len(gone)} node(s); local cloud and simulator stopped")
        head.stop()
        click.echo("   Ray head stopped")
    click.echo(f"\nRay quickstart finished in {time.monotonic() - started:.0f}s.")


def _wait_for_ray_demand(reconciler) -> None:
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while not reconciler.observe().ray.demand.bundles:
        if time.monotonic() > deadline:
            raise click.ClickException("Ray reported no pending demand for the job")
        time.sleep(0.5)
