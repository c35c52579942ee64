"""The planner's work budget: counted work, never wall-clock time.

Column generation and rounding spend *work units*: each LP solve of the master costs its
rows plus columns, each pricing pass the items it ranks for every kind. Once the budget is
spent, the search stops where it stands: what the patterns found so far cover is kept, and
the rest is placed greedily (:mod:`~autoscaler.planner.greedy`), so every feasible bundle is
still placed and the plan keeps its valid lower bound. Integer programs spend a budget of
their own (:data:`MIP_WORK_LIMIT`, counted where HiGHS calls back); once it is spent, the
optional ones (rounding again, fewest nodes) keep the first plan they have, and the first
rounding's MIP stops once its plan is within
:data:`~autoscaler.planner.rounding.FIRST_SETTLE` of its dual bound. A plan that may miss
the planner's target is rounded again with an allowance of its own
(:data:`~autoscaler.planner.rounding.REPAIR_WORK`). The same input spends the same work on
any machine, under any load, so it gets the same plan.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

WORK_LIMIT = 200_000
"""Work units one plan may spend on column generation and rounding (see module doc). On the
benchmark's problems, plans of up to 2,000 bundles spend at most 61,000; gang-heavy plans
of 20,000 and 100,000 bundles reach it. From 450,000 to this, those took 0.6-0.9 s instead
of 1.0-1.6 s, 0.3-1.3% above their bounds instead of 0.2-0.4%."""
MIP_WORK_LIMIT = 30_000
"""Work units one plan's integer programs may spend: each time HiGHS calls back from a MIP
(fixed points of its cut loop and search), the model's rows plus columns. Once spent, each
optional MIP still running, or started later, stops at its first plan
(:func:`~autoscaler.planner.solver.limit_mip`). On the 200-bundle benchmark sweep most plans
spend less; those that reach it were spending up to 20 times as much, mostly on searches
for a node fewer."""


@dataclass
class Budget:
    limit: int = WORK_LIMIT
    used: int = 0
    mip_limit: int = MIP_WORK_LIMIT
    mip_used: int = 0
    interrupt: Callable[[], bool] | None = None
    """Where set and it says so, all work is spent: work made ahead of a decision stops once
    the decision shows it unwanted (it is then dropped, so it changes no plan)."""

    def spend(self, units: int) -> None:
        self.used += units

    def spend_mip(self, units: int) -> None:
        self.mip_used += units

    @contextmanager
    def at_most(self, work: int) -> Iterator[None]:
        """Within the block, at most ``work`` more units (never past the limit)."""
        limit = self.limit
        self.limit = min(limit, self.used + work)
        try:
            yield
        finally:
            self.limit = limit

    @contextmanager
    def more_mip(self, units: int) -> Iterator[None]:
        """Within the block, ``units`` more MIP work than is used now, even past the MIP
        limit (after the block, the limit is as before)."""
        limit = self.mip_limit
        self.mip_limit = self.mip_used + units
        try:
            yield
        finally:
            self.mip_limit = limit

    @property
    def exhausted(self) -> bool:
        return self.used >= self.limit or self._interrupted()

    @property
    def mip_exhausted(self) -> bool:
        return self.mip_used >= self.mip_limit or self._interrupted()

    def _interrupted(self) -> bool:
        return self.interrupt is not None and self.interrupt()

    def note(self) -> str:
        return (
            f"work budget reached ({self.limit:,} units of column generation and rounding): "
            "the best plan found so far is kept and what it left out was placed greedily; "
            "the lower bound stays valid"
        )
