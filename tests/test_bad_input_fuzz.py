"""Bad input, fuzzed: huge strings, huge and non-finite numbers, deep nesting, deleted keys.

Every case must end within seconds with a short message that names what is wrong, a
non-zero exit and no traceback. Most cases run in-process through click's CliRunner; a few
run the real ``autoscale`` process where the environment or a whole process matters.
Covers ``node detect``/``node run`` (``--resources``, ``AUTOSCALE_NODE_RESOURCES``),
demand to ``autoscale plan`` (``--bundles``, ``--demand`` text and files) and ``catalog``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from autoscaler.cli import cli
from tests.autoscaler.test_config_fuzz import _dotted, _paths

HUGE = "x" * 100_000
MANY_DIGITS = "1" + "0" * 5_000
DEEP = "[" * 100_000
CLUSTER = str(Path(__file__).parent / "autoscaler" / "fixtures" / "aws-ray.yaml")
MAX_LINES = 5
MAX_CHARS = 800
MAX_SECONDS = 5.0


def check_brief_failure(exit_code: int, output: str, seconds: float, expected: str) -> None:
    assert exit_code not in (0, None), output[:MAX_CHARS]
    assert "Traceback" not in output
    assert expected in output, output[:MAX_CHARS]
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) <= MAX_LINES, output[:MAX_CHARS]
    assert len(output) <= MAX_CHARS, output[:MAX_CHARS]
    assert seconds < MAX_SECONDS


@pytest.fixture
def node_env(tmp_path) -> dict[str, str]:
    """An empty host tree (nothing detected) and a private ledger."""
    (tmp_path / "host").mkdir()
    return {
        "AUTOSCALE_HOST_ROOT": str(tmp_path / "host"),
        "AUTOSCALE_NODE_STATE_DIR": str(tmp_path / "state"),
        "AUTOSCALE_NODE_RESOURCES": "",
        "AUTOSCALE_CATALOG_DIR": str(tmp_path / "catalog"),
    }


def run_in_process(args: list[str], env: dict[str, str]) -> tuple[int, str, float]:
    start = time.monotonic()
    result = CliRunner().invoke(cli, args, env=env)
    return result.exit_code, result.output, time.monotonic() - start


def resources(text: str) -> list[str]:
    return ["node", "detect", "--resources", text]


NODE_CASES = {
    "gpu-1e308": (resources('{"GPU": 1e308}'), "'GPU' must be at most 1e+14"),
    "gpu-1e23-int": (resources('{"GPU": 100000000000000000000000}'), "'GPU' must be at most"),
    "gpu-overflow-inf": (resources('{"GPU": 1e999}'), "'GPU' must be a finite number"),
    "gpu-nan": (resources('{"GPU": NaN}'), "'GPU' must be a finite number, got nan"),
    "tpu-minus-inf": (resources('{"TPU": -Infinity}'), "'TPU' must be a finite number"),
    "custom-huge": (resources('{"my-license": 1e300}'), "'my-license' must be at most"),
    "too-many-devices": (resources('{"GPU": 5000}'), "GPU must be at most 1024 devices"),
    "digits": (resources(f'{{"GPU": {MANY_DIGITS}}}'), "a number has too many digits"),
    "huge-name": (resources(f'{{"{HUGE}": 1}}'), "is longer than 256 characters"),
    "huge-value": (resources(f'{{"GPU": "{HUGE}"}}'), "'GPU' must be a number"),
    "empty-name": (resources('{"": 1}'), "a resource name must not be empty"),
    "deep": (resources(DEEP), "nested too deeply"),
    "huge-text": (resources(HUGE), "--resources: not valid JSON"),
    "deleted-value": (resources('{"GPU": }'), "--resources: not valid JSON"),
    "num-gpus-nan": (["node", "detect", "--num-gpus", "nan"], "'GPU' must be a finite"),
    "num-gpus-inf": (["node", "detect", "--num-gpus", "inf"], "'GPU' must be a finite"),
    "num-gpus-1e308": (["node", "detect", "--num-gpus", "1e308"], "'GPU' must be at most"),
    "num-gpus-huge": (["node", "detect", "--num-gpus", HUGE], "--num-gpus"),
    "run-request-1e308": (
        ["node", "run", "--resources", '{"GPU": 1e308}', "--", "true"],
        "--resources: 'GPU' must be at most",
    ),
    "run-request-mix": (
        ["node", "run", "--resources", '{"GPU": 1, "neuron_cores": 1}', "--", "true"],
        "GPU and neuron_cores cannot be requested together",
    ),
    "run-wait-nan": (["node", "run", "--wait", "nan", "--", "true"], "--wait"),
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("args", "expected"), NODE_CASES.values(), ids=NODE_CASES.keys())
def test_node_commands(node_env, args, expected):
    check_brief_failure(*run_in_process(args, node_env), expected)


ENV_CASES = {
    "env-1e308": ('{"GPU": 1e308, "TPU": 4}', "AUTOSCALE_NODE_RESOURCES: 'GPU' must be at most"),
    "env-nan": ('{"TPU": NaN}', "AUTOSCALE_NODE_RESOURCES: 'TPU' must be a finite number"),
    "env-huge-name": (f'{{"{HUGE}": 1}}', "is longer than 256 characters"),
    "env-deep": (DEEP, "AUTOSCALE_NODE_RESOURCES: not usable JSON (nested too deeply)"),
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("value", "expected"), ENV_CASES.values(), ids=ENV_CASES.keys())
@pytest.mark.parametrize("command", [["node", "detect"], ["node", "run", "--", "true"]])
def test_node_resources_variable(node_env, value, expected, command):
    outcome = run_in_process(command, node_env | {"AUTOSCALE_NODE_RESOURCES": value})
    check_brief_failure(*outcome, expected)


def bundles(text: str) -> list[str]:
    return ["plan", CLUSTER, "--bundles", text]


def demand(data: object) -> list[str]:
    return ["plan", CLUSTER, "--demand", data if isinstance(data, str) else json.dumps(data)]


PLAN_CASES = {
    "bundle-1e308": (bundles('[{"GPU": 1e308}]'), "bundles[0].GPU: quantity must be at most"),
    "bundle-nan": (bundles('[{"GPU": NaN}]'), "bundles[0].GPU: quantity must be a finite"),
    "bundle-inf": (bundles('[{"CPU": Infinity}]'), "bundles[0].CPU: quantity must be a finite"),
    "bundle-digits": (bundles(f'[{{"CPU": {MANY_DIGITS}}}]'), "a number has too many digits"),
    "bundle-mix": (
        bundles('[{"GPU": 1, "neuron_cores": 2}]'),
        "bundles[0]: GPU and neuron_cores cannot be requested together",
    ),
    "bundle-huge-name": (bundles(f'[{{"{HUGE}": 1}}]'), "longer than 256 characters"),
    "bundle-huge-count": (
        bundles('[{"resources": {"CPU": 1}, "count": 1e30}]'),
        "bundles[0].count: must be a positive whole number",
    ),
    "bundle-deleted-resources": (bundles('[{"count": 3}]'), "bundles[0].resources:"),
    "bundle-deleted-value": (bundles('[{"CPU": }]'), "not valid JSON"),
    "bundles-deep": (bundles(DEEP), "nested too deeply"),
    "bundles-huge-text": (bundles(HUGE), "not valid JSON"),
    "group-huge-strategy": (
        demand({"placement_groups": [{"strategy": HUGE, "bundles": [{"CPU": 1}]}]}),
        "placement_groups[0].strategy: 'xxxxxxxx",
    ),
    "group-deleted-bundles": (
        demand({"placement_groups": [{"strategy": "SPREAD"}]}),
        "placement_groups[0].bundles: expected a non-empty list",
    ),
    "group-too-big": (
        demand({"placement_groups": [{"bundles": [{"resources": {"CPU": 1}, "count": 10**9}]}]}),
        "placement_groups[0].bundles: 1,000,000,000 bundles; at most 10,000",
    ),
    "demand-huge-key": (demand({HUGE: []}), "unknown key"),
    "demand-huge-path": (demand(HUGE), "cannot read"),
    "demand-deep": (demand('{"a":' * 50_000 + "1" + "}" * 50_000), "nested too deeply"),
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("args", "expected"), PLAN_CASES.values(), ids=PLAN_CASES.keys())
def test_plan_demand(node_env, args, expected):
    check_brief_failure(*run_in_process(args, node_env), expected)


@pytest.mark.timeout(30)
def test_plan_demand_file_with_a_huge_string(node_env, tmp_path):
    path = tmp_path / "demand.json"
    path.write_text(json.dumps({"bundles": [{"GPU": "y" * 5_000_000}]}))
    outcome = run_in_process(["plan", CLUSTER, "--demand", str(path)], node_env)
    check_brief_failure(*outcome, "bundles[0].GPU: quantity must be a number")


CATALOG_CASES = {
    "show-huge": (["catalog", "show", HUGE], "unknown instance type 'xxxxxxxx"),
    "show-huge-region": (["catalog", "show", "m4.xlarge", "--region", HUGE], "not offered in"),
    "show-huge-cloud": (["catalog", "show", "m4.xlarge", "--cloud", HUGE], "--cloud"),
    "list-huge-accelerator": (
        ["catalog", "list", "--accelerator", HUGE],
        "unknown accelerator type 'xxxxxxxx",
    ),
    "list-huge-count": (
        ["catalog", "list", "--accelerator", f"a100:{HUGE}"],
        "accelerator count in 'a100:xxxx",
    ),
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("args", "expected"), CATALOG_CASES.values(), ids=CATALOG_CASES.keys())
def test_catalog(node_env, args, expected):
    check_brief_failure(*run_in_process(args, node_env), expected)


PROCESS_CASES = {
    "detect-1e23": (
        ["node", "detect", "--resources", '{"GPU": 100000000000000000000000}'],
        {},
        "'GPU' must be at most",
    ),
    "run-env-1e308": (
        ["node", "run", "--", "true"],
        {"AUTOSCALE_NODE_RESOURCES": '{"GPU": 1e308, "TPU": 4}'},
        "AUTOSCALE_NODE_RESOURCES: 'GPU' must be at most",
    ),
    "show-huge": (["catalog", "show", HUGE], {}, "unknown instance type"),
}


@pytest.mark.parametrize(
    ("args", "extra_env", "expected"), PROCESS_CASES.values(), ids=PROCESS_CASES.keys()
)
def test_real_processes(node_env, args, extra_env, expected):
    env = {**os.environ, **node_env, **extra_env}
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "autoscaler", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=20,
    )
    seconds = time.monotonic() - start
    check_brief_failure(done.returncode, done.stdout + done.stderr, seconds, expected)


# Cluster YAMLs, generated: every key path of every example, mutated ------------------------
# A value of the wrong type, a misspelt key, a misspelt value, a non-string key, a deleted
# key; every error line must start with the path (from the top of the YAML) of the mutated
# field or of the entry holding it, and a misspelt key or choice must get the closest match
# or the allowed values.
EXAMPLES = Path(__file__).parent.parent / "example-clusters"
EXAMPLE_YAMLS = [
    *sorted(EXAMPLES.glob("*.yaml")),
    Path(CLUSTER),
    Path(CLUSTER).with_name("gcp-tpu.yaml"),
]
SWAPS = {
    "str": "bogus",
    "int": 7,
    "float": 2.5,
    "negative": -3,
    "mapping": {"a": 1},
    "list": ["a"],
    "null": None,
    "bool": True,
    "empty": "",
}


def _misspelt(text: str) -> str:
    middle = len(text) // 2
    return text[:middle] + text[middle + 1 :] if len(text) > 3 else text + "x"


def _generated_cases() -> list:
    import yaml

    cases = []
    for example in EXAMPLE_YAMLS:
        data = yaml.safe_load(example.read_text())
        for path in _paths(data):
            for name, value in SWAPS.items():
                cases.append((example, path, "swap", value, f"{example.stem}:{name}"))
            cases.append((example, path, "delete", None, f"{example.stem}:delete"))
            if isinstance(path[-1], str):
                cases.append((example, path, "misspell-key", None, f"{example.stem}:key"))
                cases.append((example, path, "int-key", None, f"{example.stem}:int-key"))
    return cases


def _mutate(data: dict, path: tuple, how: str, value) -> tuple[dict, tuple]:
    """The mutated document and the path the problem is at."""
    parent = data
    for part in path[:-1]:
        parent = parent[part]
    key = path[-1]
    if how == "swap":
        parent[key] = value
    elif how == "delete":
        del parent[key]
    elif how == "misspell-key":
        parent[_misspelt(key)] = parent.pop(key)
        return data, (*path[:-1], _misspelt(key))
    elif how == "int-key":
        parent[404] = parent.pop(key)
        return data, (*path[:-1], "404")
    return data, path


def _related(named: str, problem: str, original: str) -> bool:
    """``named`` is the problem's path (or the key's before it was misspelt), one above or
    below it, a sibling's, or another field of the same node type."""
    named, problem = named.replace("[", ".["), problem.replace("[", ".[")
    parent = problem.rsplit(".", 1)[0]
    entry = ".".join(problem.split(".")[:2]) if problem.startswith("available_node_types.") else ""
    return (
        problem.startswith(named)
        or named.startswith(problem)
        or named.startswith(parent)
        or named == original
        or (bool(entry) and named.startswith(entry))
    )


