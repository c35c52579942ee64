"""The user's ``head_start_ray_commands`` / ``worker_start_ray_commands`` as our nodes run them.

Our monitor replaces Ray's autoscaler, so each ``ray start`` in a line loses
``--autoscaling-config`` and the head's gets ``--no-monitor``. Each gets, at boot, the flags
detection found on its host (``--num-cpus``, ``--num-gpus``, ``--memory``, ``--resources``
with the accelerator tokens) except those the user's own line sets; a literal
``--resources`` of theirs is merged over the detected ones. Every other flag of theirs
(ports, ``--object-manager-port``, ...) is kept as written.

Rewriting happens where the script is written (:func:`rewrite_line`); the detected flags
come from ``autoscale node ray-flags`` on the host at boot, into a shell variable the line
expands (:func:`boot_flags`, words safe from word splitting and globbing).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # detection is the node's; writing a boot script needs none of it
    from accel.node import NodeInventory

DETECTED_FLAGS = ("num-cpus", "num-gpus", "memory", "resources")
"""Flags a ``ray start`` gets from detection unless its line sets them."""
DEFAULT_PORT = 6379
_SEPARATORS = (";", "&&", "||", "|", "&", "\n")
_AUTOSCALING_CONFIG = re.compile(
    r"[ \t\n]+--autoscaling-config(?:=|[ \t\n]+)(?:'[^']*'|\"[^\"]*\"|[^\s;&|]+)"
)
_RESOURCES = re.compile(r"[ \t\n]+--resources(?:=|[ \t\n]+)(?:'[^']*'|\"[^\"]*\"|[^\s;&|]+)")


@dataclass(frozen=True)
class RayStart:
    """One ``ray start`` in a user's line: what it sets, and what the host adds at boot."""

    variable: str
    """The shell variable the line expands to the detected flags."""
    omit: tuple[str, ...]
    """Detected flags not added (the line sets them)."""
    resources: Mapping[str, float] | None
    """The line's own literal ``--resources``, merged over the detected ones."""
    head: bool
    port: int | None


def rewrite_line(line: str, head: bool, variable_prefix: str) -> tuple[str, list[RayStart]]:
    """``line`` with each ``ray start`` rewritten; the starts found, in order (the n-th's
    detected flags are in ``$<variable_prefix>_<n>``)."""
    pieces = _segments(line)
    starts: list[RayStart] = []
    out = []
    for text, separator in pieces:
        words = _words(text)
        at = _ray_start_at(words)
        if at is None:
            out.append(text + separator)
            continue
        flags = words[at + 2 :]
        given = {_flag_name(word) for word in flags if word.startswith("--")}
        resources = _literal_resources(flags)
        text = _AUTOSCALING_CONFIG.sub("", text)
        if resources is not None:
            text = _RESOURCES.sub("", text)
        is_head = "head" in given
        stripped = text.rstrip()
        tail = text[len(stripped) :]
        if is_head and head and "no-monitor" not in given:
            stripped += " --no-monitor"
        variable = f"{variable_prefix}_{len(starts)}"
        stripped += f" ${{{variable}}}"
        omit = tuple(
            f
            for f in DETECTED_FLAGS
            if f in given and not (f == "resources" and resources is not None)
        )
        starts.append(
            RayStart(variable, omit, resources, is_head, _port(flags) if is_head else None)
        )
        out.append(stripped + tail + separator)
    return "".join(out), starts


def head_port(lines: Sequence[str]) -> int:
    """The GCS port the head's ``ray start --head`` listens on (Ray's default if unset)."""
    for line in lines:
        for start in rewrite_line(line, True, "_")[1]:
            if start.head and start.port is not None:
                return start.port
    return DEFAULT_PORT


def boot_flags(
    inventory: NodeInventory, omit: Sequence[str] = (), resources: Mapping[str, float] | None = None
) -> list[str]:
    """The detected ``ray start`` flags, less ``omit``, with ``resources`` over the detected
    custom resources; each word survives the shell's word splitting and globbing."""
    from accel.node import ray_start_args

    flags = []
    for flag in ray_start_args(inventory):
        name, _, value = flag[2:].partition("=")
        if name in omit:
            continue
        if name == "resources":
            value = _safe_json({**json.loads(value), **(resources or {})})
        flags.append(f"--{name}={value}")
    if (
        resources
        and "resources" not in omit
        and not any(f.startswith("--resources=") for f in flags)
    ):
        flags.append(f"--resources={_safe_json(dict(resources))}")
    return flags


def _safe_json(value: object) -> str:
    """Compact JSON with spaces and glob characters in strings as ``\\uXXXX`` escapes."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return re.sub(r"[ \t*?\[\]]", lambda m: f"\\u{ord(m.group()):04x}", text)


def _segments(line: str) -> list[tuple[str, str]]:
    """``line`` split at unquoted command separators: (text, separator) pairs."""
    pieces: list[tuple[str, str]] = []
    start, i, quote = 0, 0, ""
    while i < len(line):
        char = line[i]
        if quote:
            if char == "\\" and quote == '"':
                i += 2
                continue
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "\\":
            i += 2
            continue
        else:
            separator = next((s for s in _SEPARATORS if line.startswith(s, i)), None)
            if separator:
                pieces.append((line[start:i], separator))
                i += len(separator)
                start = i
                continue
        i += 1
    pieces.append((line[start:], ""))
    return pieces


def _words(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def _ray_start_at(words: list[str]) -> int | None:
    """Where ``ray start`` begins among ``words`` (after ``VAR=value`` assignments)."""
    at = 0
    while at < len(words) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[at]):
        at += 1
    if len(words) > at + 1 and words[at].rsplit("/", 1)[-1] == "ray" and words[at + 1] == "start":
        return at
    return None


def _flag_name(word: str) -> str:
    return word[2:].split("=", 1)[0]


def _flag_value(flags: list[str], name: str) -> str | None:
    for i, word in enumerate(flags):
        if word == f"--{name}" and i + 1 < len(flags):
            return flags[i + 1]
        if word.startswith(f"--{name}="):
            return word.split("=", 1)[1]
    return None


def _literal_resources(flags: list[str]) -> dict[str, float] | None:
    """The line's ``--resources`` JSON if it is literal (no shell expansion in it)."""
    value = _flag_value(flags, "resources")
    if value is None or "$" in value:
        return None
    try:
        parsed = json.loads(value)
    except ValueError:
        return None
    if isinstance(parsed, dict) and all(isinstance(v, (int, float)) for v in parsed.values()):
        return {str(k): float(v) for k, v in parsed.items()}
    return None


def _port(flags: list[str]) -> int | None:
    value = _flag_value(flags, "port")
    return int(value) if value and value.isdigit() else None
