"""The embedded local GCP: one process serving the fake Compute Engine API
(``/compute/v1/...``, :mod:`providers.local.gcp.compute`), the fake Cloud TPU API
(``/v2/...``, :mod:`providers.local.gcp.tpu`) and the fake IAM and Resource Manager
(``/v1/projects/...``, :mod:`providers.local.gcp.iam`) on one port, so one ``endpoint_url``
serves both plugins of a cluster and what ``up`` makes in the project. VMs and TPU nodes
naming a service account the fake IAM lacks are refused.

Run it standalone: ``python -m providers.local.gcp.server --host 127.0.0.1 --port 8470``.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from providers.local.gcp.compute import ComputeCloud
from providers.local.gcp.iam import IamCloud
from providers.local.gcp.rest import FakeServer
from providers.local.gcp.tpu import TpuCloud

logger = logging.getLogger(__name__)


class GcpEmulator(FakeServer):
    """Both fake APIs on one server: ``with GcpEmulator() as emu: emu.url``."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        compute: ComputeCloud | None = None,
        tpu: TpuCloud | None = None,
        iam: IamCloud | None = None,
    ) -> None:
        self.iam = iam or IamCloud()
        self.compute = compute or ComputeCloud()
        self.tpu = tpu or TpuCloud()
        for api in (self.compute, self.tpu):
            if api.service_account_exists is None:
                api.service_account_exists = self.iam.account_exists
        super().__init__(self.route, host, port)

    def route(self, method: str, path: str, query: dict[str, str], body: dict) -> dict:
        if path.startswith("/compute/"):
            return self.compute.route(method, path, query, body)
        if path.startswith("/v1/"):
            return self.iam.route(method, path, query, body)
        return self.tpu.route(method, path, query, body)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Fake Compute Engine and Cloud TPU REST APIs.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8470)
    parser.add_argument("--tpu-create-delay", type=float, default=2.0, help="seconds")
    parser.add_argument("--tpu-delete-delay", type=float, default=1.0, help="seconds")
    parser.add_argument("--consoles", type=Path, help="the simulated hosts' consoles")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    tpu = TpuCloud(create_delay_s=args.tpu_create_delay, delete_delay_s=args.tpu_delete_delay)
    compute = ComputeCloud(consoles=args.consoles)
    emulator = GcpEmulator(args.host, args.port, compute=compute, tpu=tpu)
    logger.info("fake Compute Engine and Cloud TPU APIs listening on %s", emulator.url)
    emulator.serve_forever()


if __name__ == "__main__":
    main()
