"""Every example cluster loads, validates and plans the demand it is meant for."""

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from autoscaler.config import load_cluster_config
from autoscaler.demand import parse_demand
from autoscaler.planner import PlanRequest, plan

EXAMPLES = Path(__file__).resolve().parent.parent / "example-clusters"
DEMANDS = {
    "quickstart.yaml": (
        [
            {"resources": {"GPU": 1, "accelerator_type:A100": 0.001}, "count": 16},
            {"resources": {"GPU": 0.25, "accelerator_type:L4": 0.001}, "count": 8},
            {"resources": {"CPU": 1}, "count": 200},
            {"neuron_cores": 32},
        ],
        {"a100": 2, "l4": 2, "cpu": 25, "trainium": 1},
    ),
    "aws-gpu.yaml": (
        [{"GPU": 8, "accelerator_type:H100": 0.001}, {"GPU": 1, "accelerator_type:A10G": 0.001}],
        {"h100": 1, "a10g_spot": 1},
    ),
    "aws-trainium.yaml": (
        [{"neuron_cores": 128}, {"neuron_cores": 2}],
        {"trn2": 1, "inf2_small": 1},
    ),
    "aws-gaudi.yaml": ([{"HPU": 8}, {"HPU": 8}], {"gaudi": 2}),
    "gcp-tpu.yaml": ([{"TPU": 4, "TPU-v4-16-head": 1}, {"TPU": 4}], {"tpu_v4_16": 1}),
    "gcp-gpu.yaml": ([{"GPU": 8, "accelerator_type:A100-80G": 0.001}], {"a100_80g_8": 1}),
    "ray-compatible.yaml": ([{"GPU": 1}], {"ray.worker.gpu": 1}),
}


def request(config, bundles):
    return PlanRequest(
        node_types=config.node_types(),
        demand=parse_demand({"bundles": bundles}),
        existing=config.head_existing_nodes(),
        limits=config.limits(),
    )


def test_every_example_is_covered():
    assert {p.name for p in EXAMPLES.glob("*.yaml")} == set(DEMANDS)


@pytest.mark.parametrize("name", sorted(DEMANDS))
def test_example_plans_its_demand(name):
    config = load_cluster_config(EXAMPLES / name)
    bundles, expected = DEMANDS[name]
    result = plan(request(config, bundles))
    assert result.infeasible == ()
    assert result.launch_counts() == expected


def test_spot_capacity_out_falls_back_to_on_demand():
    config = load_cluster_config(EXAMPLES / "aws-gpu.yaml")
    out = tuple(
        dataclasses.replace(t, available=False) if t.market == "spot" else t
        for t in config.node_types()
    )
    base = request(config, [{"GPU": 1, "accelerator_type:A10G": 0.001}])
    result = plan(dataclasses.replace(base, node_types=out))
    assert result.launch_counts() == {"a10g": 1}


def test_ray_yaml_keys_we_ignore_are_listed():
    ignored = load_cluster_config(EXAMPLES / "ray-compatible.yaml").ignored_keys()
    assert {"setup_commands", "docker", "auth", "file_mounts"} <= set(ignored)


@pytest.mark.parametrize("name", sorted(DEMANDS))
def test_autoscale_plan_accepts_each_example(name):
    done = subprocess.run(
        [sys.executable, "-m", "autoscaler", "plan", str(EXAMPLES / name), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
