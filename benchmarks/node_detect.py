"""Cold-start time of `autoscale node detect --json`, and what its imports cost.

Run: .venv/bin/python benchmarks/node_detect.py [--runs N]
Each run is a fresh process, as on a node booting. The interpreter's own start-up is printed
beside it so the CLI's share is visible.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def summary(samples: list[float]) -> str:
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return (
        f"median {statistics.median(ordered) * 1000:7.1f} ms   min {ordered[0] * 1000:7.1f} ms"
        f"   p90 {p90 * 1000:7.1f} ms"
    )


def slowest_imports(env: dict[str, str], top: int) -> list[tuple[int, str]]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "autoscaler", "node", "detect", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    rows = []
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            _, cumulative, name = (part.strip() for part in line[12:].split("|"))
            if cumulative.isdigit() and not name.startswith(" "):
                rows.append((int(cumulative), name.strip()))
    top_level = [row for row in rows if "." not in row[1]]
    return sorted(top_level, reverse=True)[:top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    env = dict(os.environ)
    script = Path(sys.executable).with_name("autoscale")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "autoscaler"]
    timed([*command, "node", "detect", "--json"], env)  # warm the file cache once

    baseline = [timed([sys.executable, "-c", "pass"], env) for _ in range(args.runs)]
    detect = [timed([*command, "node", "detect", "--json"], env) for _ in range(args.runs)]
    print(f"python -c pass                 {summary(baseline)}")
    print(f"autoscale node detect --json   {summary(detect)}")
    print(
        "CLI share over bare interpreter: "
        f"{(statistics.median(detect) - statistics.median(baseline)) * 1000:.1f} ms"
    )
    print("slowest top-level imports (cumulative us):")
    for micros, name in slowest_imports(env, top=8):
        print(f"  {micros:8d}  {name}")


if __name__ == "__main__":
    main()
