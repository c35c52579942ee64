"""Closest-match hints for misspelt keys and values."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(text: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'x'?"``, or ``""`` when nothing is close."""
    matches = difflib.get_close_matches(text, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {matches[0]!r}?" if matches else ""
