"""The reconcile loop: how long one round takes, and how soon demand is served.

Run: .venv/bin/python benchmarks/reconcile.py [--skip-boot]
1. One round with 1,000 and with 5,000 nodes and 20,000 pending bundles, on the fake
   Compute Engine server through Google's real client: the round's seconds (first round,
   which records every node, and a steady round), the cloud listing alone and the planner
   alone.
2. A round while a create operation never finishes (default settings): it must not wait.
3. Time from demand to "all nodes reported" for 50 nodes (emulator + node simulator, whose
   boot delay is part of the figure).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import yaml

from autoscaler.bring_up import up
from autoscaler.cluster import open_cluster
from autoscaler.config import load_cluster_config, parse_cluster_config
from autoscaler.reconciler import Reconciler
from autoscaler.state import StateStore
from autoscaler.teardown import teardown
from providers.base import TAG_CLUSTER, TAG_NODE_KIND, TAG_NODE_TYPE
from providers.gcp.provider import GcpNodeProvider
from providers.local.gcp.compute import ComputeCloud
from providers.local.gcp.rest import FakeServer

AMI = "ami-1e749f67"
PROJECT = "bench"
ZONES = ("us-central1-a", "us-central1-b", "us-central1-c")
MACHINES = (
    "n1-standard-1",
    "n1-standard-4",
    "n1-standard-8",
    "n1-standard-16",
    "n2-standard-32",
    "c2-standard-60",
    "g2-standard-4",
    "g2-standard-8",
    "g2-standard-24",
    "g2-standard-48",
    "a2-highgpu-1g",
    "a2-highgpu-8g",
)
BUNDLES = 20_000


def main() -> None:
    os.environ.setdefault("AUTOSCALE_STATE_DIR", tempfile.mkdtemp(prefix="bench-"))
    folder = Path(tempfile.mkdtemp(prefix="bench-config-"))
    for nodes in (1_000, 5_000):
        one_round(folder, nodes)
    stuck_create(folder)
    if "--skip-boot" not in sys.argv:
        demand_to_reported(folder)


def _config(url: str, name: str, **provider):
    return parse_cluster_config(
        {
            "cluster_name": name,
            "max_workers": 100_000,
            "provider": {
                "type": "gcp",
                "project_id": PROJECT,
                "region": "us-central1",
                "availability_zone": list(ZONES),
                "endpoint_url": url,
                **provider,
            },
            "available_node_types": {
                machine: {"node_config": {"machineType": machine}, "max_workers": 50_000}
                for machine in MACHINES
            },
        },
        "bench",
    )


def _demand(bundles: int) -> dict:
    """About ``bundles`` bundles as Ray reports them (shapes with counts): CPU tasks,
    memory-heavy tasks, L4 and A100 GPU tasks, 8-GPU training bundles, a few infeasible."""
    shares = [
        ({"CPU": 1}, 0.25),
        ({"CPU": 2}, 0.15),
        ({"CPU": 4}, 0.15),
        ({"CPU": 2, "memory": 24 * 2**30}, 0.05),
        ({"GPU": 0.5}, 0.1),
        ({"CPU": 2, "GPU": 1, "accelerator_type:L4": 0.001}, 0.15),
        ({"CPU": 4, "GPU": 1, "accelerator_type:A100": 0.001}, 0.1),
        ({"GPU": 8, "accelerator_type:A100": 0.001}, 0.05),
    ]
    entries = [{"resources": r, "count": max(1, round(bundles * share))} for r, share in shares]
    entries += [{"resources": {"GPU": 16}, "count": 1}, {"resources": {"TPU": 4}, "count": 1}]
    groups = [{"strategy": "STRICT_SPREAD", "bundles": [{"GPU": 1, "CPU": 4}] * 4, "count": 50}]
    return {"bundles": entries, "placement_groups": groups}


def one_round(folder: Path, count: int) -> None:
    cloud = ComputeCloud(max_instances=count + 1000)
    name = f"bench{count}"
    for index in range(count):  # existing nodes spread over the CPU types and zones
        machine = MACHINES[index % 4]
        labels = {TAG_CLUSTER: name, TAG_NODE_TYPE: machine, TAG_NODE_KIND: "worker"}
        cloud.put_instance(PROJECT, ZONES[index % len(ZONES)], f"{name}-n{index}", labels)
    with FakeServer(cloud.route) as server:
        config = _config(server.url, name)
        provider = GcpNodeProvider(config.provider_settings(), name)
        store = StateStore(folder / f"{name}.db")
        store.set_demand(_demand(BUNDLES), time.time())
        reconciler = Reconciler(config, provider, store, launches_per_tick=0)
        first = reconciler.tick()
        steady = reconciler.tick()
        listed = time.perf_counter()
        provider.nodes()
        listing = time.perf_counter() - listed
        observation = reconciler.observe()
        planned = time.perf_counter()
        plan = reconciler.current_plan(observation)
        planning = time.perf_counter() - planned
        store.close()
    print(
        f"one round, {len(steady.nodes):,} nodes, {BUNDLES:,} pending bundles: "
        f"{steady.seconds:.2f} s (first round, recording every node: {first.seconds:.2f} s); "
        f"cloud listing alone {listing:.2f} s, planner alone {planning:.2f} s; the plan wants "
        f"{sum(launch.count for launch in plan.launches):,} more units"
    )


def stuck_create(folder: Path) -> None:
    """A create whose operation never finishes, with the default operation settings."""
    cloud = ComputeCloud()
    cloud.hold("bulkInsert")
    with FakeServer(cloud.route) as server:
        config = _config(server.url, "benchstuck")
        provider = GcpNodeProvider(config.provider_settings(), "benchstuck")
        store = StateStore(folder / "stuck.db")
        store.set_demand({"bundles": [{"resources": {"CPU": 6}, "count": 1}]}, time.time())
        reconciler = Reconciler(config, provider, store)
        rounds = [reconciler.tick() for _ in range(3)]
        store.close()
    print(
        "rounds while a create never finishes: "
        + ", ".join(f"{r.seconds:.2f} s" for r in rounds)
        + f"; creates sent: {cloud.calls.get('bulkInsert', 0)}"
    )


def demand_to_reported(folder: Path) -> None:
    path = folder / "fifty.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "cluster_name": "bench-fifty",
                "max_workers": 100,
                "provider": {"type": "aws", "region": "us-east-1", "emulator": True},
                "available_node_types": {
                    "cpu": {
                        "node_config": {"InstanceType": "m6i.2xlarge", "ImageId": AMI},
                        "max_workers": 60,
                    }
                },
            }
        )
    )
    cluster = open_cluster(load_cluster_config(path))
    try:
        up(cluster, path)
        cluster.store.set_demand({"bundles": [{"resources": {"CPU": 8}, "count": 50}]}, time.time())
        reconciler = cluster.reconciler()
        start = time.perf_counter()
        while True:
            result = reconciler.tick()
            if len(result.nodes) >= 50 and all(v.reported for v in result.nodes):
                break
            time.sleep(0.2)
        print(
            f"demand to all 50 nodes reported: {time.perf_counter() - start:.1f} s "
            "(simulated boot delay 2 s)"
        )
    finally:
        teardown(cluster, timeout_s=600)
        cluster.close()


if __name__ == "__main__":
    main()
