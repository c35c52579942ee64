"""The ``docker run`` flags that give a node's container what detection found on its host:
each accelerator family's devices, as its vendor documents passing them through, and shared
memory sized for Ray's object store (as Ray's cluster launcher sizes it).

Runs on the node (``autoscale node docker-flags``), where the devices are.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from accel.node import NodeInventory, host_memory_bytes
from accel.probe import HostProbe


@dataclass(frozen=True)
class PassThrough:
    """How one family's devices reach a container."""

    flags: tuple[str, ...] = ()
    """Flags given as they are."""
    device_globs: tuple[str, ...] = ()
    """Host device paths passed with ``--device``, each that exists."""


PASS_THROUGH: Mapping[str, PassThrough] = {
    # NVIDIA Container Toolkit.
    "nvidia": PassThrough(("--gpus", "all")),
    # ROCm's "Running ROCm Docker containers".
    "amd": PassThrough(
        ("--group-add", "video", "--security-opt", "seccomp=unconfined"),
        ("/dev/kfd", "/dev/dri"),
    ),
    "intel_gpu": PassThrough(device_globs=("/dev/dri",)),
    "metax": PassThrough(device_globs=("/dev/mxcd", "/dev/dri")),
    # AWS Neuron's "Run a container": each /dev/neuronN.
    "neuron": PassThrough(device_globs=("/dev/neuron*",)),
    # Intel Gaudi's "Pull prebuilt containers": the habana runtime mounts every card.
    "gaudi": PassThrough(
        (
            "--runtime=habana",
            "-e",
            "HABANA_VISIBLE_DEVICES=all",
            "-e",
            "OMPI_MCA_btl_vader_single_copy_mechanism=none",
            "--cap-add=sys_nice",
            "--ipc=host",
        )
    ),
    # Cloud TPU's "Run TPU applications in a Docker container": privileged, host network.
    "tpu": PassThrough(("--privileged",)),
    # Ascend's container guide: the NPUs and their managers.
    "ascend": PassThrough(
        device_globs=(
            "/dev/davinci[0-9]*",
            "/dev/davinci_manager",
            "/dev/devmm_svm",
            "/dev/hisi_hdc",
        )
    ),
    "rebellions": PassThrough(device_globs=("/dev/rbln*",)),
    "furiosa": PassThrough(device_globs=("/dev/rngd*", "/dev/npu*")),
    "tenstorrent": PassThrough(device_globs=("/dev/tenstorrent",)),
}
"""Per accelerator family (``accel.families`` names)."""

OBJECT_STORE_SHARE = 0.3
"""Ray's default object store share of memory; ``/dev/shm`` is sized to hold it."""


def device_flags(inventory: NodeInventory, probe: HostProbe) -> list[str]:
    """``docker run`` flags passing through every detected family's devices."""
    flags: list[str] = []
    for detection in inventory.detections:
        way = PASS_THROUGH.get(detection.family)
        if way is None or not detection.devices:
            continue
        flags += way.flags
        for pattern in way.device_globs:
            flags += [f"--device={path}" for path in probe.glob(pattern)]
    return _dedupe(flags)


def _dedupe(flags: list[str]) -> list[str]:
    """``flags`` without a repeated ``--device=`` (two families sharing ``/dev/dri``)."""
    seen: set[str] = set()
    kept = []
    for flag in flags:
        if flag.startswith("--device=") and flag in seen:
            continue
        seen.add(flag)
        kept.append(flag)
    return kept


def shm_flag(probe: HostProbe) -> str:
    """``--shm-size`` holding Ray's object store (a share of the host's memory)."""
    return f"--shm-size={int(host_memory_bytes(probe) * OBJECT_STORE_SHARE)}b"


def docker_flags(inventory: NodeInventory, probe: HostProbe, shm: bool = True) -> list[str]:
    """Every flag the node adds to the user's ``docker run``; ``shm``: unless they size it."""
    return device_flags(inventory, probe) + ([shm_flag(probe)] if shm else [])
