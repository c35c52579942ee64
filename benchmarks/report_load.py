"""What node reports cost at scale: cloud API calls per second per 1,000 nodes, per channel.

Runs the real agent code (``NodeAgent`` with its publish policy) for N nodes in one process
on a simulated clock, each node's host state scripted by a realistic task pattern: tasks of
varying length arrive at random (some nodes busy with short ``node run`` tasks every few
seconds, some with long jobs, some idle), and every agent steps at its default interval.

* Tags channel: each report is one ``DescribeInstances`` (ownership) plus one ``CreateTags``.
* Monitor channel: each report is one HTTPS POST to the head; no cloud API call.

It then times the monitor's report endpoint on this machine (real HTTP, signed requests,
SQLite) to show it keeps up with the rate the monitor channel produces.

    python benchmarks/report_load.py [--nodes 1000 5000] [--minutes 10]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from autoscaler.agent import INTO_TAGS, TO_THE_MONITOR, NodeAgent, PublishPolicy
from autoscaler.report import NodeReport
from autoscaler.report_channel import http_publisher
from autoscaler.report_server import ReportServer

AGENT_INTERVAL_S = 5.0
CALLS_PER_TAG_REPORT = 2


class ScriptedHost:
    """A host's report over time: tasks arrive and finish; GPUs in use change with them."""

    def __init__(self, rng: random.Random, clock) -> None:
        self.clock = clock
        kind = rng.random()
        if kind < 0.3:  # short `node run` tasks every few seconds
            self.gap, self.length = (1.0, 5.0), (1.0, 4.0)
        elif kind < 0.7:  # long jobs with pauses between them
            self.gap, self.length = (30.0, 600.0), (300.0, 3600.0)
        else:  # mostly idle
            self.gap, self.length = (1800.0, 7200.0), (60.0, 600.0)
        self.rng = rng
        self.busy_until = 0.0
        self.next_start = clock() + rng.uniform(*self.gap)
        self.in_use = 0
        self.idle_since = clock()

    def __call__(self) -> NodeReport:
        now = self.clock()
        if now >= self.busy_until and self.in_use:
            self.in_use, self.idle_since = 0, now
        if now >= self.next_start:
            self.in_use = self.rng.randint(1, 8)
            self.busy_until = now + self.rng.uniform(*self.length)
            self.next_start = self.busy_until + self.rng.uniform(*self.gap)
        free = 8 - self.in_use
        return NodeReport(
            {"CPU": 96.0, "GPU": 8.0},
            {"GPU": 8},
            {"CPU": 96.0, "GPU": float(free)},
            {"GPU": tuple(1.0 if i < free else 0.0 for i in range(8))},
            None if self.in_use else self.idle_since,
            reported_at=now,
        )


def reports_per_second(nodes: int, minutes: float, policy: PublishPolicy) -> float:
    """Reports all agents send per second, on average, over ``minutes``."""
    now = [0.0]
    clock = lambda: now[0]  # noqa: E731
    rng = random.Random(7)
    sent = [0]

    def publish(_report: NodeReport) -> None:
        sent[0] += 1

    agents = []
    with tempfile.TemporaryDirectory() as state:
        for index in range(nodes):
            agent = NodeAgent(publish, None, Path(state) / str(index), clock, policy, "bench")
            agent.report = ScriptedHost(rng, clock)
            agents.append(agent)
        steps = int(minutes * 60 / AGENT_INTERVAL_S)
        for _ in range(steps):
            for agent in agents:
                agent.step()
            now[0] += AGENT_INTERVAL_S
    return sent[0] / (minutes * 60)


def endpoint_capacity(requests: int = 2000, threads: int = 16) -> float:
    """Signed reports per second the monitor's endpoint stores on this machine."""
    with tempfile.TemporaryDirectory() as state:
        server = ReportServer(Path(state) / "state.db", "secret", host="127.0.0.1").start()
        publishers = [http_publisher(server.url, "secret", f"i-{n}") for n in range(threads)]
        report = NodeReport({"CPU": 96.0, "GPU": 8.0}, {"GPU": 8}, reported_at=time.time())
        started = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda n: publishers[n % threads](report), range(requests)))
        elapsed = time.perf_counter() - started
        server.stop()
    return requests / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--minutes", type=float, default=10.0)
    args = parser.parse_args()
    print(f"agents step every {AGENT_INTERVAL_S:g}s; {args.minutes:g} simulated minutes")
    print(
        f"{'nodes':>6} {'channel':>8} {'reports/s':>10} {'cloud calls/s':>14} "
        f"{'per 1,000 nodes':>16} {'HTTP to head/s':>15}"
    )
    for nodes in args.nodes:
        for name, policy in (("tags", INTO_TAGS), ("monitor", TO_THE_MONITOR)):
            rate = reports_per_second(nodes, args.minutes, policy)
            calls = rate * CALLS_PER_TAG_REPORT if policy is INTO_TAGS else 0.0
            http = rate if policy is TO_THE_MONITOR else 0.0
            print(
                f"{nodes:>6} {name:>8} {rate:>10.1f} {calls:>14.2f} "
                f"{calls * 1000 / nodes:>16.2f} {http:>15.1f}"
            )
    print(f"monitor endpoint on this machine: {endpoint_capacity():.0f} signed reports/s stored")


if __name__ == "__main__":
    main()
