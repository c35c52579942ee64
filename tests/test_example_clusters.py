"""Every example cluster loads, validates and plans the demand it is meant for."""

import dataclasses
import gzip
import json
import subprocess
import sys
from pathlib import Path

import moto
import pytest
import yaml

from autoscaler.config import load_cluster_config
from autoscaler.demand import parse_demand
from autoscaler.planner import PlanRequest, plan

EXAMPLES = Path(__file__).resolve().parent.parent / "example-clusters"


def gpu(model, count=1):
    return {"GPU": count, f"accelerator_type:{model}": 0.001}


# (example, bundles, expected launch counts); the first case of each example also goes
# through `autoscale plan` on the command line.
CASES = [
    (
        "quickstart.yaml",
        [
            {"resources": gpu("A100"), "count": 16},
            {"resources": gpu("L4", 0.25), "count": 8},
            {"resources": {"CPU": 1}, "count": 200},
            {"neuron_cores": 32},
        ],
        # accelerator_conservation: spare (default): the 198 one-CPU tasks the head cannot
        # hold use the room left on the A100, L4 and Trainium nodes; strict: see below.
        {"a100": 2, "l4": 2, "trainium": 1},
    ),
    ("quickstart.yaml", [gpu("T4")], {"t4": 1}),
    (
        "aws-gpu.yaml",
        [gpu("H100", 8), gpu("A10G"), gpu("L4"), gpu("L40S")],
        {"h100": 1, "a10g_spot": 1, "l4_spot": 1, "l40s_spot": 1},
    ),
    ("aws-gpu.yaml", [gpu("A100-80G", 8), gpu("A100-40G", 8)], {"a100_80g": 1, "a100": 1}),
    (
        "aws-trainium.yaml",
        [{"neuron_cores": 64}, {"neuron_cores": 2}],
        {"trn2": 1, "inf2_small": 1},
    ),
    ("aws-trainium.yaml", [{"neuron_cores": 24}], {"inf2": 1}),
    ("aws-gaudi.yaml", [{"HPU": 8}, {"HPU": 8}], {"gaudi": 2}),
    ("gcp-tpu.yaml", [{"TPU": 4, "TPU-v4-16-head": 1}, {"TPU": 4}], {"tpu_v4_16": 1}),
    ("gcp-tpu.yaml", [{"TPU": 4}], {"tpu_v4_8_spot": 1}),
    ("gcp-gpu.yaml", [gpu("A100-80G", 8)], {"a100_80g_8": 1}),
    ("gcp-gpu.yaml", [gpu("H100", 8), gpu("L4"), gpu("T4")], {"h100_8": 1, "l4": 1, "t4": 1}),
    ("ray-compatible.yaml", [{"resources": {"CPU": 1}, "count": 6}], {"ray.worker.default": 2}),
    # Ray's min_workers: 1 is launched with no demand at all.
    ("ray-compatible.yaml", [], {"ray.worker.default": 1}),
    (
        "quickstart-ray.yaml",
        [{"resources": {"CPU": 1, **gpu("A100")}, "count": 4}, {"CPU": 1, "neuron_cores": 1}],
        {"a100": 1, "trainium": 1},
    ),
]
FIRST_CASES = {name: (bundles, expected) for name, bundles, expected in reversed(CASES)}


def request(config, bundles):
    return PlanRequest(
        node_types=config.node_types(),
        demand=parse_demand({"bundles": bundles}),
        existing=config.head_existing_nodes(),
        limits=config.limits(),
    )


def test_every_example_has_a_case():
    assert {p.name for p in EXAMPLES.glob("*.yaml")} == set(FIRST_CASES)


@pytest.mark.parametrize("name", sorted(FIRST_CASES))
def test_example_loads_without_warnings(name):
    config = load_cluster_config(EXAMPLES / name)
    assert config.warnings == ()


