"""`autoscale plan` as users run it: errors exit 2 without tracebacks, JSON as documented."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from autoscaler.cli import cli
from autoscaler.planner.model import Infeasible, Launch, Plan

FIXTURES = Path(__file__).parent / "fixtures"
AWS = str(FIXTURES / "aws-ray.yaml")


def autoscale(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autoscaler", *args],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("yaml_text", "expected"),
    [
        (
            "provider: {type: aws, region: us-east-1}\n"
            "available_node_types:\n"
            "  head: {node_config: {InstanceType: m5.large}, min_worker: 1}\n"
            "head_node_type: head\n",
            "available_node_types.head.min_worker: unknown key; did you mean 'min_workers'?",
        ),
        (
            "provider: {type: aws, region: us-east-1}\n"
            "available_node_types:\n"
            "  head: {node_config: {InstanceType: m5.larg}}\n"
            "head_node_type: head\n",
            "available_node_types.head.node_config.InstanceType: unknown instance type",
        ),
        ("provider: [\n", "not valid YAML at line"),
    ],
)
def test_config_errors_exit_2_without_traceback(tmp_path, yaml_text, expected):
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml_text)
    done = autoscale("plan", str(path))
    assert done.returncode == 2
    assert expected in done.stderr
    assert "Traceback" not in done.stderr


def test_missing_config_file_exits_2():
    done = autoscale("plan", "/nonexistent/cluster.yaml")
    assert done.returncode == 2
    assert "cannot read" in done.stderr
    assert "Traceback" not in done.stderr


def test_demand_errors_exit_2_with_paths(tmp_path):
    demand = tmp_path / "demand.json"
    demand.write_text(json.dumps({"bundles": [{"GPU": 1}, {"TPU": 3}, {"neuron_cores": 1.5}]}))
    done = autoscale("plan", AWS, "--demand", str(demand))
    assert done.returncode == 2
    assert "bundles[1].TPU:" in done.stderr
    assert "bundles[2].neuron_cores:" in done.stderr
    assert "Traceback" not in done.stderr
    done = autoscale("plan", AWS, "--bundles", '[{"GPU": "one"}]')
    assert done.returncode == 2
    assert "bundles[0].GPU: quantity must be a number" in done.stderr


FAKE_PLAN = Plan(
    launches=(Launch("gpu_workers", 2, "demand", (({"GPU": 8.0}, 2),)),),
    infeasible=(Infeasible({"GPU": 16.0}, 1, "no node type has 16 GPU"),),
    cost_per_hour=65.5452,
    lower_bound_per_hour=65.0,
    notes=("a planner note",),
)


@pytest.fixture
def fake_planner(monkeypatch) -> list:
    """Replaces the planner; records the requests it gets."""
    requests = []

    def plan(request):
        requests.append(request)
        return FAKE_PLAN

    monkeypatch.setattr("autoscaler.planner.plan", plan)
    return requests


def test_json_output_shape_and_request(fake_planner):
    bundles = '[{"GPU": 8}, {"GPU": 8}, {"GPU": 16}]'
    result = CliRunner().invoke(cli, ["plan", AWS, "--bundles", bundles, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {
        "launch": {"gpu_workers": 2},
        "infeasible": [
            {"resources": {"GPU": 16.0}, "count": 1, "reason": "no node type has 16 GPU"}
        ],
        "cost_per_hour": 65.5452,
        "lower_bound_per_hour": 65.0,
    }
    (request,) = fake_planner
    assert request.node_types[0].name == "ray.head.default"
    assert [e.node_type for e in request.existing] == ["ray.head.default"]
    assert request.limits.max_workers == 10
    assert {b.count for b in request.demand.bundles} == {2, 1}


def test_explain_adds_notes_warnings_and_ignored_keys(fake_planner):
    result = CliRunner().invoke(cli, ["plan", AWS, "--json", "--explain"])
    explain = json.loads(result.output)["explain"]
    assert explain["notes"] == ["a planner note"]
    assert "setup_commands" in explain["ignored_keys"]
    result = CliRunner().invoke(cli, ["plan", AWS, "--explain"])
    assert result.exit_code == 0, result.output
    for text in ("gpu_workers", "a planner note", "setup_commands", "Infeasible", "gap"):
        assert text in result.output
