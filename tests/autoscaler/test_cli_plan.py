"""`autoscale plan` as users run it: errors exit 2 without tracebacks, JSON as documented."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from autoscaler.cli import cli

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


def test_json_output_is_exactly_the_documented_shape():
    bundles = '[{"GPU": 8}, {"GPU": 8}, {"GPU": 16}, {"CPU": 1}]'
    result = CliRunner().invoke(cli, ["plan", AWS, "--bundles", bundles, "--json"])
    assert result.exit_code == 0, result.output
    output = json.loads(result.output)
    assert set(output) == {
        "launch",
        "infeasible",
        "cost_per_hour",
        "lower_bound_per_hour",
        "node_count",
        "node_lower_bound",
        "work_budget_reached",
        "planning_seconds",
    }
    assert output["launch"] == {"gpu_workers": 2}  # the CPU bundle fits on the head
    (infeasible,) = output["infeasible"]
    assert set(infeasible) == {"resources", "count", "reason"}
    assert infeasible["resources"] == {"GPU": 16.0}
    assert "closest is gpu_workers" in infeasible["reason"]
    assert output["cost_per_hour"] == pytest.approx(2 * 21.957642)  # Price List, us-east-1
    assert output["lower_bound_per_hour"] <= output["cost_per_hour"]
    assert output["node_count"] == 2
    assert 1 <= output["node_lower_bound"] <= output["node_count"]
    assert output["work_budget_reached"] is False


def test_explain_adds_notes_warnings_and_ignored_keys():
    result = CliRunner().invoke(cli, ["plan", AWS, "--json", "--explain"])
    explain = json.loads(result.output)["explain"]
    assert "rsync_exclude" in explain["ignored_keys"]
    assert explain["not_acted_on"][0].startswith("rsync_exclude: Ray key not acted on")
    assert isinstance(explain["notes"], list)
    result = CliRunner().invoke(cli, ["plan", AWS, "--explain", "--bundles", '[{"GPU": 16}]'])
    assert result.exit_code == 0, result.output
    for text in ("rsync_exclude", "Infeasible", "gap", "accelerator_conservation: spare"):
        assert text in result.output


def test_explain_names_the_token_to_request_for_an_alias_no_node_advertises():
    bundles = '[{"GPU": 8, "accelerator_type:a100-80gb": 0.001}]'
    result = CliRunner().invoke(cli, ["plan", AWS, "--bundles", bundles, "--explain"])
    assert result.exit_code == 0, result.output
    assert "Nothing to launch." in result.output  # Ray would never place it on an A100-80G
    assert "accelerator_type:a100-80gb is an alias of accelerator_type:A100-80G" in result.output
    assert "request accelerator_type:A100-80G" in result.output


PLAN = ["plan", str(FIXTURES / "aws-ray.yaml"), "--json", "--bundles"]


@pytest.mark.parametrize(
    ("argv", "watched", "status", "at_exit"),
    [
        ([*PLAN, '[{"CPU": 1}]'], False, 0, None),  # no teardown: the hook never runs
        ([*PLAN, '[{"CPU": 1}]'], True, 0, "collector on: False"),  # a profiler gets its exit
        ([*PLAN, '[{"CPU": "x"}]'], False, 2, "collector on: False"),  # so does a failure
        (["catalog", "--help"], False, 0, "collector on: True"),  # a command that stays on
    ],
)
def test_a_plan_process_ends_once_its_output_is_flushed(argv, watched, status, at_exit):
    """A plan runs without the cyclic garbage collector, and once it succeeds its process
    ends without the interpreter's teardown, its whole output written through the pipe
    (unless a profiler or coverage tool watches it: they write their results at exit)."""
    code = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: sys.stderr.write(f'collector on: {gc.isenabled()}'))\n"
        f"{'sys.setprofile(lambda *_: None)' if watched else ''}\n"
        "sys.argv = ['autoscale', *sys.argv[1:]]\n"
        "from autoscaler.cli import main\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == status, done.stderr
    if at_exit is None:
        assert "collector on" not in done.stderr
    else:
        assert at_exit in done.stderr
    if status == 0 and argv[0] == "plan":
        assert json.loads(done.stdout)["infeasible"] == []


@pytest.mark.parametrize("config", ["aws-ray.yaml", "gcp-tpu.yaml"])
def test_offline_plan_needs_no_cloud_sdk_and_no_device_detection(config):
    """`autoscale plan` works where no cloud SDK and no accelerator detection module can be
    imported (and so imports none: each costs start-up time; the planner needs only the
    families' request rules)."""
    blocked = ("boto3", "botocore", "google", "google.cloud", "googleapiclient", "accel.families")
    code = (
        "import sys\n"
        f"sys.modules.update(dict.fromkeys({blocked!r}))\n"
        "sys.argv = ['autoscale', 'plan', sys.argv[1], '--bundles', '[{\"CPU\": 1}]', '--json']\n"
        "from autoscaler.cli import main\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(FIXTURES / config)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["infeasible"] == []
