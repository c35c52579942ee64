"""What users type, handled briefly: short quotes in error messages, JSON that fails in one line.

Error messages echo a short prefix of what they were given, never all of it. This lives in
``accel`` (which imports nothing else from the project) so node-side code and the
autoscaler's config and demand parsing share one rule.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable
from typing import Any

BRIEF_LIMIT = 40
"""Characters of user input an error message quotes."""
MATCH_LIMIT = 100
"""Longer input gets no closest-match hints: no name is that long, and matching it is slow."""


class BadJsonError(ValueError):
    """Text that is not usable JSON; the message is one short line."""


def clip(text: str, limit: int = BRIEF_LIMIT) -> str:
    """``text`` itself when short, else its first ``limit`` characters and its length."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text)} chars)"


def brief(value: object, limit: int = BRIEF_LIMIT) -> str:
    """``repr(value)`` for an error message, cut by :func:`clip`."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}… ({len(value)} chars)"
    try:
        return clip(repr(value), limit)
    except ValueError:  # an int beyond Python's digit limit for printing
        return f"<{type(value).__name__} too long to show>"


def did_you_mean(text: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'x'?"``, or ``""`` when nothing is close (or ``text`` is too long to
    be a misspelt name)."""
    if len(text) > MATCH_LIMIT:
        return ""
    matches = difflib.get_close_matches(text, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {matches[0]!r}?" if matches else ""


def parse_json(text: str) -> Any:
    """``json.loads`` whose every failure is a :class:`BadJsonError` with a short message."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise BadJsonError(f"not valid JSON ({err.msg} at {err.pos})") from None
    except RecursionError:
        raise BadJsonError("not usable JSON (nested too deeply)") from None
    except ValueError:  # Python's limit on the digits of an integer
        raise BadJsonError("not usable JSON (a number has too many digits)") from None
