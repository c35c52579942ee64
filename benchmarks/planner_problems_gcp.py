"""A GCP planning problem: Cloud TPU slices (one host and several), GCE GPU and CPU types.

``gcp_problem(bundles, seed)`` returns a cluster YAML (as a dict) over 20-60 GCP types (TPU
v2/v4/v5e/v5p/v6e slices, multi-host ones among them; A2, A3 and G2 GPU machines; N1 with T4s;
N2/N2D/C2/C3/E2 CPU machines) and a demand of about ``bundles`` bundles: CPU tasks, fractional
and typed GPU tasks, single-host TPU tasks, whole-slice TPU jobs as Ray asks for them (a
bundle with ``TPU-<slice>-head`` beside per-host ``TPU`` bundles, or a STRICT_SPREAD group
over the slice's hosts), GPU placement groups of every strategy, and a few infeasible bundles.
"""

from __future__ import annotations

import random
from typing import Any

from planner_problems import GIB, INFEASIBLE, SCALES, fitting_types

GCP_INFEASIBLE = [*INFEASIBLE[:2], {"TPU": 8, "accelerator_type:TPU-V4": 0.001}]
"""Bundles no GCP type holds (a v4 host has 4 chips)."""

TPU_SLICES = {  # pod type: hosts (the catalog says the same; used for the demand's shapes)
    "v2-8": 1,
    "v4-8": 1,
    "v4-16": 2,
    "v4-32": 4,
    "v4-64": 8,
    "v5litepod-1": 1,
    "v5litepod-4": 1,
    "v5litepod-8": 1,
    "v5litepod-16": 4,
    "v5litepod-32": 8,
    "v5p-8": 1,
    "v5p-16": 2,
    "v5p-32": 4,
    "v6e-1": 1,
    "v6e-4": 1,
    "v6e-8": 1,
    "v6e-16": 4,
    "v6e-32": 8,
}
TPU_TOKENS = {"v2": "TPU-V2", "v4": "TPU-V4", "v5litepod": "TPU-V5LITEPOD", "v5p": "TPU-V5P"}
TPU_TOKENS["v6e"] = "TPU-V6E"
GPU_MACHINES = {
    "A100": ["a2-highgpu-1g", "a2-highgpu-2g", "a2-highgpu-4g", "a2-highgpu-8g"],
    "A100-80G": ["a2-ultragpu-1g", "a2-ultragpu-8g"],
    "H100": ["a3-highgpu-1g", "a3-highgpu-8g", "a3-megagpu-8g"],
    "L4": ["g2-standard-4", "g2-standard-8", "g2-standard-24", "g2-standard-48", "g2-standard-96"],
}
T4_HOSTS = {"n1-standard-8": 1, "n1-standard-16": 2, "n1-standard-32": 4}
CPU_MACHINES = [
    *(f"n2-standard-{n}" for n in (4, 8, 16, 32, 64)),
    *(f"n2-highcpu-{n}" for n in (8, 16, 32)),
    *(f"n2d-standard-{n}" for n in (8, 32)),
    *(f"c3-standard-{n}" for n in (22, 44, 88)),
    *(f"c2-standard-{n}" for n in (30, 60)),
    *(f"e2-standard-{n}" for n in (8, 16)),
]
REGION = "us-central1"
TPU_ZONES = {
    "v2": (REGION, "us-central1-b"),
    "v4": ("us-central2", "us-central2-b"),
    "v6e": (REGION, "us-central1-b"),
}
"""Generations not sold in the provider's zone: their region and zone."""


def _label(name: str) -> str:
    return name.replace(".", "_").replace("-", "_")


def _tpu_type(slice_type: str) -> dict[str, Any]:
    generation = slice_type.rsplit("-", 1)[0]
    node = {
        "node_config": {"acceleratorType": slice_type, "runtimeVersion": "tpu-ubuntu2204-base"},
        "max_workers": 10_000,
    }
    if generation in TPU_ZONES:
        node["region"], zone = TPU_ZONES[generation]
        node["availability_zone"] = [zone]
    return node


def _machine_type(machine: str, t4s: int = 0) -> dict[str, Any]:
    config: dict[str, Any] = {"machineType": machine}
    if t4s:
        config["guestAccelerators"] = [
            {"acceleratorType": "nvidia-tesla-t4", "acceleratorCount": t4s}
        ]
    return {"node_config": config, "max_workers": 10_000}


