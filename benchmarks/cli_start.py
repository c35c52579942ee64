"""What ``autoscale plan`` costs as a process beyond its planning: CLI start, imports,
config and catalog load. Target on a 2-core machine: at most 0.5 s.

Run: .venv/bin/python benchmarks/cli_start.py [--runs N] [--compare DIR]

Each case is ``autoscale plan CLUSTER --demand DEMAND --json`` (the console script; one
case through ``python -m autoscaler``), run ``--runs`` times after a warm-up run. Printed:
the run with the least overhead, i.e. wall seconds less the planning seconds the command
reports, with its wall and planning seconds, and the least CPU seconds (user + system) of
any run, which a loaded machine disturbs less. Every case runs with the project's bytecode
cached (a private ``PYTHONPYCACHEPREFIX`` filled by the warm-up: what a regular ``pip
install``, or the README's set-up with its ``compileall``, gives) and from source (a copy of
the project's packages without bytecode, ``PYTHONDONTWRITEBYTECODE=1``: an editable install
never byte-compiled, its own modules compiled on every run; installed dependencies keep the
bytecode pip wrote).

``--compare DIR`` also runs the packages of another checkout (e.g. ``git worktree add
/tmp/base main``), alternating run by run with this one, so both see the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
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
PACKAGES = ("accel", "autoscaler", "instance_catalog", "providers")
"""The project's packages (what the uncached case copies without bytecode)."""
GCP_GPU_BUNDLES = [{"GPU": 1, "count": 120}, {"GPU": 8, "count": 4}, {"CPU": 4, "count": 76}]
GCP_TPU_BUNDLES = [{"TPU": 4, "count": 150}, {"TPU": 8, "count": 50}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--compare", type=Path, help="Another checkout to measure alongside.")
    args = parser.parse_args()
    trees = {"this": None, **({"other": args.compare.resolve()} if args.compare else {})}
    with tempfile.TemporaryDirectory(prefix="cli_start_") as folder:
        cases = _cases(Path(folder))
        print(
            f"{'case':<30} {'tree':<5} {'bytecode':<8} {'wall s':>6} {'plan s':>6} "
            f"{'overhead s':>10} {'cpu s':>6}"
        )
        for cached in (True, False):
            envs = {
                name: _environment(Path(folder) / name, cached, tree)
                for name, tree in trees.items()
            }
            for label, argv in cases:
                for name, (overhead, wall, planning, cpu) in _measure(argv, envs, args.runs):
                    print(
                        f"{label:<30} {name:<5} {'cached' if cached else 'source':<8} "
                        f"{wall:>6.3f} {planning:>6.3f} {overhead:>10.3f} {cpu:>6.3f}"
                    )


def _cases(folder: Path) -> list[tuple[str, list[str]]]:
    """(label, argv) per case; the problems are written under ``folder``."""
    cluster, demand = mixed_problem(200, "forced", 0)
    aws_cluster = _write(folder / "aws.yaml", yaml.safe_dump(cluster))
    aws_demand = _write(folder / "aws.json", json.dumps(demand))
    gpu = _write(folder / "gcp_gpu.json", json.dumps({"bundles": _expanded(GCP_GPU_BUNDLES)}))
    tpu = _write(folder / "gcp_tpu.json", json.dumps({"bundles": _expanded(GCP_TPU_BUNDLES)}))
    script = [str(Path(sys.executable).with_name("autoscale")), "plan"]
    module = [sys.executable, "-m", "autoscaler", "plan"]
    return [
        ("aws 200 bundles, 21 types", [*script, aws_cluster, "--demand", aws_demand]),
        ("same, python -m autoscaler", [*module, aws_cluster, "--demand", aws_demand]),
        ("gcp-gpu.yaml, 200 bundles", [*script, str(EXAMPLES / "gcp-gpu.yaml"), "--demand", gpu]),
        ("gcp-tpu.yaml, 200 bundles", [*script, str(EXAMPLES / "gcp-tpu.yaml"), "--demand", tpu]),
    ]


def _expanded(shapes: list[dict]) -> list[dict]:
    return [
        {"resources": {k: v for k, v in shape.items() if k != "count"}, "count": shape["count"]}
        for shape in shapes
    ]


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def _environment(folder: Path, cached: bool, tree: Path | None) -> dict[str, str]:
    """The environment of the runs of ``tree`` (None: this checkout) with its bytecode
    cached under ``folder``, or from a copy of its packages in ``folder`` that has none."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("PYTHONPYCACHEPREFIX", None)
    if cached:
        env["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        source = folder / "source"
        for package in PACKAGES:
            shutil.copytree(
                (tree or HERE.parent) / package,
                source / package,
                ignore=shutil.ignore_patterns("__pycache__"),
            )
        tree = source
    if tree is not None:  # ahead of this checkout's editable install (runs start in /)
        env["PYTHONPATH"] = str(tree)
    return env


def _measure(
    argv: list[str], envs: dict[str, dict[str, str]], runs: int
) -> list[tuple[str, tuple[float, float, float, float]]]:
    """Per environment: (overhead, wall, planning) of the run with the least overhead among
    ``runs`` (after a warm-up run, which fills the bytecode cache where there is one), and
    the least CPU seconds; the environments take turns run by run."""
    best = {name: (float("inf"), 0.0, 0.0) for name in envs}
    cpu = dict.fromkeys(envs, float("inf"))
    for run in range(runs + 1):
        for name, env in envs.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            done = subprocess.run(
                [*argv, "--json"], env=env, cwd=HERE.root, capture_output=True, check=True
            )
            wall = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            planning = json.loads(done.stdout)["planning_seconds"]
            if run:
                best[name] = min(best[name], (wall - planning, wall, planning))
                used = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
                cpu[name] = min(cpu[name], used)
    return [(name, (*best[name], cpu[name])) for name in envs]


if __name__ == "__main__":
    main()
