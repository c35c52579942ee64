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
LOCAL_CLOUD = "providers.local"
"""The local cloud: a program beside the product (it may use any layer), which the product
starts but never builds on."""
LOCAL_CLOUD_USERS = {
    "providers/__init__.py",
    "autoscaler/bring_up.py",
    "autoscaler/teardown.py",
    "autoscaler/cli/quickstart.py",
}
"""The registry (starts the local cloud for ``emulator: true``), `up`, `down` and the
quickstart (which runs a command on a simulated host)."""


def _python_files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _product_files() -> list[Path]:
    return [
        path
        for layer in LAYERS
        for path in _python_files(layer)
        if not _module_name(path).startswith(LOCAL_CLOUD)
    ]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in ``path``, top-level or inside a function; a
    ``from package import name`` counts ``package.name`` where that is a module."""
    found = []
    package = _module_name(path)
    package = package if path.name == "__init__.py" else package.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    type_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING")
        for statement in node.body
        for inner in ast.walk(statement)
    }
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.append((node.lineno, submodule if _is_module(submodule) else base))
    return found


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


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
    wrong = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in _product_files()
        if path.relative_to(ROOT).parts[0] == layer
        for line, module in _imports(path)
        if module.split(".")[0] in above
    ]
    assert not wrong, "\n".join(wrong)


def test_only_the_registry_and_up_down_start_the_local_cloud():
    """The cloud plugins, ``accel/`` and the rest of the product never import the local
    cloud: it is a separate program they talk to over HTTP, and nodes never need it."""
    wrong = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in _product_files()
        if str(path.relative_to(ROOT)) not in LOCAL_CLOUD_USERS
        for line, module in _imports(path)
        if module == LOCAL_CLOUD or module.startswith(LOCAL_CLOUD + ".")
    ]
    assert not wrong, "\n".join(wrong)


def _import_graph() -> dict[str, set[str]]:
    files = [path for layer in LAYERS for path in _python_files(layer)]
    modules = {_module_name(path): path for path in files}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        graph[name] = {
            module for _, module in _imports(path) if module in modules and module != name
        }
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circles():
    """No module reaches itself through imports (top-level or deferred into a function; not
    ``if TYPE_CHECKING:`` ones, which never run)."""
    assert _cycles(_import_graph()) == []


def test_the_circle_check_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_planner_imports_nothing_from_providers():
    wrong = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in _python_files("autoscaler/planner")
        for line, module in _imports(path)
        if module == "providers" or module.startswith("providers.")
    ]
    assert not wrong, "\n".join(wrong)
