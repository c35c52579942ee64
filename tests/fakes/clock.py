"""A clock tests move by hand, so nothing waits on real time."""

from __future__ import annotations


class Clock:
    """Epoch seconds that change only when a test calls :meth:`advance`."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