def gcp_cluster(rng: random.Random, scale: int) -> tuple[dict[str, Any], list[str]]:
    """20-60 GCP node types (more at larger scales); returns the YAML and the slice types."""
    wanted = min(60, 20 + 10 * SCALES.index(scale) if scale in SCALES else 40)
    slices = rng.sample(sorted(TPU_SLICES), k=min(len(TPU_SLICES), max(6, wanted // 3)))
    for multi in ("v4-16", "v5litepod-16"):  # a multi-host slice of two generations always
        if multi not in slices:
            slices.append(multi)
    gpus = sorted(m for family in GPU_MACHINES.values() for m in family)
    gpus = rng.sample(gpus, k=min(len(gpus), max(6, wanted // 3)))
    for family in GPU_MACHINES.values():
        if not set(family) & set(gpus):
            gpus.append(family[0])
    t4 = rng.sample(sorted(T4_HOSTS), k=rng.randint(1, len(T4_HOSTS)))
    cpus = rng.sample(CPU_MACHINES, k=max(4, min(len(CPU_MACHINES), wanted - len(slices) - 10)))
    available = {f"tpu_{_label(s)}": _tpu_type(s) for s in sorted(slices)}
    available.update({_label(m): _machine_type(m) for m in sorted(gpus)})
    available.update({f"{_label(m)}_t4": _machine_type(m, T4_HOSTS[m]) for m in sorted(t4)})
    available.update({_label(m): _machine_type(m) for m in sorted(cpus)})
    available["head"] = {"node_config": {"machineType": "n2-standard-8"}, "resources": {}}
    doc = {
        "cluster_name": "bench",
        "max_workers": 100_000,
        "provider": {
            "type": "gcp",
            "project_id": "bench",
            "region": REGION,
            "availability_zone": f"{REGION}-a",
        },
        "available_node_types": available,
        "head_node_type": "head",
    }
    return doc, sorted(slices)


def gcp_problem(bundles: int, seed: int = 0) -> tuple[dict[str, Any], dict[str, Any]]:
    rng = random.Random(f"gcp-{seed}-{bundles}")
    cluster_doc, slices = gcp_cluster(rng, bundles)
    fits = fitting_types(cluster_doc)
    families = [*sorted(GPU_MACHINES), "T4"]
    shapes: list[tuple[str, dict[str, float]]] = []
    for cpus, memory in ((1, 0), (2, 8), (4, 16), (8, 32), (16, 64), (0.5, 1)):
        shapes.append(("cpu", {"CPU": cpus, **({"memory": memory * GIB} if memory else {})}))
    for fraction in (0.1, 0.25, 0.5):
        for token in (None, "L4", "T4", "A100"):
            shape = {"GPU": fraction, "CPU": 1}
            if token:
                shape[f"accelerator_type:{token}"] = 0.001
            shapes.append(("fractional", shape))
    for family in families:
        for gpus in (1, 2, 4, 8):
            shape = {"GPU": gpus, "CPU": 2 * gpus, f"accelerator_type:{family}": 0.001}
            shapes.append(("typed", shape))
    for slice_type in slices:
        generation = slice_type.rsplit("-", 1)[0]
        for chips in (1, 4, 8):
            token = {f"accelerator_type:{TPU_TOKENS[generation]}": 0.001}
            shapes.append(("tpu", {"TPU": chips, "CPU": 2, **token}))
        if TPU_SLICES[slice_type] > 1:  # a whole-slice job: the head bundle on host 0
            shapes.append(("tpu", {"TPU": 4, f"TPU-{slice_type}-head": 1}))
    shapes.append(("tpu", {"TPU": 4}))
    shares = {"cpu": 0.4, "fractional": 0.12, "typed": 0.14, "tpu": 0.14}
    weights = [rng.uniform(0.3, 1.7) for _ in shapes]
    totals = {
        c: sum(w for (cls, _), w in zip(shapes, weights, strict=True) if cls == c) for c in shares
    }
    entries = []
    for (cls, resources), weight in zip(shapes, weights, strict=True):
        count = round(bundles * shares[cls] * weight / totals[cls])
        if count > 0 and fits([resources]):
            entries.append({"resources": resources, "count": count})
    groups = []
    for slice_type in slices:  # whole slices as STRICT_SPREAD over their hosts
        hosts = TPU_SLICES[slice_type]
        if hosts > 1:
            members = [{"TPU": 4, f"TPU-{slice_type}-head": 1}] + [{"TPU": 4}] * (hosts - 1)
            count = max(1, round(bundles * 0.08 / len(slices) / hosts))
            groups.append({"strategy": "STRICT_SPREAD", "bundles": members, "count": count})
    for _ in range(rng.randint(8, 20)):  # GPU and CPU groups of every strategy
        strategy = rng.choice(("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"))
        pool = [s for cls, s in shapes if cls in ("cpu", "fractional", "typed")]
        members = [rng.choice(pool) for _ in range(rng.randint(2, 6))]
        if fits(members, strategy):
            count = max(1, round(rng.uniform(0.5, 1.5) * bundles * 0.01 / len(members)))
            groups.append({"strategy": strategy, "bundles": members, "count": count})
    rng.shuffle(entries)
    return cluster_doc, {"bundles": [*entries, *GCP_INFEASIBLE], "placement_groups": groups}
