"""Reading a cluster YAML safely: plain YAML (no Python objects), and no alias bombs.

Anchors and aliases are legal YAML and Ray files use them; what is refused is a document
whose aliases expand beyond :data:`MAX_EXPANDED_NODES` nodes (billion laughs), measured on
the composed node graph before anything is built from it.
"""

from __future__ import annotations

import yaml

MAX_EXPANDED_NODES = 100_000
"""Nodes a document may hold once every alias is expanded."""
FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader where PyYAML was built with it (a tenth of the pure-Python one's
time on a cluster YAML, part of every command's start), else the pure-Python one."""


FAST_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
"""libyaml's safe dumper where PyYAML has it: the head's own cluster YAML is written into
every boot script, whose size ``plan`` and ``up`` check first."""


def dump_yaml(data: object) -> str:
    """``data`` as plain YAML (what :func:`yaml.safe_dump` writes)."""
    return yaml.dump(data, Dumper=FAST_DUMPER)


class YamlInputError(ValueError):
    """The text is not a usable YAML document; the message is one line."""


def load_yaml(text: str) -> object:
    """The document in ``text``, or :class:`YamlInputError`."""
    try:
        return _load(text, FAST_LOADER)
    except yaml.YAMLError:
        pass  # read again by the pure-Python parser: its messages name what it found
    try:
        return _load(text, yaml.SafeLoader)
    except yaml.YAMLError as err:
        raise YamlInputError(_describe(err)) from None


def _load(text: str, loader_class: type) -> object:
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        size = _expanded_size(node, {})
        if size > MAX_EXPANDED_NODES:
            raise YamlInputError(
                f"refused: its aliases expand to more than {MAX_EXPANDED_NODES:,} values"
            )
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _expanded_size(node: yaml.Node, memo: dict[int, int]) -> int:
    """Values under ``node`` with aliases expanded (shared nodes counted once per use)."""
    key = id(node)
    if key in memo:
        return memo[key]
    memo[key] = MAX_EXPANDED_NODES + 1  # a node reached again while being sized: a cycle
    if isinstance(node, yaml.MappingNode):
        size = 1 + sum(_expanded_size(k, memo) + _expanded_size(v, memo) for k, v in node.value)
    elif isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_expanded_size(item, memo) for item in node.value)
    else:
        size = 1
    memo[key] = min(size, MAX_EXPANDED_NODES + 1)
    return memo[key]


def _describe(err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    return f"not valid YAML{where}: {problem}"
