"""What user-facing messages say about user input: closest-match hints, and input quoted
briefly (a 5 MB string never comes back whole)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

QUOTE_LIMIT = 60
"""Characters of user input a message quotes."""
MATCHABLE = 200
"""Longer input is not compared with choices (nothing that long is a typo of a name)."""


def brief(value: object, limit: int = QUOTE_LIMIT) -> str:
    """``repr(value)``, cut to ``limit`` characters with how long it really was."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text):,} characters)"


def did_you_mean(text: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'x'?"``, or ``""`` when nothing is close."""
    if len(text) > MATCHABLE:
        return ""
    matches = difflib.get_close_matches(text, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {matches[0]!r}?" if matches else ""
