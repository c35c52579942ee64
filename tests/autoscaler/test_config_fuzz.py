"""Bad cluster YAMLs get a short answer that names the field: mutations of every example.

Each case deletes a key or replaces a value with a huge string, a huge or non-finite
number, a negative one or a value of the wrong type, and checks what a user sees: a
ConfigError (or a config that loads), of at most a few short lines, each naming a field path
related to the mutated one, quickly.
"""

from __future__ import annotations

import copy
import math
import random
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from autoscaler.config import ConfigError, load_cluster_config, parse_cluster_config
from autoscaler.config.errors import MAX_LINES

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "example-clusters").glob("*.yaml")) + sorted(
    (ROOT / "tests/autoscaler/fixtures").glob("*.yaml")
)
HUGE = "x" * 1_000_000
MUTATIONS = {
    "delete": None,
    "huge string": HUGE,
    "huge int": 10**30,
    "huge float": 1e308,
    "nan": math.nan,
    "infinity": math.inf,
    "negative": -1,
    "list": [1, 2],
}
CASES_PER_FILE = 120
PATH_AT_START = re.compile(r"^[\w.\[\]\-/:…]+?: ")


def _paths(value, path=()) -> Iterator[tuple]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*path, key)
            yield from _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield (*path, index)
            yield from _paths(item, (*path, index))


def _mutated(data: dict, path: tuple, replacement) -> dict:
    copied = copy.deepcopy(data)
    parent = copied
    for part in path[:-1]:
        parent = parent[part]
    if replacement is None:
        del parent[path[-1]]
    else:
        parent[path[-1]] = replacement
    return copied


def _dotted(path: tuple) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text


def _cases() -> list:
    rng = random.Random(14)
    cases = []
    for example in EXAMPLES:
        data = yaml.safe_load(example.read_text())
        every = [(p, m) for p in _paths(data) for m in MUTATIONS]
        for path, mutation in rng.sample(every, min(CASES_PER_FILE, len(every))):
            cases.append(pytest.param(example, path, mutation, id=f"{example.stem}:{mutation}"))
    return cases


@pytest.mark.parametrize(("example", "path", "mutation"), _cases())
def test_a_mutated_config_gets_a_short_answer_naming_the_field(example, path, mutation):
    data = _mutated(yaml.safe_load(example.read_text()), path, MUTATIONS[mutation])
    started = time.monotonic()
    try:
        parse_cluster_config(data, "fuzz.yaml")
    except ConfigError as err:
        text = str(err)
        assert len(text.splitlines()) <= MAX_LINES + 2, text[:2000]
        assert len(text) <= 4000, text[:2000]
        for message in err.messages:
            assert PATH_AT_START.match(message), f"no field path: {message}"
        where = _dotted(path)
        named = [m.split(": ", 1)[0] for m in err.messages]
        related = any(where.startswith(n) or n.startswith(where[:40]) for n in named)
        assert related or any(str(path[0]) in m for m in err.messages), (where, err.messages)
    assert time.monotonic() - started < 5


def test_an_alias_bomb_is_refused_in_one_line(tmp_path):
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]")
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError) as raised:
        load_cluster_config(path)
    assert raised.value.messages == ("refused: its aliases expand to more than 100,000 values",)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "provider:\n\t- aws\n",
            "line 2, column 1: found character '\\t' that cannot start any token",
        ),
        ("provider: &p {type: aws}\nauth: *q\n", "line 2, column 7: found undefined alias 'q'"),
    ],
)
def test_a_yaml_syntax_error_names_what_was_found(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as raised:
        load_cluster_config(path)
    assert any(message in line for line in raised.value.messages), raised.value.messages


def test_anchors_and_aliases_within_reason_load(tmp_path):
    path = tmp_path / "anchors.yaml"
    path.write_text(
        "provider: {type: aws, region: us-east-1}\n"
        "defaults: &gpu {node_config: {InstanceType: g5.xlarge}, max_workers: 4}\n"
        "available_node_types: {a: *gpu, b: *gpu}\n".replace("defaults:", "metadata:")
    )
    config = load_cluster_config(path)
    assert [t.name for t in config.node_types()] == ["a", "b"]


def test_a_huge_top_level_key_is_quoted_briefly():
    data = {"provider": {"type": "aws", "region": "us-east-1"}, HUGE: 1}
    with pytest.raises(ConfigError) as raised:
        parse_cluster_config(data)
    assert len(str(raised.value)) < 400
    assert "unknown key" in str(raised.value)
