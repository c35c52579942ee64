"""The reconcile loop on the embedded cloud.

Run: .venv/bin/python benchmarks/reconcile.py
1. One tick with 1,000 nodes and 20,000 pending bundles: wall time and EC2 API calls.
2. Time from demand to "all nodes reported" for 50 nodes (emulator + node simulator, whose
   boot delay is part of the figure).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from planner_problems import demand, problem

from autoscaler.bring_up import up
from autoscaler.cluster import open_cluster
from autoscaler.config import load_cluster_config
from autoscaler.teardown import teardown
from providers.base import TAG_NODE_KIND, TAG_NODE_TYPE

AMI = "ami-1e749f67"


def main() -> None:
    os.environ.setdefault("AUTOSCALE_STATE_DIR", tempfile.mkdtemp(prefix="bench-"))
    folder = Path(tempfile.mkdtemp(prefix="bench-config-"))
    one_tick(folder)
    demand_to_reported(folder)


def one_tick(folder: Path) -> None:
    cluster_doc, _ = problem(20_000)
    cluster_doc.update(cluster_name="bench-tick", head_node_type=None)
    cluster_doc["provider"]["emulator"] = True
    del cluster_doc["available_node_types"]["head"]
    types = sorted(cluster_doc["available_node_types"])
    for spec in cluster_doc["available_node_types"].values():
        spec["node_config"]["ImageId"] = AMI
    path = folder / "tick.yaml"
    path.write_text(yaml.safe_dump(cluster_doc))
    import random

    bundles = demand(random.Random(1), 20_000, [t.replace("-", ".", 1) for t in types])
    cluster = open_cluster(load_cluster_config(path))
    try:
        for batch in range(10):  # 1,000 existing nodes spread over the types
            node_type = types[batch % len(types)]
            cluster.provider.create_node(
                cluster_doc["available_node_types"][node_type]["node_config"],
                {TAG_NODE_TYPE: node_type, TAG_NODE_KIND: "worker"},
                100,
                f"seed-{batch}",
            )
        cluster.store.set_demand(bundles, time.time())
        calls: Counter[str] = Counter()
        cluster.provider.ec2.meta.events.register(
            "before-call.ec2", lambda model, **_: calls.update([model.name])
        )
        reconciler = cluster.reconciler()
        reconciler.launches_per_tick = 0  # measure sync + plan + act without new launches
        listed = time.perf_counter()
        cluster.provider.nodes()
        listing = time.perf_counter() - listed
        calls.clear()
        start = time.perf_counter()
        result = reconciler.tick()
        spent = time.perf_counter() - start
        print(
            f"one tick, {len(result.nodes)} nodes, 20,000 bundles: {spent:.2f} s, "
            f"{sum(calls.values())} API calls ({dict(calls)}); plan wants "
            f"{sum(launch.count for launch in result.plan.launches)} more units; the "
            f"emulator alone takes {listing:.2f} s to list the 1,000 nodes"
        )
    finally:
        teardown(cluster, timeout_s=600)
        cluster.close()


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
