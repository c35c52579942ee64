"""Planner speed and quality on forced and flexible problems, 200 to 100,000 bundles, beside
Ray's own planner.

Run: .venv/bin/python benchmarks/planner.py [--scales 200,2000] [--kinds forced,flexible]
     [--repeat 3] [--ray-timeout 300] [--no-ray]

Per problem it prints: bundles, node types, time of the whole `autoscale plan --json` process
and of the planner alone, cost per hour, the lower bound (valid for the policy in force,
``spare`` by default), gap, nodes, the lower bound on nodes, and feasible bundles left
unplaced (must be 0). With Ray installed (the ``[ray]`` extra), Ray 2.60's autoscaler-v2
planner runs on the same node types and demand (``benchmarks/ray_planner.py``, in a
subprocess, uncapped unless it runs past ``--ray-timeout``), and its cost, nodes and
unplaced bundles are printed beside ours, with ``floor@Ray``: how much more than our bound
any plan launching no more nodes than Ray's must cost (our planner's bound with max_workers
at Ray's node count). For a like-for-like comparison our planner is
given the same input as Ray (no head capacity); the process time is for the CLI with the
head. Targets on a 2-core machine: 20,000 bundles under 0.5 s and 100,000 under 2 s of
planner time, cost within 3% of the bound, nodes within 1.5x of the node bound.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from planner_problems import PROBLEM_KINDS, SCALES, bundle_count, mixed_problem

from autoscaler.config import load_cluster_config
from autoscaler.demand import load_demand
from autoscaler.planner import PlanRequest, plan

LIMIT_REASONS = ("limited by", "STRICT_SPREAD", "every fitting")
HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", default=",".join(str(s) for s in SCALES))
    parser.add_argument("--kinds", default=",".join(PROBLEM_KINDS))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ray-timeout", type=float, default=300.0)
    parser.add_argument("--ray-max-bundles", type=int, default=20_000)
    parser.add_argument("--no-ray", action="store_true")
    args = parser.parse_args()
    ray = not args.no_ray and _have_ray()
    print(
        f"{'problem':>9} {'bundles':>7} {'types':>5} {'proc s':>6} {'plan s':>6} "
        f"{'$/hour':>10} {'bound':>10} {'gap':>6} {'nodes':>6} {'n.bnd':>6} {'unpl':>4} | "
        f"{'Ray $/h':>10} {'Ray nodes':>9} {'Ray unpl':>8} {'Ray s':>7} {'vs Ray':>7} "
        f"{'floor@Ray':>9}"
    )
    for kind in args.kinds.split(","):
        for scale in (int(s) for s in args.scales.split(",")):
            run_problem(kind, scale, args, ray)
    if not ray:
        print("Ray is not installed (or --no-ray): its planner was not run for comparison.")


def _have_ray() -> bool:
    try:
        import ray.autoscaler.v2.scheduler  # noqa: F401
    except ImportError:
        return False
    return True


def run_problem(kind: str, scale: int, args: argparse.Namespace, ray: bool) -> None:
    cluster_doc, demand_doc = mixed_problem(scale, kind, args.seed)
    with tempfile.TemporaryDirectory() as folder:
        cluster_path = Path(folder) / "cluster.yaml"
        demand_path = Path(folder) / "demand.json"
        cluster_path.write_text(yaml.safe_dump(cluster_doc))
        demand_path.write_text(json.dumps(demand_doc))
        config = load_cluster_config(cluster_path)
        request = PlanRequest(
            node_types=config.node_types(),
            demand=load_demand(demand_path),
            existing=(),
            limits=config.limits(),
        )
        planner_times, result = [], None
        for _ in range(args.repeat):
            start = time.perf_counter()
            result = plan(request)
            planner_times.append(time.perf_counter() - start)
        process_times = []
        for _ in range(args.repeat):
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
        theirs = None
        if ray and scale > args.ray_max_bundles:
            theirs = {"skipped": f"Ray not run above {args.ray_max_bundles} bundles (minutes)"}
        elif ray:
            theirs = _ray(cluster_path, demand_path, args.ray_timeout)
    unplaced = sum(i.count for i in result.infeasible if i.reason.startswith(LIMIT_REASONS))
    line = (
        f"{kind:>9} {bundle_count(demand_doc):>7} {len(request.node_types):>5} "
        f"{statistics.median(process_times):>6.3f} {statistics.median(planner_times):>6.3f} "
        f"{result.cost_per_hour:>10.2f} {result.lower_bound_per_hour:>10.2f} "
        f"{result.gap * 100:>5.2f}% {result.node_count:>6} {result.node_lower_bound:>6} "
        f"{unplaced:>4} | "
    )
    if theirs is None:
        line += "(Ray not run)"
    elif "skipped" in theirs:
        line += theirs["skipped"]
    else:
        versus = result.cost_per_hour / theirs["cost_per_hour"] - 1
        floor = _floor_at(request, theirs["nodes"]) / result.lower_bound_per_hour - 1
        line += (
            f"{theirs['cost_per_hour']:>10.2f} {theirs['nodes']:>9} {theirs['unplaced']:>8} "
            f"{theirs['seconds']:>7.2f} {versus * 100:>+6.1f}% {floor * 100:>+8.1f}%"
        )
    print(line, flush=True)


def _floor_at(request: PlanRequest, nodes: int) -> float:
    """A lower bound on the cost of any plan launching at most ``nodes`` nodes: our planner's
    bound with max_workers set to that count (valid whether or not it places everything)."""
    limits = replace(request.limits, max_workers=nodes, upscaling_speed=None)
    return plan(replace(request, limits=limits)).lower_bound_per_hour


def _ray(cluster_path: Path, demand_path: Path, timeout: float) -> dict:
    try:
        done = subprocess.run(
            [sys.executable, str(HERE / "ray_planner.py"), str(cluster_path), str(demand_path)],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"skipped": f"Ray's planner did not finish within {timeout:g} s (skipped)"}
    if done.returncode != 0:
        return {"skipped": f"Ray's planner failed: {done.stderr.strip().splitlines()[-1:]}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
