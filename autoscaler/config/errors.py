"""Config errors: every problem as one line that names its field path."""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from accel.suggest import did_you_mean
from autoscaler.config.schema import model_at


class ConfigProblem(ValueError):
    """One problem at one field path."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}")


class ConfigError(ValueError):
    """Everything wrong with one cluster config."""

    def __init__(self, source: str, messages: Iterable[str]) -> None:
        self.source = source
        self.messages = tuple(messages)
        lines = "\n".join(f"  {message}" for message in self.messages)
        super().__init__(f"invalid cluster config {source}:\n{lines}")


def dotted(loc: tuple[int | str, ...]) -> str:
    """``("a", "b", 0, "c")`` -> ``a.b[0].c``."""
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else str(part)
    return path


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
        return f"{prefix}{error['input']!r} is not allowed (allowed: {', '.join(allowed)}){hint}"
    if kind == "missing":
        return f"{prefix}required"
    if kind == "value_error":
        return f"{prefix}{error.get('ctx', {}).get('error', error['msg'])}"
    return f"{prefix}{error['msg']} (got {error['input']!r})"


def from_validation_error(source: str, error: ValidationError) -> ConfigError:
    return ConfigError(source, [describe(detail) for detail in error.errors()])
