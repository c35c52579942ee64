"""Ray demand read and planned: one monitor round's Ray work, cloud calls excluded.

Run: .venv/bin/python benchmarks/ray_demand.py [--tasks 10000] [--shapes 50] [--rounds 5]

A local Ray head with no CPUs gets a driver that submits ``--tasks`` tasks of ``--shapes``
distinct resource shapes (GPU counts and accelerator types of example-clusters/aws-gpu.yaml,
fractional GPUs, CPU counts); none can run, so all of them pend. Once Ray reports every one
as pending, each round reads Ray's cluster resource state through the SDK and plans it with
the reconciler (Ray's view as capacity, Ray's demand merged with the recorded demand), as
``monitor`` does; the cloud's node listing is left out. Prints the median round.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autoscaler.cluster import open_cluster  # noqa: E402
from autoscaler.config import load_cluster_config  # noqa: E402
from autoscaler.ray_cluster.client import RayCluster  # noqa: E402
from autoscaler.ray_cluster.local_head import LocalRayHead  # noqa: E402
from autoscaler.reconciler import Observation  # noqa: E402

DRIVER = """
import itertools, sys, ray
ray.init(log_to_driver=False)
tasks, shapes = int(sys.argv[1]), int(sys.argv[2])
kinds = [("A10G", 1), ("L4", 1), ("L40S", 1), ("A100", 8), ("H100", 8)]
options = [
    dict(num_cpus=cpus, num_gpus=gpus, accelerator_type=kind)
    for (kind, most), gpus, cpus in itertools.product(kinds, (0.25, 0.5, 1, 2, 4, 8), (1, 2, 4))
    if gpus <= most
][:shapes]
assert len(options) == shapes, len(options)

@ray.remote
def work():
    return 0

refs = [work.options(**options[i % shapes]).remote() for i in range(tasks)]
print("submitted", len(refs), flush=True)
sys.stdin.read()  # keep the tasks pending until the benchmark is done
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--shapes", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    os.environ["AUTOSCALE_STATE_DIR"] = str(work / "state")
    head = LocalRayHead(work / "head.log", num_cpus=0)
    driver = None
    try:
        head.wait_ready()
        env = {**os.environ, "RAY_ADDRESS": head.address}
        driver = subprocess.Popen(
            [sys.executable, "-c", DRIVER, str(args.tasks), str(args.shapes)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        print(driver.stdout.readline().strip())
        ray = RayCluster(head.address)
        _wait_pending(ray, args.tasks)
        cluster = open_cluster(load_cluster_config(ROOT / "example-clusters" / "aws-gpu.yaml"))
        reconciler = cluster.reconciler()
        times, launches, shapes = [], 0, 0
        for _ in range(args.rounds):
            started = time.perf_counter()
            state = ray.read()
            result = reconciler.current_plan(Observation(views=[], ray=state))
            times.append(time.perf_counter() - started)
            launches = sum(launch.count for launch in result.launches)
            shapes = len(state.demand.bundles)
        cluster.close()
        print(
            f"Ray demand read and planned: {args.tasks:,} pending tasks of {shapes} shapes: "
            f"{statistics.median(times) * 1000:.0f} ms per round (median of {args.rounds}); "
            f"plan launches {launches} nodes"
        )
    finally:
        if driver is not None:
            driver.kill()
            driver.wait()
        head.stop()


def _wait_pending(ray: RayCluster, tasks: int, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        pending = sum(b.count for b in ray.read().demand.bundles)
        if pending >= tasks:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"Ray reports {pending} of {tasks} tasks pending after {timeout_s}s")
        time.sleep(0.5)


if __name__ == "__main__":
    main()
