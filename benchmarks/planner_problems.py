"""Deterministic, realistic planning problems over real EC2 node types.

``problem(bundles, seed)`` returns a Ray-style cluster YAML (as a dict) and a demand file (as
a dict) with a mix of CPU tasks, fractional GPU tasks, typed GPU tasks, 8-GPU training
bundles, Neuron tasks, STRICT_SPREAD gangs and a few infeasible bundles. The node types are
drawn from CPU, T4/A10G/L4/L40S/A100/H100 GPU, Trainium and Inferentia families (20 to 60
types depending on the seed and scale).
"""

from __future__ import annotations

import random
from typing import Any

CPU_TYPES = [
    f"{family}.{size}"
    for family in ("m6i", "c6i", "r6i", "m7i", "c7i")
    for size in ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")
]
GPU_TYPES = {
    "T4": ["g4dn.xlarge", "g4dn.2xlarge", "g4dn.4xlarge", "g4dn.12xlarge", "g4dn.metal"],
    "A10G": ["g5.xlarge", "g5.2xlarge", "g5.4xlarge", "g5.12xlarge", "g5.48xlarge"],
    "L4": ["g6.xlarge", "g6.2xlarge", "g6.4xlarge", "g6.12xlarge", "g6.48xlarge"],
    "L40S": ["g6e.xlarge", "g6e.2xlarge", "g6e.12xlarge", "g6e.48xlarge"],
    "A100": ["p4d.24xlarge", "p4de.24xlarge"],
    "H100": ["p5.48xlarge", "p5.4xlarge"],
}
NEURON_TYPES = [
    "trn1.2xlarge",
    "trn1.32xlarge",
    "inf2.xlarge",
    "inf2.8xlarge",
    "inf2.24xlarge",
    "inf2.48xlarge",
]
SCALES = (200, 2_000, 20_000, 100_000)
INFEASIBLE = [{"GPU": 64}, {"CPU": 1, "accelerator_type:H1000": 0.001}, {"TPU": 4}]
"""Bundles no node type of any generated cluster holds (every problem ends with them)."""


