"""The AWS plugin against the embedded EC2 (moto's server): create 100 nodes, list 1,000.

Run: .venv/bin/python benchmarks/providers_aws.py
Prints wall time and the number of EC2 API calls of each step.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections import Counter

from providers import get_provider
from providers.base import TAG_NODE_TYPE
from providers.emulator import stop_emulator

CLUSTER = "bench-aws"


def main() -> None:
    os.environ.setdefault("AUTOSCALE_STATE_DIR", tempfile.mkdtemp(prefix="bench-"))
    provider = get_provider({"type": "aws", "region": "us-east-1", "emulator": True}, CLUSTER)
    calls: Counter[str] = Counter()
    provider.ec2.meta.events.register(
        "before-call.ec2", lambda model, **_: calls.update([model.name])
    )
    ami = provider.ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    node_config = {"InstanceType": "m6i.large", "ImageId": ami}
    try:
        calls.clear()
        start = time.perf_counter()
        provider.create_node(node_config, {TAG_NODE_TYPE: "cpu"}, 100, "bench-100")
        report("create 100 nodes", start, calls)
        for batch in range(9):
            provider.create_node(node_config, {TAG_NODE_TYPE: "cpu"}, 100, f"bench-fill-{batch}")
        calls.clear()
        start = time.perf_counter()
        nodes = provider.nodes()
        report(f"list {len(nodes)} nodes", start, calls)
    finally:
        stop_emulator("aws", CLUSTER)


def report(step: str, start: float, calls: Counter[str]) -> None:
    spent = time.perf_counter() - start
    detail = ", ".join(f"{name} {n}" for name, n in sorted(calls.items()))
    print(f"{step:>20}: {spent:6.2f} s, {sum(calls.values())} API calls ({detail})")


if __name__ == "__main__":
    main()
