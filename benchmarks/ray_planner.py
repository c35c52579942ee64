"""Run Ray's own autoscaler-v2 planner (``ResourceDemandScheduler``) on a cluster YAML and a
demand file, and print its launches as one JSON line: seconds, cost per hour, nodes and the
bundles it left unplaced.

Run: .venv/bin/python benchmarks/ray_planner.py CLUSTER_YAML DEMAND_JSON

The node types are our filled ones (resources and prices from the catalog), without the head
(Ray's head would be a running instance; give ours ``existing=()`` to compare like for like).
Bundles become ``ResourceRequestByCount``; each placement group one ``GangResourceRequest``
(STRICT_SPREAD as an anti-affinity label per group, STRICT_PACK as an affinity label, as
Ray's GCS encodes them). Needs the ``[ray]`` extra.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autoscaler.config import load_cluster_config
from autoscaler.demand import load_demand


def schedule(cluster_path: str, demand_path: str) -> dict:
    from ray.autoscaler.v2.instance_manager.config import NodeTypeConfig
    from ray.autoscaler.v2.scheduler import ResourceDemandScheduler, SchedulingRequest
    from ray.autoscaler.v2.utils import ResourceRequestUtil
    from ray.core.generated.autoscaler_pb2 import GangResourceRequest, ResourceRequestByCount

    logging.getLogger("ray").setLevel(logging.ERROR)
    config = load_cluster_config(cluster_path)
    demand = load_demand(demand_path)
    prices = {}
    configs = {}
    for node_type in config.node_types():
        if node_type.name == config.head_node_type or node_type.hosts != 1:
            continue
        prices[node_type.name] = node_type.price or 0.0
        configs[node_type.name] = NodeTypeConfig(
            name=node_type.name,
            min_worker_nodes=node_type.min_workers,
            max_worker_nodes=node_type.max_workers if node_type.max_workers is not None else 10**6,
            resources={k: float(v) for k, v in node_type.resources.items()},
        )
    requests = [
        ResourceRequestByCount(request=ResourceRequestUtil.make(dict(b.resources)), count=b.count)
        for b in demand.bundles
    ]
    gangs = []
    kinds = ResourceRequestUtil.PlacementConstraintType
    for group_index, group in enumerate(demand.placement_groups):
        for copy in range(group.count):
            label = f"_PG_{group_index}_{copy}"
            constraint = None
            if group.strategy == "STRICT_SPREAD":
                constraint = [(kinds.ANTI_AFFINITY, label, label)]
            elif group.strategy == "STRICT_PACK":
                constraint = [(kinds.AFFINITY, label, label)]
            members = [ResourceRequestUtil.make(dict(b), constraint) for b in group.bundles]
            gangs.append(GangResourceRequest(requests=members))
    request = SchedulingRequest(
        disable_launch_config_check=True,
        node_type_configs=configs,
        max_num_nodes=config.spec.max_workers,
        resource_requests=requests,
        gang_resource_requests=gangs,
    )
    start = time.perf_counter()
    reply = ResourceDemandScheduler().schedule(request)
    seconds = time.perf_counter() - start
    launches: dict[str, int] = {}
    for launch in reply.to_launch:
        launches[launch.instance_type] = launches.get(launch.instance_type, 0) + launch.count
    unplaced = len(reply.infeasible_resource_requests) + sum(
        len(g.requests) for g in reply.infeasible_gang_resource_requests
    )
    return {
        "seconds": seconds,
        "cost_per_hour": sum(prices[name] * n for name, n in launches.items()),
        "nodes": sum(launches.values()),
        "unplaced": unplaced,
        "launch": launches,
    }


if __name__ == "__main__":
    print(json.dumps(schedule(sys.argv[1], sys.argv[2])))
