"""The cost model as a mixed-integer program, solved with HiGHS.

Variables: ``x[t]`` whole units of each launchable type, ``y[i,t]`` copies of item ``i`` on
type ``t`` (continuous), and ``u[i]`` copies left unplaced at a large penalty. Capacity is
aggregated per type (sum over hosts), so any real packing satisfies it: the solver's dual
bound is a valid lower bound on the cost of any plan placing the same demand, and its
solution tells the packer which types to use. Existing free capacity is a zero-cost pool.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from accel.allocation import SHARE_UNITS
from autoscaler.planner.items import Item

POOL = "pool:"
TIME_LIMIT_S = 0.4
MIP_REL_GAP = 0.002


@dataclass(frozen=True)
class Capacity:
    """A type (or pool) as the program sees it: aggregated capacity and unit cost."""

    name: str
    capacity: Mapping[str, int]
    cost: float
    max_units: int | None
    """None: no per-type limit; pools are a single fixed unit."""
    hosts: int = 1
    devices: Mapping[str, int] = field(default_factory=dict)
    """Devices per unit, per accelerator resource (for the one-device-per-big-share cut)."""


@dataclass(frozen=True)
class Solution:
    units: dict[str, float]
    assignment: dict[tuple[int, str], float]
    unplaced: dict[int, float]
    cost: float
    """Objective of the solution found, without penalties."""
    bound: float
    """Valid lower bound on the cost of placing what the solution places."""


def solve(
    items: Sequence[Item],
    types: Sequence[Capacity],
    pools: Sequence[Capacity],
    global_units: int | None,
    time_limit_s: float = TIME_LIMIT_S,
) -> Solution:
    import highspy

    costs: list[float] = []
    upper: list[float] = []

    def column(cost: float, bound: float | None) -> int:
        costs.append(cost)
        upper.append(highspy.kHighsInf if bound is None else float(bound))
        return len(costs) - 1

    scale = _scales(items, [*types, *pools])
    penalty = 1000.0 * max([t.cost for t in types] + [1.0])
    x_of = {cap.name: column(cap.cost, cap.max_units) for cap in types}
    capacity_of = {cap.name: cap for cap in [*types, *pools]}
    y_of: dict[tuple[int, str], int] = {}
    u_of: dict[int, int] = {}
    rows: list[tuple[list[int], list[float], float, float]] = []
    for item in items:  # every copy is placed somewhere, or left unplaced at a penalty
        targets = [t for name in item.candidates for t in (name, POOL + name) if t in capacity_of]
        for target in targets:
            y_of[(item.index, target)] = column(0.0, item.count)
        u_of[item.index] = column(penalty, item.count)
        cols = [y_of[(item.index, t)] for t in targets] + [u_of[item.index]]
        rows.append((cols, [1.0] * len(cols), item.count, item.count))
    for cap in [*types, *pools]:  # aggregated capacity of each type (per unit) and pool
        placed = [item for item in items if (item.index, cap.name) in y_of]
        for resource in sorted({r for item in placed for r in item.needs}):
            users = [item for item in placed if item.needs.get(resource)]
            cols = [y_of[(item.index, cap.name)] for item in users]
            vals = [item.needs[resource] / scale[resource] for item in users]
            limit = cap.capacity.get(resource, 0) / scale[resource]
            if cap.name in x_of:
                rows.append(([*cols, x_of[cap.name]], [*vals, -limit], -np.inf, 0.0))
            else:
                rows.append((cols, vals, -np.inf, limit))
    for cap in types:  # a device holds one share above 1/2 (two of exactly 1/2)
        for resource, count in cap.devices.items():
            weights = [
                (y_of[(item.index, cap.name)], weight)
                for item in items
                if (item.index, cap.name) in y_of and (weight := _device_weight(item, resource)) > 0
            ]
            if weights:
                cols = [col for col, _ in weights] + [x_of[cap.name]]
                vals = [w for _, w in weights] + [-float(count)]
                rows.append((cols, vals, -np.inf, 0.0))
    if global_units is not None and x_of:
        rows.append((list(x_of.values()), [1.0] * len(x_of), -np.inf, float(global_units)))

    h = _new_solver()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    h.setOptionValue("random_seed", 0)
    h.setOptionValue("time_limit", time_limit_s)
    h.setOptionValue("mip_rel_gap", MIP_REL_GAP)
    n = len(costs)
    inf = highspy.kHighsInf
    h.addVars(n, np.zeros(n), np.array(upper))
    h.changeColsCost(n, np.arange(n, dtype=np.int32), np.array(costs))
    for cols, vals, lower, upper_bound in rows:
        h.addRow(
            max(lower, -inf),
            min(upper_bound, inf),
            len(cols),
            np.array(cols, dtype=np.int32),
            np.array(vals, dtype=np.float64),
        )
    if x_of:
        h.changeColsIntegrality(
            len(x_of),
            np.array(list(x_of.values()), dtype=np.int32),
            np.array([highspy.HighsVarType.kInteger] * len(x_of)),
        )
    h.run()
    values = list(h.getSolution().col_value)
    info = h.getInfo()
    unplaced = {index: values[col] for index, col in u_of.items() if values[col] > 1e-6}
    cost = sum(costs[col] * values[col] for col in x_of.values())
    bound = info.mip_dual_bound if x_of else info.objective_function_value
    if not np.isfinite(bound):
        bound = 0.0
    return Solution(
        units={name: values[col] for name, col in x_of.items()},
        assignment={key: values[col] for key, col in y_of.items() if values[col] > 1e-9},
        unplaced=unplaced,
        cost=cost,
        bound=max(0.0, min(bound - penalty * sum(unplaced.values()), cost)),
    )


def _device_weight(item: Item, resource: str) -> float:
    """Devices one copy occupies at least: whole ones, 1 for a share above one half, 1/2
    for exactly a half, 0 below (a valid "dual feasible" weight: per device they sum <= 1)."""
    weight = 0.0
    for part in item.parts:
        for name, share in part.devices:
            if name != resource:
                continue
            if share >= SHARE_UNITS:
                weight += share / SHARE_UNITS
            elif 2 * share > SHARE_UNITS:
                weight += 1.0
            elif 2 * share == SHARE_UNITS:
                weight += 0.5
    return weight


def _new_solver():
    """A HiGHS instance. Its constructor prints a banner on the C stdout before any option
    can be set, which would corrupt ``--json`` output, so file descriptor 1 is pointed at
    /dev/null while it is made."""
    import highspy

    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 1)
            solver = highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    return solver


def _scales(items: Sequence[Item], caps: Sequence[Capacity]) -> dict[str, float]:
    """Per-resource scale so coefficients are near 1 (memory is in bytes x 10,000)."""
    scale: dict[str, float] = {}
    for cap in caps:
        for name, quantity in cap.capacity.items():
            scale[name] = max(scale.get(name, 1.0), float(quantity) / max(cap.hosts, 1))
    for item in items:
        for name, need in item.needs.items():
            scale.setdefault(name, float(need) or 1.0)
    return scale
