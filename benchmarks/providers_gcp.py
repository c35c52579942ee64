"""The GCE plugin against the fake Compute Engine server: create 100 nodes, then list them.

Run: .venv/bin/python benchmarks/providers_gcp.py   (beside benchmarks/providers_aws.py)
Prints the wall time and the Compute Engine API calls of each step.
"""

from __future__ import annotations

import logging
import time
from collections import Counter

from providers.base import TAG_NODE_TYPE
from providers.gcp.compute.provider import GceNodeProvider
from providers.local.gcp.compute import ComputeCloud
from providers.local.gcp.rest import FakeServer

logger = logging.getLogger("benchmarks.providers_gcp")
CLUSTER = "bench-gcp"
NODE_CONFIG = {"machineType": "n2-standard-8", "availability_zone": ["us-central1-a"]}


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    cloud = ComputeCloud(operation_polls=1)
    with FakeServer(cloud.route) as server:
        settings = {
            "type": "gcp",
            "project_id": "bench",
            "region": "us-central1",
            "endpoint_url": server.url,
            "operation_poll_s": 0.05,
        }
        provider = GceNodeProvider(settings, CLUSTER)
        for label, step in (
            (
                "create 100 nodes",
                lambda: provider.create_node(NODE_CONFIG, {TAG_NODE_TYPE: "cpu"}, 100, "bench-100"),
            ),
            ("list 100 nodes", provider.nodes),
        ):
            cloud.calls.clear()
            start = time.perf_counter()
            step()
            elapsed = time.perf_counter() - start
            calls = Counter(cloud.calls)
            detail = ", ".join(f"{name} {count}" for name, count in sorted(calls.items()))
            logger.info(
                "%-18s %6.2f s  %3d calls (%s)", label, elapsed, sum(calls.values()), detail
            )


if __name__ == "__main__":
    main()
