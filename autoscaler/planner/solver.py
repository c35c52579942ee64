"""The HiGHS wrapper: every solver the planner makes is quiet and deterministic.

Options are set once, here: one thread, a fixed seed, no output, and a time limit that is
only a last-resort guard (reported when hit). ``highspy.Highs`` logs its banner on the C
stdout while it sets up its callbacks, before any option can be set, so the planner uses
highspy's core solver class and turns output off first. Nothing changes process-wide (no file
descriptor is repointed).

MIP work is limited by counts, never by time (:func:`limit_mip`): HiGHS calls back at fixed
points of its root cut loop and its search (the same points on any machine, under any load),
and the planner interrupts it there; the incumbent and the dual bound at that point stay
valid.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

import numpy as np

from autoscaler.planner.budget import Budget

GUARD_TIME_S = 20.0
"""Last-resort guard per solver call; never reached on sane inputs, reported when it is."""


def new_solver():
    """A quiet, deterministic HiGHS instance (output off before anything is logged)."""
    from highspy import _core

    solver = _core._Highs()
    solver.setOptionValue("output_flag", False)
    solver.setOptionValue("log_to_console", False)
    solver.setOptionValue("threads", 1)
    solver.setOptionValue("random_seed", 0)
    solver.setOptionValue("time_limit", GUARD_TIME_S)
    return solver


def add_rows(solver, rows: Sequence[tuple[list[int], list[float], float, float]]) -> None:
    """Add ``rows`` (columns, coefficients, lower, upper) to ``solver`` in one call."""
    starts, index, value = [], [], []
    for cols, vals, _, _ in rows:
        starts.append(len(index))
        index.extend(cols)
        value.extend(vals)
    if len(index) != len(value):  # HiGHS would read past the end of the values
        raise ValueError("a row has more columns than coefficients, or fewer")
    solver.addRows(
        len(rows),
        np.array([r[2] for r in rows]),
        np.array([r[3] for r in rows]),
        len(index),
        np.array(starts, np.int32),
        np.array(index, np.int32),
        np.array(value),
    )


def make_integer(solver, columns: Sequence[int]) -> None:
    """Require ``columns`` of ``solver`` to take whole values."""
    from highspy import HighsVarType

    n = len(columns)
    solver.changeColsIntegrality(
        n, np.array(columns, np.int32), np.array([HighsVarType.kInteger] * n)
    )


STALL_RISE = 1e-3
"""A bound MIP whose dual bound rose by less than this fraction over its last ``stall``
callbacks has stalled: its root cut loop now adds little (on the benchmark sweep, what it
added later was below 0.1% of the bound, and the stretches after such stalls took up to a
quarter of a second)."""


def limit_mip(
    solver,
    budget: Budget | None = None,
    *,
    settle_gap: float = math.inf,
    overrun: int | None = None,
    dual_enough: float | None = None,
    stall: int | None = None,
    stall_above: float = -math.inf,
    has_plan: bool = False,
) -> None:
    """Count ``solver``'s next MIP run's work into ``budget`` (each callback spends the
    model's rows plus columns) and interrupt it at the first callback where it may stop:

    - once ``budget``'s MIP work is spent, where the caller holds a plan (``has_plan``, e.g.
      the plan a cutoff came from) or the incumbent is within ``settle_gap`` (objective
      units) of the dual bound (by default, any incumbent), or, with ``overrun``, once it is
      spent by that much more, at any incumbent;
    - whatever the incumbent (a MIP run for its dual bound), once the dual bound reaches
      ``dual_enough``, or once it has stalled over ``stall`` callbacks (:data:`STALL_RISE`)
      at ``stall_above`` or more.
    """
    from highspy import _core

    size = solver.getNumRow() + solver.getNumCol()
    bounds: list[float] = []

    def callback(kind, message, data_out, data_in, user) -> None:
        if budget is not None:
            budget.spend_mip(size)
        dual = data_out.mip_dual_bound
        bounds.append(dual)
        primal = data_out.mip_primal_bound
        spent = budget is not None and budget.mip_exhausted
        overran = spent and overrun is not None and budget.mip_used >= budget.mip_limit + overrun
        settled = has_plan or (math.isfinite(primal) and (overran or primal - dual <= settle_gap))
        enough = dual_enough is not None and dual >= dual_enough
        stalled = (
            stall is not None
            and dual >= stall_above
            and len(bounds) > stall
            and math.isfinite(earlier := bounds[-1 - stall])
            and dual - earlier <= STALL_RISE * abs(earlier)
        )
        if (spent and settled) or enough or stalled:
            data_in.user_interrupt = True

    solver.setCallback(callback, None)
    solver.startCallback(_core.cb.HighsCallbackType.kCallbackMipInterrupt)


T = TypeVar("T")


def in_background(work: Callable[..., T], *args: object) -> Future[T]:
    """``work(*args)`` on a thread of its own. HiGHS lets go of the interpreter while it
    solves, so on a machine with two cores a solve there runs beside the caller's work. The
    result is the same however the two interleave as long as neither changes what the other
    reads (each solve has a HiGHS instance of its own)."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="planner")
    try:
        return pool.submit(work, *args)
    finally:
        pool.shutdown(wait=False)


R = TypeVar("R")


def side_by_side(work: Callable[[T], R], inputs: Sequence[T]) -> list[R]:
    """``[work(x) for x in inputs]``, every other one on a thread beside the caller's (two
    solves at once on two cores: HiGHS lets go of the interpreter while it solves). The same
    results as one by one, in order, as long as no ``work`` changes what another reads: no
    shared :class:`Budget`, whose spending order would decide where each stops."""
    if len(inputs) < 2:
        return [work(x) for x in inputs]
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="planner")
    try:
        beside = {i: pool.submit(work, x) for i, x in enumerate(inputs) if i % 2}
        here = {i: work(x) for i, x in enumerate(inputs) if not i % 2}
        return [beside[i].result() if i % 2 else here[i] for i in range(len(inputs))]
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


class SolverError(RuntimeError):
    pass
