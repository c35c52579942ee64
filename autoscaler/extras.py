"""Which extra of this distribution installs a module a command could not import.

A node installs the base alone (see ``autoscaler.bootstrap.node_package``); a control-plane
command run there fails on its first import of, say, the planner's solver. The answer comes
from the installed distribution's own metadata, so it stays true as ``pyproject.toml``
changes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from importlib import metadata

from autoscaler.release import DISTRIBUTION

PREFERRED = "control"
"""The extra to name when several would do: the one a control-plane user installs."""

_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")
_EXTRA = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def extra_for(module: str, requires: Iterable[str] | None = None) -> str | None:
    """The extra whose requirements (its own and those of extras it includes) install
    top-level module ``module``; None when no extra does."""
    if requires is None:
        try:
            requires = metadata.requires(DISTRIBUTION) or []
        except metadata.PackageNotFoundError:
            return None
    direct: dict[str, set[str]] = {}
    included: dict[str, set[str]] = {}
    for requirement in requires:
        extra = _EXTRA.search(requirement)
        name = _NAME.match(requirement)
        if extra is None or name is None:
            continue
        if _normal(name.group(1)) == _normal(DISTRIBUTION):
            included.setdefault(extra.group(1), set()).update(
                part.strip() for part in (name.group(2) or "").split(",") if part.strip()
            )
        else:
            direct.setdefault(extra.group(1), set()).add(_normal(name.group(1)))
    providing = sorted(
        (len(_closure(extra, direct, included)), extra)
        for extra in {*direct, *included}
        if any(_provides(dist, module) for dist in _closure(extra, direct, included))
    )
    if not providing:
        return None
    names = [extra for _, extra in providing]
    return PREFERRED if PREFERRED in names else names[0]


def missing_line(module: str) -> str:
    """One line for a command that needs ``module``, which this install lacks."""
    top = module.split(".")[0]
    extra = extra_for(top)
    fix = f"pip install '{DISTRIBUTION}[{extra}]'" if extra else f"pip install {top}"
    return f"this command needs {top!r}, which this install lacks (a node-only install): {fix}"


def _closure(extra: str, direct: dict[str, set[str]], included: dict[str, set[str]]) -> set[str]:
    seen, todo, found = set(), [extra], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        found |= direct.get(current, set())
        todo += included.get(current, set())
    return found


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _provides(distribution: str, module: str) -> bool:
    """Whether ``distribution`` plausibly installs top-level ``module`` (``pyyaml``:
    ``yaml``; ``google-cloud-tpu``: ``google``)."""
    module = _normal(module)
    return distribution in (module, f"py{module}") or distribution.startswith(f"{module}_")
