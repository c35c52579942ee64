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


TOP_LEVEL = "top-level"
"""The path of the document itself (its top level is not a mapping)."""
UNION_TAG = re.compile(
    r"^(?:list|dict|str|int|float|bool|none|tuple|set|literal|union|nullable|"
    r"function-\w+|constrained-\w+|lax-or-strict|json-or-python|is-instance)(?:\[.*\])?$"
)
"""How pydantic names the member of a union a value failed (``list[str]``): not a YAML key."""
KEY_MARKER = "[key]"
"""pydantic's last location part when a mapping key itself is wrong."""


def yaml_loc(loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """``loc`` as a path in the YAML: union member names dropped (``availability_zone.str``
    is ``availability_zone``) and the ``[key]`` marker of a bad key removed."""
    return tuple(
        part
        for part in loc
        if not (isinstance(part, str) and (part == KEY_MARKER or UNION_TAG.match(part)))
    )


def dotted(loc: tuple[int | str, ...]) -> str:
    """``("a", "b", 0, "c")`` -> ``a.b[0].c`` (long keys cut short)."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            key = _cut(str(part), MAX_KEY)
            path += f".{key}" if path else key
    return path or TOP_LEVEL


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}…"


def describe(error: ErrorDetails) -> str:
    """One pydantic error as ``path: what is wrong; did you mean ...``."""
    loc, kind = yaml_loc(error["loc"]), error["type"]
    if KEY_MARKER in error["loc"] or kind == "invalid_key":
        *parent, key = loc or ("",)
        where = f"{dotted(tuple(parent))}.{key}" if parent else str(key)
        return f"{where}: a key must be a string, got {brief(error['input'])}"
    if kind == "value_error":
        loc, message = _field_of(loc, str(error.get("ctx", {}).get("error", error["msg"])))
        return f"{dotted(loc)}: {message}"
    prefix = f"{dotted(loc)}: "
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
    message = re.sub(r" or instance of \w+$", "", error["msg"])
    return f"{prefix}{message} (got {brief(error['input'])})"


def _field_of(loc: tuple[int | str, ...], message: str) -> tuple[tuple[int | str, ...], str]:
    """A model check's message ``field: what`` moved onto the field's own path."""
    model = model_at(loc)
    field, sep, rest = message.partition(": ")
    if sep and model is not None and field in model.model_fields:
        return (*loc, field), rest
    return loc, message


def from_validation_error(source: str, error: ValidationError) -> ConfigError:
    """One line per field: a value that fits no member of a union is said once."""
    lines: dict[str, list[str]] = {}
    for detail in error.errors():
        path, _, message = describe(detail).partition(": ")
        lines.setdefault(path, []).append(message)
    return ConfigError(source, [f"{path}: {_either(messages)}" for path, messages in lines.items()])


def _either(messages: list[str]) -> str:
    """``Input should be a valid list (got 5)`` and ``... a valid string (got 5)`` as one."""
    if len(messages) == 1:
        return messages[0]
    wanted = [re.sub(r"^Input should be (.*) \(got .*\)$", r"\1", m) for m in messages]
    got = re.search(r"\(got .*\)$", messages[0])
    if all(w != m for w, m in zip(wanted, messages, strict=True)) and got:
        return f"Input should be {' or '.join(dict.fromkeys(wanted))} {got.group(0)}"
    return "; ".join(dict.fromkeys(messages))