def _in_document(data, named: str) -> bool:
    """Whether ``named`` walks the document from the top; its tail may be keys that are
    missing (where a required key goes). Keys may hold dots (``ray.head.default``): the
    longest key matches. A bare mapping counts as a list of one (as Ray's files write
    ``guestAccelerators``)."""
    node, rest = data, named
    while rest:
        if rest.startswith("["):
            index, _, rest = rest[1:].partition("]")
            rest = rest.removeprefix(".")
            if isinstance(node, dict) and index == "0":
                continue
            if not isinstance(node, list) or not index.isdigit() or int(index) >= len(node):
                return False
            node = node[int(index)]
            continue
        if not isinstance(node, dict):
            return False
        keys = sorted((str(k) for k in node), key=len, reverse=True)
        key = next((k for k in keys if rest == k or rest.startswith((k + ".", k + "["))), None)
        if key is None:
            return "[" not in rest  # keys to add: a required key and what it holds
        node = {str(k): v for k, v in node.items()}[key]
        rest = rest[len(key) :].removeprefix(".")
    return True


@pytest.mark.timeout(300)  # 3,000 parses: 21 s alone, about 50 s beside three workers
def test_every_generated_cluster_yaml_error_names_its_field_path():
    import random

    import yaml

    from autoscaler.config import ConfigError, parse_cluster_config

    top_keys = set(__import__("autoscaler.config.schema").config.schema.ClusterSpec.model_fields)
    cases = _generated_cases()
    checked = failures = 0
    unnamed = []
    for example, path, how, value, _ in random.Random(22).sample(cases, min(3000, len(cases))):
        data, problem_path = _mutate(yaml.safe_load(example.read_text()), path, how, value)
        try:
            parse_cluster_config(data, example.name)
            continue
        except ConfigError as err:
            messages = err.messages
        checked += 1
        problem = _dotted(problem_path)
        for message in messages:
            named = message.split(": ", 1)[0]
            first = named.split(".", 1)[0].split("[", 1)[0]
            from_top = named == "top-level" or (
                first in top_keys | {str(k) for k in data} and _in_document(data, named)
            )
            related = _related(named, problem, _dotted(path)) or first == "head_node_type"
            if not (from_top and related):
                unnamed.append((example.name, problem, message))
        if how == "misspell-key" and str(path[-1]) in top_keys and len(path) == 1:
            failures += "did you mean" not in " ".join(messages)
    assert checked > 500
    assert unnamed == []
    assert failures == 0


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("accelerator_conservation", "strikt", "allowed: spare, strict); did you mean 'strict'"),
        ("max_workerz", 3, "max_workerz: unknown key; did you mean 'max_workers'"),
        ("provider", {"type": "awz"}, "provider.type: 'awz' is not allowed (allowed: aws"),
    ],
)
def test_cluster_yaml_typos_get_the_allowed_values_or_closest_match(key, value, expected):
    import yaml

    from autoscaler.config import ConfigError, parse_cluster_config

    data = yaml.safe_load(Path(CLUSTER).read_text())
    data[key] = value
    with pytest.raises(ConfigError) as raised:
        parse_cluster_config(data, "cluster.yaml")
    assert any(expected in message for message in raised.value.messages), raised.value.messages


def test_a_cluster_yaml_that_is_not_a_mapping_names_the_top_level(node_env, tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text("- just\n- a list\n")
    outcome = run_in_process(["plan", str(path)], node_env)
    check_brief_failure(*outcome, "top-level: expected a mapping of cluster settings")
