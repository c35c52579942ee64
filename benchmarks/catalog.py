"""Catalog load time and `autoscale catalog list` time (both should feel instant).

Run: .venv/bin/python benchmarks/catalog.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

LOAD = (
    "import time; t = time.perf_counter(); "
    "from instance_catalog.catalog import load_catalog; c = load_catalog(); "
    "print(time.perf_counter() - t, len(c.entries()))"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()

    loads, count = [], 0
    for _ in range(args.runs):
        out = subprocess.run([sys.executable, "-c", LOAD], capture_output=True, text=True)
        seconds, count = out.stdout.split()
        loads.append(float(seconds))
    print(
        f"catalog load (in a fresh process, {count} types): "
        f"median {statistics.median(loads) * 1000:.1f} ms, max {max(loads) * 1000:.1f} ms"
    )

    script = Path(sys.executable).with_name("autoscale")
    for argv in (
        ["catalog", "list"],
        ["catalog", "list", "--json"],
        ["catalog", "list", "--accelerator", "a100-80gb:8", "--json"],
        ["catalog", "show", "p4de.24xlarge", "--json"],
    ):
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            subprocess.run([str(script), *argv], check=True, capture_output=True)
            times.append(time.perf_counter() - start)
        print(
            f"autoscale {' '.join(argv):45s} median {statistics.median(times) * 1000:.1f} ms, "
            f"max {max(times) * 1000:.1f} ms (whole process)"
        )


if __name__ == "__main__":
    main()
