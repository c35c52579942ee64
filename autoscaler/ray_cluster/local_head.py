"""A Ray head on 127.0.0.1 for the embedded cloud (``quickstart --ray``, tests): started
without Ray's own autoscaler, on free ports, and stopped with everything it started."""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

from autoscaler.ray_cluster.processes import RayProcesses, free_ports

START_TIMEOUT_S = 60.0


class LocalRayHead:
    """``ray start --head`` on 127.0.0.1; ``address`` is its GCS."""

    def __init__(self, log: Path, num_cpus: int = 1, autoscaler_v2: bool = True) -> None:
        self.port, client_port, dashboard_port = free_ports(3)
        self.address = f"127.0.0.1:{self.port}"
        self._processes = RayProcesses()
        argv = [
            str(Path(sys.executable).with_name("ray")),
            "start",
            "--head",
            "--block",
            "--no-monitor",
            f"--port={self.port}",
            f"--num-cpus={num_cpus}",
            "--include-dashboard=false",
            f"--ray-client-server-port={client_port}",
            f"--dashboard-port={dashboard_port}",
        ]
        env = {
            **os.environ,
            # `ray status` shows what we report, and request_resources() reaches us.
            "RAY_enable_autoscaler_v2": "1" if autoscaler_v2 else "0",
            "RAY_USAGE_STATS_ENABLED": "0",
        }
        self._processes.start("head", argv, env, log)

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until the GCS accepts connections; RuntimeError after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), 1.0).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the Ray head on {self.address} did not start") from None
                time.sleep(0.2)

    def stop(self) -> None:
        self._processes.stop_all()
