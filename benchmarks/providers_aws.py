"""The AWS plugin against moto's HTTP server: create 100 nodes, then list 1,000.

Run: .venv/bin/python benchmarks/providers_aws.py
Prints the wall time and the EC2 API calls (every attempt that went out) of each step.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections import Counter

from moto.server import ThreadedMotoServer

from providers.aws import AwsNodeProvider
from providers.base import TAG_NODE_TYPE

logger = logging.getLogger("benchmarks.providers_aws")
CLUSTER = "bench-aws"
TAGS = {TAG_NODE_TYPE: "cpu"}


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for noisy in ("werkzeug", "botocore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        run(f"http://127.0.0.1:{port}")
    finally:
        server.stop()


def run(url: str) -> None:
    provider = AwsNodeProvider({"type": "aws", "region": "us-east-1", "endpoint_url": url}, CLUSTER)
    calls: Counter[str] = Counter()
    provider.ec2.meta.events.register(
        "before-send.ec2", lambda request, **_: calls.update([_action(request)])
    )
    ami = provider.ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    node_config = {"InstanceType": "m6i.large", "ImageId": ami}

    calls.clear()
    start = time.perf_counter()
    result = provider.create_node(node_config, TAGS, 100, "bench-100")
    report(f"create {len(result.nodes)} nodes", start, calls)

    for batch in range(9):
        provider.create_node(node_config, TAGS, 100, f"bench-fill-{batch}")
    calls.clear()
    start = time.perf_counter()
    nodes = provider.nodes()
    report(f"list {len(nodes)} nodes", start, calls)

    calls.clear()
    start = time.perf_counter()
    provider.set_tags([n.id for n in nodes], {"accel-node-status": "idle"})
    report(f"tag {len(nodes)} nodes", start, calls)


def _action(request) -> str:
    body = request.body.decode() if isinstance(request.body, bytes) else request.body or ""
    return body.partition("Action=")[2].partition("&")[0] or "?"


def report(step: str, start: float, calls: Counter[str]) -> None:
    spent = time.perf_counter() - start
    detail = ", ".join(f"{name} {n}" for name, n in sorted(calls.items()))
    logger.info("%-18s %7.2f s  %3d API calls (%s)", step, spent, sum(calls.values()), detail)


if __name__ == "__main__":
    main()
