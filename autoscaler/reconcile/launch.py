"""Launch: the plan's launches as create calls, in batches, under a per-round budget (the
global rate limit)."""

from __future__ import annotations

from autoscaler.planner import Plan
from autoscaler.reconcile.actions import Launch

LAUNCH_BATCH = 50
"""Units per create call."""
LAUNCHES_PER_TICK = 500
"""Units launched per round at most (the global rate limit)."""


def launches(plan: Plan, budget: int) -> list[Launch]:
    """Create calls for ``plan``'s launches, ``budget`` units at most."""
    calls = []
    for launch in plan.launches:
        remaining = min(launch.count, budget)
        budget -= remaining
        while remaining > 0:
            batch = min(remaining, LAUNCH_BATCH)
            calls.append(Launch(launch.node_type, batch, launch.serves))
            remaining -= batch
    return calls
