"""The node simulator of the local cloud: every instance boots from its real boot data.

For each running instance, after a boot delay, the simulator lays out one simulated host per
VM from the catalog entry of its instance type (a p4d.24xlarge gets eight A100-40G GPUs
behind a simulated NVML, a trn1.32xlarge Neuron devices behind a ``neuron-ls``, each host of
a v4-16 slice four TPU chips: ``hosts.py``), reads the instance's boot script back from the
local cloud (``boot_data.py``) and runs it with bash in the host's sandbox (``sandbox.py``:
its own root, ``HOME`` and environment; absolute system paths moved below the root), with
stand-ins first on ``PATH`` only for what cannot run here (``standins/standin.py``: package
installs, ``docker``, ``systemctl``, the metadata service). ``ray start`` is the real Ray. So
the Ray address, setup commands, file mounts, the report secret and the head's monitor
travel exactly as on a VM. What the script prints is the host's console
(``console.log``), which the local cloud's console API returns.

Processes on a host carry ``AUTOSCALE_SIM_HOST`` in their environment; when the instance goes
away, every process that carries its mark is ended and its sandbox removed.

Run as ``python -m providers.local.simulator CLUSTER.yaml``; ``up`` starts it for clusters with
``emulator: true`` and ``down`` stops it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import psutil

from autoscaler.bootstrap import MONITOR_STATE
from autoscaler.config import ClusterConfig, load_cluster_config
from instance_catalog.model import Accelerator, InstanceType
from providers import LOCAL_CLOUD_URL_ENV, background, get_provider
from providers.base import CLOUD_RUNNING, TAG_NODE_TYPE, NodeProvider, ProviderNode
from providers.local.boot_data import boot_data
from providers.local.consoles import console_file
from providers.local.hosts import SimulatedHost, build
from providers.local.sandbox import host_environment, make_root, rewrite_paths, write_standins
from providers.local.servers import CONSOLES
from providers.local_state import cluster_state_dir
from providers.processes import end_processes, processes_with, session_members

logger = logging.getLogger(__name__)

BOOT_DELAY_S = 2.0
INTERVAL_S = 0.5
STOP_TIMEOUT_S = 8.0
STOP_ROUNDS = 5
MIB = 2**20
HOST_MARK = "AUTOSCALE_SIM_HOST"
NODE_STATE_DIR_ENV_VAR = "AUTOSCALE_NODE_STATE_DIR"
LOOPBACK = "127.0.0.1"
CONSOLE_PREFIX = "[local cloud]"


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
            tpu_topology=entry.tpu.topology if entry.tpu else None,
        )
        for host in range(hosts)
    ]


def host_dir(cluster_name: str, node_id: str, host: int = 0) -> Path:
    return console_file(cluster_state_dir(cluster_name) / CONSOLES, node_id, host).parent


def node_environment(cluster_name: str, node_id: str, host: int = 0) -> dict[str, str]:
    """What a process on a simulated host sees (for `autoscale node run` on it)."""
    return _read_env(host_dir(cluster_name, node_id, host) / "env")


class NodeSimulator:
    """Boots every running instance of a cluster from its boot data, and ends what an
    instance started when it goes away."""

    def __init__(
        self,
        config: ClusterConfig,
        provider: NodeProvider,
        boot_delay_s: float = BOOT_DELAY_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.provider = provider
        self.boot_delay_s = boot_delay_s
        self.clock = clock
        self.cluster = config.spec.cluster_name
        self._first_seen: dict[str, float] = {}
        self._booted: dict[str, list[subprocess.Popen]] = {}

    def step(self) -> None:
        now = self.clock()
        running = {node.id: node for node in self.provider.nodes() if node.state == CLOUD_RUNNING}
        for node_id, node in running.items():
            seen = self._first_seen.setdefault(node_id, now)
            if node_id not in self._booted and now - seen >= self.boot_delay_s:
                self._booted[node_id] = self._boot(node)
        self._note_finished_boots()
        gone = set(self._booted) - set(running)
        for node_id in gone:
            end_host_processes(self._marks(node_id))
            del self._booted[node_id]
            self._first_seen.pop(node_id, None)
            shutil.rmtree(host_dir(self.cluster, node_id).parent, ignore_errors=True)

    def _note_finished_boots(self) -> None:
        """A boot script that ended gets its exit status at the end of the console."""
        for node_id, scripts in self._booted.items():
            for host, script in enumerate(scripts):
                if script.returncode is None and script.poll() is not None:
                    console = host_dir(self.cluster, node_id, host) / "console.log"
                    with console.open("a") as out:
                        out.write(f"{CONSOLE_PREFIX} boot script exit {script.returncode}\n")

    def stop_all(self) -> None:
        """End the processes of every host of the cluster, booted by this simulator or an
        earlier one."""
        end_host_processes(f"{cluster_state_dir(self.cluster) / CONSOLES}/")

    def _marks(self, node_id: str) -> str:
        """What every process of the node's hosts carries (unique to this state folder)."""
        return f"{host_dir(self.cluster, node_id).parent}/"

    def _boot(self, node: ProviderNode) -> list[subprocess.Popen]:
        node_type = node.tags.get(TAG_NODE_TYPE, "")
        if node_type not in self.config.spec.available_node_types:
            return []
        offer = self.config.cloud.catalog_offer(
            self.config.launch_config(node_type), self.config.provider_settings()
        )
        if offer is None:
            return []
        booted = []
        for host, simulated in enumerate(
            simulated_hosts(offer.instance_type, node.id, offer.accelerator)
        ):
            booted.append(self._boot_host(node, host, simulated))
        logger.info("booted %s (%s, %d host(s))", node.id, node_type, len(booted))
        return booted

    def _boot_host(
        self, node: ProviderNode, host: int, simulated: SimulatedHost
    ) -> subprocess.Popen:
        base = host_dir(self.cluster, node.id, host)
        root = base / "root"
        ip = _loopback(node, host)
        settings = dict(self.provider.provider_config)
        data = boot_data(settings, node, host, ip)
        devices = build(make_root(root), simulated)
        _share_cluster_state(root, self.cluster)
        path = devices.pop("PATH", os.environ.get("PATH", ""))
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("AUTOSCALE_SIM_")},
            **devices,
            **host_environment(base, root, write_standins(base / "bin"), path),
            HOST_MARK: str(base),
            "AUTOSCALE_SIM_IP": ip,
            "AUTOSCALE_SIM_RAY_TEMP": tempfile.mkdtemp(prefix="accel-ray-"),  # short: sockets
            NODE_STATE_DIR_ENV_VAR: str(base / "state"),
            LOCAL_CLOUD_URL_ENV: str(settings["endpoint_url"]),
            "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_enable_worker_prestart": "0",
        }
        env.pop("RAY_ADDRESS", None)  # the node learns Ray's address from its boot data
        (base / "metadata.json").write_text(json.dumps(data.metadata, indent=1))
        _write_env(base / "env", env)
        script = base / "boot.sh"
        script_text = data.script or "#!/bin/bash\n"
        script.write_text(rewrite_paths(script_text, root))
        with (base / "console.log").open("ab") as console:
            console.write(f"{CONSOLE_PREFIX} boot script: {len(script_text)} bytes\n".encode())
            console.flush()
            booted = subprocess.Popen(
                ["bash", str(script)],
                cwd=root / "root",
                env=env,
                stdout=console,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        _record_session(base, booted.pid)
        return booted


def _record_session(base: Path, pid: int) -> None:
    """The boot script leads a session of its own: note it (with the leader's start time, to
    tell a reused id) so what the host started is found at its end."""
    with contextlib.suppress(psutil.Error):
        (base / "session").write_text(f"{pid} {psutil.Process(pid).create_time()}")


def _share_cluster_state(root: Path, cluster: str) -> None:
    """The host's cluster state folder (where a head's monitor keeps reports, intents and
    events) is this machine's, so `autoscale status` here sees what the head's monitor sees,
    as a user on the head would."""
    state = root / MONITOR_STATE.lstrip("/")
    if not state.is_symlink():
        state.parent.mkdir(parents=True, exist_ok=True)
        state.symlink_to(cluster_state_dir(cluster).parent, target_is_directory=True)


def _loopback(node: ProviderNode, host: int) -> str:
    """The host's address on this machine: the cloud's, where the local cloud hands out
    loopback addresses, else 127.0.0.1."""
    ip = node.hosts[host].internal_ip if host < len(node.hosts) else None
    return ip if ip and ip.startswith("127.") else LOOPBACK


def end_host_processes(*marks: str) -> None:
    """End every process whose ``AUTOSCALE_SIM_HOST`` starts with one of ``marks``; again
    while new ones appear (a process being started as the first ones end, such as the agents
    a starting raylet spawns), up to :data:`STOP_ROUNDS` times."""
    for _ in range(STOP_ROUNDS):
        found = processes_with(HOST_MARK, lambda mark: mark.startswith(marks))
        found += _in_boot_sessions(marks)
        if not found:
            return
        logger.info("ending %d process(es) of %s", len(found), ", ".join(marks))
        end_processes(found, STOP_TIMEOUT_S)
    logger.warning("processes of %s still appearing after %d rounds", marks, STOP_ROUNDS)


def _in_boot_sessions(marks: tuple[str, ...]) -> list[psutil.Process]:
    """The processes still in the sessions the boot scripts under ``marks`` began. A process
    that retitles itself can lose its ``AUTOSCALE_SIM_HOST`` from what the OS shows of its
    environment (setproctitle reuses that memory), but not its session. A session counts
    while its leader is gone (the OS does not reuse an id a session still holds) or is the
    recorded boot script itself."""
    found = []
    for mark in marks:
        for record in [*Path(mark).glob("host-*/session"), *Path(mark).glob("*/host-*/session")]:
            with contextlib.suppress(OSError, ValueError):
                pid, started = record.read_text().split()
                if _still_ours(int(pid), float(started)):
                    found += session_members(int(pid))
    return found


def _still_ours(pid: int, started: float) -> bool:
    try:
        return psutil.Process(pid).create_time() == started
    except psutil.NoSuchProcess:
        return True


def _write_env(path: Path, env: Mapping[str, str]) -> None:
    path.write_text(json.dumps(dict(sorted(env.items())), indent=1))


def _read_env(path: Path) -> dict[str, str]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _record(cluster_name: str) -> Path:
    return cluster_state_dir(cluster_name) / "simulator.json"


def ensure_simulator(config_path: Path, cluster_name: str) -> None:
    """Start the simulator for an emulated cluster unless one is running."""
    argv = [sys.executable, "-m", "providers.local.simulator", str(Path(config_path).resolve())]
    background.ensure(_record(cluster_name), argv, ready=lambda record: True)


def stop_simulator(cluster_name: str) -> bool:
    return background.stop(_record(cluster_name))


def main() -> None:
    parser = argparse.ArgumentParser(description="Boot the instances of a local-cloud cluster.")
    parser.add_argument("config", type=Path)
    parser.add_argument("--interval", type=float, default=INTERVAL_S)
    parser.add_argument("--boot-delay", type=float, default=BOOT_DELAY_S)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    config = load_cluster_config(args.config)
    provider = get_provider(config.provider_settings(), config.spec.cluster_name)
    simulator = NodeSimulator(config, provider, args.boot_delay)
    signal.signal(signal.SIGTERM, _stop)
    try:
        while True:
            try:
                simulator.step()
            except Exception:  # the cloud may be going away during `down`
                logger.warning("simulator round failed", exc_info=True)
            time.sleep(args.interval)
    except _Stopping:
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # let the hosts' processes end
        simulator.stop_all()


class _Stopping(BaseException):
    """SIGTERM arrived: stop at once, even mid-sleep or mid-round (not an ``Exception``,
    so a failing round's handler does not swallow it)."""


def _stop(*_: Any) -> None:
    raise _Stopping


if __name__ == "__main__":
    main()
