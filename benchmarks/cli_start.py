"""What ``autoscale plan`` costs as a process beyond its planning: CLI start, imports,
config and catalog load. Target on a 2-core machine: at most 0.5 s.

Run: .venv/bin/python benchmarks/cli_start.py [--runs N]

Each case is ``autoscale plan CLUSTER --demand DEMAND --json`` (the console script; one
case through ``python -m autoscaler``), run ``--runs`` times; it prints the minimum wall
seconds, the planning seconds the command reports, and their difference, the overhead.
Every case runs twice: with the project's bytecode cached (a private
``PYTHONPYCACHEPREFIX`` filled by a first run, as a regular ``pip install`` compiles it)
and with ``PYTHONDONTWRITEBYTECODE=1`` (an editable install's own sources compiled on every
run; installed dependencies keep the bytecode pip wrote).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from planner_problems import mixed_problem  # noqa: E402

EXAMPLES = HERE.parent / "example-clusters"
GCP_GPU_BUNDLES = [{"GPU": 1, "count": 120}, {"GPU": 8, "count": 4}, {"CPU": 4, "count": 76}]
GCP_TPU_BUNDLES = [{"TPU": 4, "count": 150}, {"TPU": 8, "count": 50}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cli_start_") as folder:
        cases = _cases(Path(folder))
        print(f"{'case':<36} {'bytecode':<9} {'wall s':>6} {'plan s':>6} {'overhead s':>10}")
        for cached in (True, False):
            env = _environment(Path(folder) / "pycache", cached)
            for label, argv in cases:
                wall, planning = _measure(argv, env, args.runs)
                print(
                    f"{label:<36} {'cached' if cached else 'none':<9} {wall:>6.3f} "
                    f"{planning:>6.3f} {wall - planning:>10.3f}"
                )


def _cases(folder: Path) -> list[tuple[str, list[str]]]:
    """(label, argv) per case; the problems are written under ``folder``."""
    cluster, demand = mixed_problem(200, "forced", 0)
    aws_cluster = folder / "aws.yaml"
    aws_cluster.write_text(yaml.safe_dump(cluster))
    aws_demand = _write(folder / "aws.json", demand)
    gpu = _write(folder / "gcp_gpu.json", {"bundles": _expanded(GCP_GPU_BUNDLES)})
    tpu = _write(folder / "gcp_tpu.json", {"bundles": _expanded(GCP_TPU_BUNDLES)})
    script = str(Path(sys.executable).with_name("autoscale"))
    module = [sys.executable, "-m", "autoscaler"]
    plan = ["plan"]
    return [
        ("aws 200 bundles, 21 types", [script, *plan, str(aws_cluster), "--demand", aws_demand]),
        ("aws 200 bundles (python -m)", [*module, *plan, str(aws_cluster), "--demand", aws_demand]),
        (
            "gcp gpu example, 200 bundles",
            [script, *plan, str(EXAMPLES / "gcp-gpu.yaml"), "--demand", gpu],
        ),
        (
            "gcp tpu example, 200 bundles",
            [script, *plan, str(EXAMPLES / "gcp-tpu.yaml"), "--demand", tpu],
        ),
    ]


def _expanded(shapes: list[dict]) -> list[dict]:
    return [
        {"resources": {k: v for k, v in shape.items() if k != "count"}, "count": shape["count"]}
        for shape in shapes
    ]


def _write(path: Path, document: dict) -> str:
    path.write_text(json.dumps(document))
    return str(path)


def _environment(pycache: Path, cached: bool) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("PYTHONPYCACHEPREFIX", None)
    if cached:
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _measure(argv: list[str], env: dict[str, str], runs: int) -> tuple[float, float]:
    """Wall and planning seconds of the run with the least overhead among ``runs`` (after
    one warm-up run, which fills the bytecode cache where there is one)."""
    best = (float("inf"), 0.0, 0.0)
    for run in range(runs + 1):
        start = time.perf_counter()
        done = subprocess.run([*argv, "--json"], env=env, capture_output=True, check=True)
        wall = time.perf_counter() - start
        planning = json.loads(done.stdout)["planning_seconds"]
        if run:
            best = min(best, (wall - planning, wall, planning))
    return best[1], best[2]


if __name__ == "__main__":
    main()
