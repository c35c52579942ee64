"""The HiGHS wrapper: every solver the planner makes is quiet and deterministic.

Options are set once, here: one thread, a fixed seed, no output, and a time limit that is
only a last-resort guard (reported when hit). ``highspy.Highs`` logs its banner on the C
stdout while it sets up its callbacks, before any option can be set; the planner needs no
callbacks, so it uses highspy's core solver class and turns output off first. Nothing
changes process-wide (no file descriptor is repointed).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

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


class SolverError(RuntimeError):
    pass
