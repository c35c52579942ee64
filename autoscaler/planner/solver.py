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
from collections.abc import Sequence

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
    solver.addRows(
        len(rows),
        np.array([r[2] for r in rows]),
        np.array([r[3] for r in rows]),
        len(index),
        np.array(starts, np.int32),
        np.array(index, np.int32),
        np.array(value),
    )


STALL_CALLBACKS = 10
STALL_RISE = 1e-3
"""A bound MIP whose dual bound rose by less than this fraction over its last
:data:`STALL_CALLBACKS` callbacks has stalled: its root cut loop now adds little (on the
benchmark sweep, what it added later was below 0.1% of the bound, and the stretches after
such stalls took up to a quarter of a second)."""


def limit_mip(
    solver,
    budget: Budget | None = None,
    *,
    callbacks: int | None = None,
    dual_enough: float | None = None,
    stall: bool = False,
) -> None:
    """Interrupt ``solver``'s next MIP run at the first callback where it may stop:

    - with an incumbent, once ``budget``'s MIP work is spent (each callback spends the
      model's rows plus columns) or after ``callbacks`` callbacks;
    - whatever the incumbent (a MIP run for its dual bound), once the dual bound reaches
      ``dual_enough``, or (``stall``) once it has stalled (:data:`STALL_RISE`).
    """
    from highspy import _core

    size = solver.getNumRow() + solver.getNumCol()
    calls = 0
    bounds: list[float] = []

    def callback(kind, message, data_out, data_in, user) -> None:
        nonlocal calls
        calls += 1
        if budget is not None:
            budget.spend_mip(size)
        dual = data_out.mip_dual_bound
        bounds.append(dual)
        incumbent = math.isfinite(data_out.mip_primal_bound)
        spent = (budget is not None and budget.mip_exhausted) or (
            callbacks is not None and calls >= callbacks
        )
        enough = dual_enough is not None and dual >= dual_enough
        stalled = (
            stall
            and len(bounds) > STALL_CALLBACKS
            and math.isfinite(earlier := bounds[-1 - STALL_CALLBACKS])
            and dual - earlier <= STALL_RISE * abs(earlier)
        )
        if (spent and incumbent) or enough or stalled:
            data_in.user_interrupt = True

    solver.setCallback(callback, None)
    solver.startCallback(_core.cb.HighsCallbackType.kCallbackMipInterrupt)


class SolverError(RuntimeError):
    pass