@pytest.mark.parametrize(
    ("name", "bundles", "expected"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)]
)
def test_example_plans_its_demand(name, bundles, expected):
    config = load_cluster_config(EXAMPLES / name)
    result = plan(request(config, bundles))
    assert result.infeasible == ()
    assert result.deferred == ()
    assert result.launch_counts() == expected


def test_quickstart_strict_conservation_keeps_cpu_work_on_cpu_nodes():
    config = load_cluster_config(EXAMPLES / "quickstart.yaml")
    bundles, _ = FIRST_CASES["quickstart.yaml"]
    strict = dataclasses.replace(
        request(config, bundles),
        limits=dataclasses.replace(config.limits(), accelerator_conservation="strict"),
    )
    result = plan(strict)
    assert result.infeasible == ()
    assert result.launch_counts() == {"a100": 2, "l4": 2, "cpu": 25, "trainium": 1}


def test_quickstart_head_takes_small_cpu_bundles_and_workers_retire_fast():
    config = load_cluster_config(EXAMPLES / "quickstart.yaml")
    result = plan(request(config, [{"resources": {"CPU": 1}, "count": 200}]))
    assert result.placed_on_existing == 2  # the head's own 2 CPUs
    workers = [t.name for t in config.node_types() if t.name != config.head_node_type]
    assert {config.idle_timeout_minutes(name) for name in workers} == {0.1}


def test_quickstart_is_on_the_embedded_cloud():
    assert load_cluster_config(EXAMPLES / "quickstart.yaml").spec.provider.emulator


def test_aws_examples_use_one_ami_the_local_cloud_knows():
    bundled = Path(moto.__file__).parent / "ec2" / "resources" / "amis.json.gz"
    known = {a["ami_id"]: a for a in json.loads(gzip.decompress(bundled.read_bytes()))}
    amis = set()
    for path in EXAMPLES.glob("*.yaml"):
        spec = yaml.safe_load(path.read_text())
        if spec["provider"]["type"] == "aws":
            amis |= {t["node_config"]["ImageId"] for t in spec["available_node_types"].values()}
    assert len(amis) == 1
    (ami,) = amis
    assert known[ami]["architecture"] == "x86_64"


@pytest.mark.parametrize(
    ("name", "spot_out"),
    [
        ("aws-gpu.yaml", {"a10g": 1, "l4": 1, "l40s": 1}),
        ("gcp-tpu.yaml", {"tpu_v4_8": 1}),
    ],
)
def test_spot_capacity_out_falls_back_to_on_demand(name, spot_out):
    config = load_cluster_config(EXAMPLES / name)
    types = tuple(
        dataclasses.replace(t, available=False) if t.market == "spot" else t
        for t in config.node_types()
    )
    spot = {t.name.removesuffix("_spot") for t in types if t.market == "spot"}
    assert spot == set(spot_out)  # every spot type has its on-demand twin
    v4 = {"TPU": 4, "accelerator_type:TPU-V4": 0.001}
    bundles = [gpu("A10G"), gpu("L4"), gpu("L40S")] if name == "aws-gpu.yaml" else [v4]
    base = request(config, bundles)
    result = plan(dataclasses.replace(base, node_types=types))
    assert result.infeasible == ()
    assert result.launch_counts() == spot_out


def test_ray_yaml_keys_we_do_not_act_on_are_listed():
    ignored = load_cluster_config(EXAMPLES / "ray-compatible.yaml").ignored_keys()
    assert set(ignored) == {"rsync_exclude", "rsync_filter"}


@pytest.mark.parametrize("name", sorted(FIRST_CASES))
def test_autoscale_plan_accepts_each_example(name):
    bundles, expected = FIRST_CASES[name]
    done = subprocess.run(
        [
            *(sys.executable, "-m", "autoscaler", "plan", str(EXAMPLES / name)),
            *("--bundles", json.dumps(bundles), "--json"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["infeasible"] == []
    assert out["launch"] == expected
