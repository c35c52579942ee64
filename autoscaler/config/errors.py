"""Config errors: every problem as one line that names its field path."""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from accel.user_input import brief, did_you_mean
from autoscaler.config.schema import model_at

MAX_LINES = 10
"""Problems listed in one error; the rest are counted."""
MAX_LINE = 300
"""Characters of one problem line."""
MAX_KEY = 40
"""Characters of one path component (a key the user wrote)."""


class ConfigProblem(ValueError):
    """One problem at one field path."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}")


class ConfigError(ValueError):
    """Everything wrong with one cluster config, in a few short lines (each said once)."""

    def __init__(self, source: str, messages: Iterable[str]) -> None:
        self.source = source
        self.messages = tuple(dict.fromkeys(_cut(message, MAX_LINE) for message in messages))
        shown = [f"  {message}" for message in self.messages[:MAX_LINES]]
        if len(self.messages) > MAX_LINES:
            shown.append(f"  ... and {len(self.messages) - MAX_LINES} more")
        super().__init__(f"invalid cluster config {_cut(source, 200)}:\n" + "\n".join(shown))


def dotted(loc: tuple[int | str, ...]) -> str:
    """``("a", "b", 0, "c")`` -> ``a.b[0].c`` (long keys cut short)."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            key = _cut(str(part), MAX_KEY)
            path += f".{key}" if path else key
    return path


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}…"


def describe(error: ErrorDetails) -> str:
    """One pydantic error as ``path: what is wrong; did you mean ...``."""
    loc, kind = error["loc"], error["type"]
    prefix = f"{dotted(loc)}: " if loc else ""
    if kind == "extra_forbidden":
        model = model_at(loc[:-1])
        allowed = list(model.model_fields) if model else []
        return f"{prefix}unknown key{did_you_mean(str(loc[-1]), allowed)}"
    if kind == "literal_error":
        allowed = re.findall(r"'([^']*)'", error.get("ctx", {}).get("expected", ""))
        hint = did_you_mean(str(error["input"]), allowed)
        return (
            f"{prefix}{brief(error['input'])} is not allowed (allowed: {', '.join(allowed)}){hint}"
        )
    if kind == "missing":
        return f"{prefix}required"
    if kind == "value_error":
        return f"{prefix}{error.get('ctx', {}).get('error', error['msg'])}"
    return f"{prefix}{error['msg']} (got {brief(error['input'])})"


def from_validation_error(source: str, error: ValidationError) -> ConfigError:
    return ConfigError(source, [describe(detail) for detail in error.errors()])