def node_types(rng: random.Random, scale: int, wanted: int | None = None) -> list[str]:
    """20 to 60 EC2 types: always some of each family, more at larger scales (``wanted``:
    that many, topped up with the CPU types not drawn, up to all 59 listed)."""
    asked = wanted
    if wanted is None:
        wanted = min(60, 20 + 10 * SCALES.index(scale) if scale in SCALES else 40)
    cpu = rng.sample(CPU_TYPES, k=min(len(CPU_TYPES), max(6, wanted // 3)))
    gpu = [t for family in GPU_TYPES.values() for t in family]
    gpu = rng.sample(gpu, k=min(len(gpu), max(10, wanted // 2)))
    for family in GPU_TYPES.values():  # every GPU family present
        if not set(family) & set(gpu):
            gpu.append(family[0])
    neuron = rng.sample(
        NEURON_TYPES, k=min(len(NEURON_TYPES), max(2, wanted - len(cpu) - len(gpu)))
    )
    chosen = {*cpu, *gpu, *neuron}
    if asked is not None:
        chosen |= set([t for t in CPU_TYPES if t not in chosen][: max(0, asked - len(chosen))])
    return sorted(chosen)


def cluster(types: list[str]) -> dict[str, Any]:
    """A cluster YAML with one node type per instance type and a CPU head."""
    available = {
        t.replace(".", "-"): {
            "node_config": {"InstanceType": t, "ImageId": "ami-0123456789abcdef0"},
            "min_workers": 0,
            "max_workers": 10_000,
            "resources": {},
        }
        for t in types
    }
    available["head"] = {"node_config": {"InstanceType": "m6i.xlarge"}, "resources": {}}
    return {
        "cluster_name": "bench",
        "max_workers": 100_000,
        "provider": {"type": "aws", "region": "us-east-1"},
        "available_node_types": available,
        "head_node_type": "head",
    }


def demand(rng: random.Random, bundles: int, types: list[str]) -> dict[str, Any]:
    """About ``bundles`` bundles in a realistic mix, as shapes with counts."""
    gpu_families = [f for f, family in GPU_TYPES.items() if set(family) & set(types)]
    shares = {
        "cpu": 0.55,
        "fractional": 0.12,
        "typed": 0.15,
        "training": 0.02,
        "neuron": 0.08,
        "gangs": 0.05,
        "memory": 0.03,
    }
    entries: list[dict[str, Any]] = []

    def add(resources: dict[str, float], count: int) -> None:
        if count > 0:
            entries.append({"resources": resources, "count": count})

    for cpus in (1, 2, 4):
        add({"CPU": cpus}, round(bundles * shares["cpu"] / 3))
    add({"CPU": 2, "memory": 24 * 2**30}, round(bundles * shares["memory"]))
    for fraction in (0.25, 0.5):
        add({"GPU": fraction}, round(bundles * shares["fractional"] / 2))
    for family in gpu_families:
        add(
            {"CPU": 2, "GPU": 1, f"accelerator_type:{family}": 0.001},
            round(bundles * shares["typed"] / len(gpu_families)),
        )
    for family in ("A100", "H100"):
        if family in gpu_families:
            add(
                {"GPU": 8, f"accelerator_type:{family}": 0.001},
                max(1, round(bundles * shares["training"] / 2)),
            )
    for cores in (1, 2, 32):
        add({"neuron_cores": cores}, max(1, round(bundles * shares["neuron"] / 3 / cores)))
    gang_size = 4
    gangs = max(1, round(bundles * shares["gangs"] / gang_size))
    groups = [
        {"strategy": "STRICT_SPREAD", "bundles": [{"GPU": 1, "CPU": 4}] * gang_size, "count": gangs}
    ]
    rng.shuffle(entries)
    return {"bundles": [*entries, *INFEASIBLE], "placement_groups": groups}


def problem(bundles: int, seed: int = 0) -> tuple[dict[str, Any], dict[str, Any]]:
    rng = random.Random(f"{seed}-{bundles}")
    types = node_types(rng, bundles)
    return cluster(types), demand(rng, bundles, types)


def bundle_count(demand_doc: dict[str, Any]) -> int:
    plain = sum(b.get("count", 1) for b in demand_doc["bundles"])
    grouped = sum(len(g["bundles"]) * g.get("count", 1) for g in demand_doc["placement_groups"])
    return plain + grouped


# Flexible and forced problems (issue 12) -----------------------------------------------------
GIB = 2**30
PROBLEM_KINDS = ("forced", "flexible", "diverse", "gangs", "gcp")


def mixed_problem(
    bundles: int, kind: str = "flexible", seed: int = 0, types: int | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A cluster over 20-60 real EC2 types (``types``: that many, :func:`node_types`; the
    ``gcp`` kind keeps its own) and a demand of about ``bundles`` bundles.

    ``flexible``: every shape fits at least two of the node types (CPU tasks of several sizes
    with memory, fractional GPUs typed T4/L4 or untyped, 1-4 GPU tasks typed A10G/L4/L40S/T4,
    NeuronCore tasks of 1-16, small PACK/SPREAD/STRICT_SPREAD groups) plus a few infeasible
    bundles. ``forced`` adds 8-GPU A100/H100 training bundles that only p4d/p4de/p5 host.
    ``diverse``: :func:`diverse_problem`.
    """
    if kind == "diverse":
        return diverse_problem(bundles, seed, types)
    if kind == "gangs":
        return gangs_problem(bundles, seed, types)
    if kind == "gcp":
        from planner_problems_gcp import gcp_problem

        return gcp_problem(bundles, seed)
    rng = random.Random(f"{kind}-{seed}-{bundles}")
    names = node_types(rng, bundles, types)
    if kind == "forced":
        names = sorted({*names, "p4d.24xlarge", "p5.48xlarge"})
    cluster_doc = cluster(names)
    fits = fitting_types(cluster_doc)

    shapes: list[tuple[str, dict[str, float], float]] = []
    for cpus, memory in ((1, 0), (1, 6), (2, 4), (2, 24), (4, 16), (8, 32), (16, 48)):
        resources = {"CPU": cpus, **({"memory": memory * GIB} if memory else {})}
        shapes.append(("cpu", resources, rng.uniform(0.5, 1.5)))
    for fraction in (0.25, 0.5):
        for token in (None, "T4", "L4"):
            resources = {"GPU": fraction, "CPU": 1}
            if token:
                resources[f"accelerator_type:{token}"] = 0.001
            shapes.append(("fractional", resources, rng.uniform(0.5, 1.5)))
    for family in ("A10G", "L4", "L40S", "T4"):
        for gpus in (1, 2, 4):
            resources = {"GPU": gpus, "CPU": 2 * gpus, f"accelerator_type:{family}": 0.001}
            shapes.append(("typed", resources, rng.uniform(0.5, 1.5) / gpus))
    for cores in (1, 2, 4, 8, 16):
        shapes.append(("neuron", {"neuron_cores": cores, "CPU": 1}, rng.uniform(0.5, 1.5) / cores))
    shares = {"cpu": 0.55, "fractional": 0.12, "typed": 0.15, "neuron": 0.08, "training": 0.03}
    totals = {c: sum(w for cls, _, w in shapes if cls == c) for c in shares}
    entries = []
    for cls, resources, weight in shapes:
        count = round(bundles * shares[cls] * weight / totals[cls])
        if count > 0 and fits([resources]) >= 2:
            entries.append({"resources": resources, "count": count})
    if kind == "forced":
        for family in ("A100", "H100"):
            count = max(1, round(bundles * shares["training"] / 2 / 8))
            entries.append(
                {"resources": {"GPU": 8, f"accelerator_type:{family}": 0.001}, "count": count}
            )
    groups = []
    for strategy, members, share in (
        ("STRICT_SPREAD", [{"GPU": 1, "CPU": 4}] * 4, 0.03),
        ("PACK", [{"CPU": 4, "memory": 8 * GIB}] * 2 + [{"GPU": 1, "CPU": 2}], 0.01),
        ("SPREAD", [{"CPU": 2}] * 3, 0.01),
    ):
        count = max(1, round(bundles * share / len(members)))
        if fits(members, strategy) >= 2:
            groups.append({"strategy": strategy, "bundles": members, "count": count})
    rng.shuffle(entries)
    return cluster_doc, {"bundles": [*entries, *INFEASIBLE], "placement_groups": groups}


def diverse_problem(
    bundles: int, seed: int = 0, types: int | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Dozens of random shapes (CPU and memory, fractional and typed GPUs, NeuronCores), many
    small placement groups of a dozen shapes and every strategy (as Ray reports them: one
    record per group), a few infeasible bundles, over 20-60 real EC2 types."""
    rng = random.Random(f"diverse-{seed}-{bundles}")
    names = node_types(rng, bundles, types)
    families = sorted(f for f, family in GPU_TYPES.items() if set(family) & set(names))
    shapes = [random_shape(rng, families) for _ in range(rng.randint(30, 60))]
    weights = [rng.uniform(0.2, 2.0) for _ in shapes]
    total = sum(weights)
    entries = []
    for resources, weight in zip(shapes, weights, strict=True):
        count = round(0.85 * bundles * weight / total)
        if count > 0:
            entries.append({"resources": resources, "count": count})
    templates = []
    for _ in range(rng.randint(6, 12)):  # placement-group shapes; each group its own record
        strategy = rng.choice(("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"))
        members = [rng.choice(shapes[:12]) for _ in range(rng.randint(2, 4))]
        if strategy == "STRICT_PACK":
            members = [{"CPU": rng.choice([1, 2, 4])}] * len(members)
        templates.append({"strategy": strategy, "bundles": members, "count": 1})
    groups = []
    grouped = 0
    while grouped < 0.15 * bundles:
        groups.append(rng.choice(templates))
        grouped += len(groups[-1]["bundles"])
    return cluster(names), {"bundles": [*entries, *INFEASIBLE], "placement_groups": groups}


def random_shape(rng: random.Random, families: list[str]) -> dict[str, float]:
    """One bundle: CPU and memory, a fractional or whole (often typed) GPU, or NeuronCores."""
    roll = rng.random()
    if roll < 0.45:
        cpus = rng.choice([0.5, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32])
        memory = rng.choice([0, 0, 1, 2, 4, 8, 16, 32, 64, 96])
        return {"CPU": cpus, **({"memory": memory * GIB} if memory else {})}
    if roll < 0.6:
        found = {"GPU": rng.choice([0.1, 0.2, 0.25, 0.33, 0.5, 0.75]), "CPU": 1}
        if rng.random() < 0.5:
            found[f"accelerator_type:{rng.choice(families)}"] = 0.001
        return found
    if roll < 0.85:
        gpus = rng.choice([1, 1, 1, 2, 4, 8])
        found = {"GPU": gpus, "CPU": rng.choice([1, 2, 4]) * gpus}
        if rng.random() < 0.7:
            found[f"accelerator_type:{rng.choice(families)}"] = 0.001
        return found
    return {"neuron_cores": rng.choice([1, 2, 4, 8, 16, 32]), "CPU": rng.choice([1, 2, 4])}


def fitting_types(cluster_doc: dict[str, Any]):
    """``fits(shapes, strategy=None)``: how many worker types of ``cluster_doc`` hold a bundle
    (or each member of a placement group; a STRICT_PACK group whole on one host)."""
    from autoscaler.config import parse_cluster_config
    from autoscaler.planner.items import build_items, fits_type
    from autoscaler.planner.model import BundleDemand, Demand, PlacementGroupDemand

    config = parse_cluster_config(cluster_doc, "bench")
    head = cluster_doc["head_node_type"]
    workers = [t for t in config.node_types() if t.name != head]

    def fits(shapes: list[dict[str, float]], strategy: str | None = None) -> int:
        demand = (
            Demand(placement_groups=(PlacementGroupDemand(strategy, tuple(shapes)),))
            if strategy
            else Demand(bundles=(BundleDemand(shapes[0]),))
        )
        items = build_items(demand)
        return min(sum(fits_type(item, t) for t in workers) for item in items)

    return fits


# Many distinct placement groups ------------------------------------------------------------
STRATEGY_WEIGHTS = {"STRICT_SPREAD": 0.4, "STRICT_PACK": 0.2, "PACK": 0.2, "SPREAD": 0.2}


def gangs_problem(
    bundles: int, seed: int = 0, types: int | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Hundreds of distinct placement groups at scale (a few at 200 bundles): STRICT_SPREAD,
    STRICT_PACK, PACK and SPREAD groups of 2-12 mixed bundles (CPU and memory, fractional and
    typed GPUs, NeuronCores), some as one record with a count, some as one record per group
    as Ray reports them; plus ordinary tasks of random shapes and a few infeasible bundles,
    over 20-60 real EC2 types."""
    rng = random.Random(f"gangs-{seed}-{bundles}")
    names = node_types(rng, bundles, types)
    cluster_doc = cluster(names)
    fits = fitting_types(cluster_doc)
    families = sorted(f for f, family in GPU_TYPES.items() if set(family) & set(names))
    entries = []
    shapes = [random_shape(rng, families) for _ in range(rng.randint(20, 40))]
    weights = [rng.uniform(0.2, 2.0) for _ in shapes]
    for resources, weight in zip(shapes, weights, strict=True):
        count = round(0.4 * bundles * weight / sum(weights))
        if count > 0 and fits([resources]):
            entries.append({"resources": resources, "count": count})
    distinct = max(3, min(400, bundles // 40))
    groups: list[dict[str, Any]] = []
    made = 0
    while made < distinct:
        strategy = rng.choices(list(STRATEGY_WEIGHTS), list(STRATEGY_WEIGHTS.values()))[0]
        size = rng.randint(2, 12 if strategy == "STRICT_SPREAD" else 6)
        if strategy == "STRICT_PACK":
            members = [{"CPU": rng.choice([0.5, 1, 2, 4])} for _ in range(size)]
            if rng.random() < 0.5:
                members[0] = {"CPU": 1, "GPU": rng.choice([0.25, 0.5, 1, 2])}
        else:
            kinds = [random_shape(rng, families) for _ in range(rng.randint(1, 3))]
            members = [rng.choice(kinds) for _ in range(size)]
        if not fits(members, strategy):
            continue
        made += 1
        count = max(1, round(rng.expovariate(1.0) * 0.6 * bundles / distinct / size))
        record = {"strategy": strategy, "bundles": members}
        if rng.random() < 0.3:  # one record per group, as Ray reports them
            groups.extend([{**record, "count": 1}] * min(count, 20))
        else:
            groups.append({**record, "count": count})
    rng.shuffle(entries)
    rng.shuffle(groups)
    return cluster_doc, {"bundles": [*entries, *INFEASIBLE], "placement_groups": groups}
