"""Running the reconcile loop: rounds on an interval, rounds until a condition holds, and a
structured summary of each round. Time and sleep are injected, so tests never wait."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from autoscaler.lifecycle import TERMINATING
from autoscaler.planner import Plan
from autoscaler.ray_cluster.client import RayUnavailableError
from autoscaler.reconciler import Reconciler, TickResult
from autoscaler.state import RoundBusyError
from providers.errors import ProviderError

if TYPE_CHECKING:
    from autoscaler.metrics import Metrics

POLL_S = 5.0
ROUND_ERRORS = (ProviderError, RayUnavailableError, RoundBusyError)
"""What fails one round (the cloud, or Ray, could not be asked, or another monitor's round on
the same state would not end) without ending the loop."""


@dataclass(frozen=True)
class RoundSummary:
    """What one reconcile round saw and did."""

    states: dict[str, int]
    """Owned nodes per lifecycle state."""
    launched: dict[str, int]
    terminated: int
    failures: int
    infeasible: int
    plan_cost_per_hour: float
    seconds: float
    held: tuple[str, ...] = ()
    """Node types held after their nodes repeatedly failed to come up."""
    waiting_for: str | None = None
    """Why nothing was launched, when it is the cluster itself (no head)."""

    @property
    def nodes(self) -> int:
        return sum(self.states.values())

    def fleet(self) -> tuple[int, tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]:
        """Node count, states and launches: what changes when the fleet changes."""
        return self.nodes, tuple(sorted(self.states.items())), tuple(sorted(self.launched.items()))

    def line(self) -> str:
        states = ", ".join(f"{n} {s}" for s, n in sorted(self.states.items()))
        return "; ".join(
            [
                f"nodes {self.nodes}" + (f" ({states})" if states else ""),
                "launched " + (", ".join(f"{n} x {t}" for t, n in self.launched.items()) or "0"),
                f"terminated {self.terminated}",
                f"failures {self.failures}",
                f"infeasible {self.infeasible}",
                f"plan ${self.plan_cost_per_hour:.2f}/h",
                *([f"held {', '.join(self.held)}"] if self.held else []),
                *([self.waiting_for] if self.waiting_for else []),
                f"{self.seconds:.2f}s",
            ]
        )


class InfeasibleWatch:
    """Each infeasible demand shape's reason, said once per change (and when it clears)."""

    def __init__(self) -> None:
        self._said: dict[tuple, str] = {}

    def update(self, plan: Plan) -> list[str]:
        """Lines for the shapes whose reason is new or changed, or that became feasible."""
        now = {
            tuple(sorted(i.resources.items())): (
                i.reason
                + (f" (closest node type: {i.closest_node_type})" if i.closest_node_type else "")
            )
            for i in plan.infeasible
        }
        lines = [
            f"infeasible: {_shape(shape)}: {reason}"
            for shape, reason in now.items()
            if self._said.get(shape) != reason
        ]
        lines += [f"feasible again: {_shape(shape)}" for shape in self._said if shape not in now]
        self._said = now
        return lines


def _shape(shape: tuple) -> str:
    return "{" + ", ".join(f"{name}: {amount:g}" for name, amount in shape) + "}"


def summarize(result: TickResult) -> RoundSummary:
    return RoundSummary(
        states=dict(Counter(view.state for view in result.nodes)),
        launched=dict(result.launched),
        terminated=len(result.terminated),
        failures=len(result.failures),
        infeasible=sum(i.count for i in result.plan.infeasible),
        plan_cost_per_hour=result.plan.cost_per_hour,
        seconds=result.seconds,
        held=tuple(h.node_type for h in result.held),
        waiting_for=result.waiting_for,
    )


def all_reported(result: TickResult) -> bool:
    """Every live node has reported its accelerators."""
    return all(v.reported for v in result.nodes if v.state != TERMINATING)


def run_rounds(
    reconciler: Reconciler,
    interval_s: float,
    on_round: Callable[[TickResult | None, Exception | None], None],
    rounds: int | None = None,
    metrics: Metrics | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Reconcile every ``interval_s`` (``rounds`` times, or forever). A round the cloud or
    Ray fails is reported to ``on_round`` with its error and the loop goes on."""
    done = 0
    while rounds is None or done < rounds:
        if done:
            sleep(interval_s)
        started = reconciler.clock()
        try:
            result = reconciler.tick()
        except ROUND_ERRORS as err:
            on_round(None, err)
        else:
            if metrics is not None:
                events = [e for e in reconciler.store.events(500) if e.at >= started]
                metrics.observe(result, events)
            on_round(result, None)
        done += 1


def tick_until(
    reconciler: Reconciler,
    done: Callable[[TickResult], bool],
    timeout_s: float,
    poll_s: float = POLL_S,
    on_round: Callable[[TickResult], None] = lambda _: None,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> tuple[bool, TickResult]:
    """Tick until ``done(result)`` or ``timeout_s``; (done, the last round)."""
    deadline = monotonic() + timeout_s
    while True:
        result = reconciler.tick()
        on_round(result)
        if done(result):
            return True, result
        remaining = deadline - monotonic()
        if remaining <= 0:
            return False, result
        sleep(min(poll_s, remaining))
