"""The node simulator of the embedded local cloud.

Emulated instances do not boot. For each running one, after a boot delay, the simulator
lays out a simulated host per VM from the catalog entry of its instance type (a p4d.24xlarge
gets eight A100-40G GPUs behind a simulated NVML, a trn1.32xlarge Neuron devices behind a
``neuron-ls``, each host of a v4-16 slice four TPU chips) and runs the ordinary node agent
against it, reporting through the same provider tags a real node uses. The autoscaler cannot
tell it from a real node except by speed. A node whose type has ``ray_start: true`` also runs a
real Ray worker (``ray start --address=...`` on 127.0.0.1) advertising the simulated host's
resources, so it joins the cluster's Ray cluster (``ray_address``, else ``$RAY_ADDRESS``).

Run as ``python -m autoscaler.simulator CLUSTER.yaml``; ``up`` starts it for emulated clusters
and ``down`` stops it.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from accel.node import detect_node
from accel.probe import HostProbe
from accel.simulated import SimulatedHost, build
from autoscaler.agent import NodeAgent, tag_publisher
from autoscaler.config import ClusterConfig, load_cluster_config
from autoscaler.ray_cluster.join import ray_start
from autoscaler.ray_cluster.processes import RayProcesses
from instance_catalog.model import Accelerator, InstanceType
from providers import background, get_provider
from providers.base import CLOUD_RUNNING, TAG_NODE_TYPE, NodeProvider
from providers.local_state import cluster_state_dir

logger = logging.getLogger(__name__)

BOOT_DELAY_S = 2.0
INTERVAL_S = 0.5
MIB = 2**20


def simulated_hosts(
    entry: InstanceType, node_id: str, accelerator: Accelerator | None = None
) -> list[SimulatedHost]:
    """One simulated host per VM of ``entry`` (a TPU slice has several); ``accelerator``:
    the GPUs attached to it, if not built in (GCE N1)."""
    accelerator = accelerator or entry.accelerator
    hosts = entry.tpu.hosts if entry.tpu else 1
    return [
        SimulatedHost(
            instance_type=entry.name,
            cpus=entry.vcpus,
            memory_bytes=entry.memory_mib * MIB,
            family=accelerator.family if accelerator else None,
            accelerator_type=accelerator.name if accelerator else None,
            devices=math.ceil(accelerator.count) if accelerator else 0,
            device_memory_mib=accelerator.memory_mib if accelerator else None,
            cores_per_device=(accelerator.cores_per_device or 1) if accelerator else 1,
            tpu_pod_type=entry.name if entry.tpu else None,
            tpu_worker_id=host,
            tpu_slice_name=node_id if entry.tpu else None,
        )
        for host in range(hosts)
    ]


def host_dir(cluster_name: str, node_id: str, host: int = 0) -> Path:
    return cluster_state_dir(cluster_name) / "simulated" / node_id / f"host-{host}"


def node_environment(cluster_name: str, node_id: str, host: int = 0) -> dict[str, str]:
    """What a process on a simulated host sees (for `autoscale node run` on it)."""
    base = host_dir(cluster_name, node_id, host)
    env = dict(_read_env(base / "env"))
    env["AUTOSCALE_NODE_STATE_DIR"] = str(base / "state")
    return env


class NodeSimulator:
    """Runs one agent per host of every running emulated instance of a cluster."""

    def __init__(
        self,
        config: ClusterConfig,
        provider: NodeProvider,
        boot_delay_s: float = BOOT_DELAY_S,
        clock: Callable[[], float] = time.time,
        ray_address: str | None = None,
    ) -> None:
        self.config = config
        self.ray_address = ray_address
        self.ray = RayProcesses()
        self.provider = provider
        self.boot_delay_s = boot_delay_s
        self.clock = clock
        self.cluster = config.spec.cluster_name
        self._first_seen: dict[str, float] = {}
        self._agents: dict[str, list[NodeAgent]] = {}

    def step(self) -> None:
        now = self.clock()
        running = {node.id: node for node in self.provider.nodes() if node.state == CLOUD_RUNNING}
        for node_id, node in running.items():
            seen = self._first_seen.setdefault(node_id, now)
            if now - seen < self.boot_delay_s:
                continue
            if node_id not in self._agents:
                self._agents[node_id] = self._boot(node_id, node.tags.get(TAG_NODE_TYPE, ""))
            for agent in self._agents[node_id]:
                agent.step()
        gone = set(self._agents) - set(running)
        self.ray.stop(*gone)
        for node_id in gone:
            del self._agents[node_id]
            self._first_seen.pop(node_id, None)
            shutil.rmtree(host_dir(self.cluster, node_id).parent, ignore_errors=True)

    def _boot(self, node_id: str, node_type: str) -> list[NodeAgent]:
        if node_type not in self.config.spec.available_node_types:
            return []
        offer = self.config.cloud.catalog_offer(
            self.config.launch_config(node_type), self.config.provider_settings()
        )
        if offer is None:
            return []
        agents = []
        for host, simulated in enumerate(
            simulated_hosts(offer.instance_type, node_id, offer.accelerator)
        ):
            base = host_dir(self.cluster, node_id, host)
            env = build(base / "root", simulated)
            _write_env(base / "env", env)
            probe = HostProbe.from_host({**env, "PATH": env.get("PATH", "")})
            agents.append(
                NodeAgent(
                    tag_publisher(self.provider, node_id, host), probe, base / "state", self.clock
                )
            )
            if self.config.spec.available_node_types[node_type].ray_start and self.ray_address:
                self._join_ray(node_id, node_type, host, probe, base)
        logger.info("booted simulated %s (%s, %d host(s))", node_id, node_type, len(agents))
        return agents

    def _join_ray(
        self, node_id: str, node_type: str, host: int, probe: HostProbe, base: Path
    ) -> None:
        """A real Ray worker for this simulated host, on 127.0.0.1."""
        argv, env = ray_start(
            detect_node(probe),
            self.ray_address,
            node_id,
            host,
            node_type,
            ["--block"],
        )
        argv[0] = str(Path(sys.executable).with_name("ray"))
        quiet = {"RAY_enable_worker_prestart": "0", "RAY_USAGE_STATS_ENABLED": "0"}
        self.ray.start(node_id, argv, {**os.environ, **quiet, **env}, base / "ray.log")


def _write_env(path: Path, env: dict[str, str]) -> None:
    path.write_text("".join(f"{key}={value}\n" for key, value in sorted(env.items())))


def _read_env(path: Path) -> dict[str, str]:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    return dict(line.split("=", 1) for line in lines if "=" in line)


def _record(cluster_name: str) -> Path:
    return cluster_state_dir(cluster_name) / "simulator.json"


def ensure_simulator(config_path: Path, cluster_name: str) -> None:
    """Start the simulator for an emulated cluster unless one is running."""
    argv = [sys.executable, "-m", "autoscaler.simulator", str(Path(config_path).resolve())]
    background.ensure(_record(cluster_name), argv, ready=lambda record: True)


def stop_simulator(cluster_name: str) -> bool:
    return background.stop(_record(cluster_name))


def main() -> None:
    parser = argparse.ArgumentParser(description="Simulate the nodes of an emulated cluster.")
    parser.add_argument("config", type=Path)
    parser.add_argument("--interval", type=float, default=INTERVAL_S)
    parser.add_argument("--boot-delay", type=float, default=BOOT_DELAY_S)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    config = load_cluster_config(args.config)
    provider = get_provider(config.provider_settings(), config.spec.cluster_name)
    address = config.spec.ray_address or os.environ.get("RAY_ADDRESS")
    simulator = NodeSimulator(config, provider, args.boot_delay, ray_address=address)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    try:
        while not stopping:
            try:
                simulator.step()
            except Exception:  # the cloud may be going away during `down`
                logger.warning("simulator round failed", exc_info=True)
            time.sleep(args.interval)
    finally:
        simulator.ray.stop_all()


if __name__ == "__main__":
    main()
