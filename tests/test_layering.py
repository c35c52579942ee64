"""The tree's shape: dependencies point one way, and no cloud leaks out of ``providers/``.

Code under ``autoscaler/`` may name no cloud and read no cloud's node_config key: everything
cloud-specific lives in that cloud's package, behind ``providers.base.Cloud`` and
``NodeProvider``. Comments and docstrings may mention clouds; identifiers, strings and
imports may not.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CLOUD_WORDS = re.compile(
    r"(?<![a-z])(aws|gcp|gce|ec2|boto3?|botocore|google|tpu_v2|moto|amazon)(?![a-z])",
    re.IGNORECASE,
)
NODE_CONFIG_KEYS = re.compile(
    r"\b(InstanceType|ImageId|SubnetIds?|UserData|InstanceMarketOptions|IamInstanceProfile|"
    r"machineType|guestAccelerators|acceleratorType|acceleratorConfig|runtimeVersion|"
    r"schedulingConfig|startup-script|provisioningModel)\b"
)
LAYERS = ["accel", "instance_catalog", "providers", "autoscaler"]


def _python_files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (module, class, function, attribute)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for statement in body:
            if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
                found.add(id(statement.value))
    return found


def _code_words(path: Path) -> list[tuple[int, str, bool]]:
    """(line, text, is a string) of every identifier, import and non-docstring string."""
    tree = ast.parse(path.read_text())
    docstrings = _docstrings(tree)
    words = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings:
                words.append((node.lineno, node.value, True))
        elif isinstance(node, ast.Name):
            words.append((node.lineno, node.id, False))
        elif isinstance(node, ast.Attribute):
            words.append((node.lineno, node.attr, False))
        elif isinstance(node, ast.alias):
            words.append((node.lineno, node.name, False))
        elif isinstance(node, ast.ImportFrom):
            words.append((node.lineno, node.module or "", False))
        elif isinstance(node, ast.FunctionDef | ast.ClassDef | ast.arg):
            words.append((node.lineno, getattr(node, "name", None) or node.arg, False))
    return words


@pytest.mark.parametrize(
    "path", _python_files("autoscaler"), ids=lambda p: str(p.relative_to(ROOT))
)
def test_autoscaler_names_no_cloud_and_no_node_config_key(path):
    leaks = [
        f"{path.relative_to(ROOT)}:{line}: {text[:60]!r}"
        for line, text, is_string in _code_words(path)
        if CLOUD_WORDS.search(text) or (is_string and NODE_CONFIG_KEYS.search(text))
    ]
    assert not leaks, "cloud-specific code outside providers/:\n" + "\n".join(leaks)


@pytest.mark.parametrize("layer", LAYERS[:-1])
def test_dependencies_point_one_way(layer):
    above = LAYERS[LAYERS.index(layer) + 1 :]
    wrong = []
    for path in _python_files(layer):
        for node in ast.walk(ast.parse(path.read_text())):
            modules = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            wrong += [
                f"{path.relative_to(ROOT)}:{node.lineno} imports {m}"
                for m in modules
                if m.split(".")[0] in above
            ]
    assert not wrong, "\n".join(wrong)


def _imports(path: Path, package: str) -> set[str]:
    """Modules of ``package`` that ``path`` imports (anywhere in the file, lazy ones too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found.update(n for n in names if n == package or n.startswith(package + "."))
    return found


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@pytest.mark.parametrize("package", ["autoscaler.planner"])
def test_no_import_circles(package):
    """No module reaches itself through imports (lazy, in-function ones included)."""
    modules = {_module(p): p for p in _python_files(package.replace(".", "/"))}
    graph = {
        name: sorted(m for m in _imports(path, package) if m in modules and m != name)
        for name, path in modules.items()
    }
    cycles, state, stack = [], {}, []

    def visit(name: str) -> None:
        state[name] = "open"
        stack.append(name)
        for target in graph[name]:
            if state.get(target) == "open":
                cycles.append(" -> ".join([*stack[stack.index(target) :], target]))
            elif target not in state:
                visit(target)
        stack.pop()
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name)
    assert not cycles, "import circles:\n" + "\n".join(cycles)


def test_planner_imports_nothing_from_providers():
    wrong = [
        f"{path.relative_to(ROOT)} imports {m}"
        for path in _python_files("autoscaler/planner")
        for m in _imports(path, "providers")
    ]
    assert not wrong, "\n".join(wrong)
