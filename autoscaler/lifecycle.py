"""The per-instance lifecycle and how long each state may last.

requested -> allocated -> waiting_for_report -> running -> terminating. A node counts as
pending capacity until it reports its accelerators, so demand it will serve never launches
a second node. Accelerator nodes get longer timeouts: GPU and TPU nodes take minutes to boot
and load drivers.
"""

from __future__ import annotations

from collections.abc import Mapping

REQUESTED = "requested"
ALLOCATED = "allocated"
WAITING_FOR_REPORT = "waiting_for_report"
RUNNING = "running"
TERMINATING = "terminating"

TIMEOUTS_S: Mapping[str, Mapping[str, float]] = {
    "cpu": {REQUESTED: 300, ALLOCATED: 600, WAITING_FOR_REPORT: 600, TERMINATING: 600},
    "accelerator": {REQUESTED: 600, ALLOCATED: 1200, WAITING_FOR_REPORT: 1800, TERMINATING: 900},
}
"""Seconds a node may stay in a state before it is replaced (running has no limit)."""


def timeout_s(state: str, accelerated: bool, overrides: Mapping[str, float] | None = None) -> float:
    """How long ``state`` may last; ``overrides`` (from the cluster YAML) win."""
    if overrides and state in overrides:
        return float(overrides[state])
    limits = TIMEOUTS_S["accelerator" if accelerated else "cpu"]
    return float(limits.get(state, float("inf")))
