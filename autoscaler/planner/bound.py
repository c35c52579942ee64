"""Lower bounds on the cost and on the number of units of any plan, as one LP.

Every plan that places the demand satisfies, for each kind (launchable type or group of free
capacity): its units' aggregated capacity holds what is placed on it, one unit holds at most
as many copies of an item as fit on it alone, per host and resource the items' weights under
a dual-feasible function (:func:`_dff`) sum to at most 1, a device takes at most one share
above half a device (two of exactly half), whole requests take no device that holds a
fractional share (and a unit holding copies of a share has at least one such device, however
few copies it holds: :func:`_shared_device_rows`), a launched unit holds something, and
(accelerator conservation) a launched accelerator unit holds accelerator work, of which no
more copies are placed than there are (added where the LP places more); and, since units are
whole, the kinds an item may use number at least as many units as that item and every item
confined to them need, rounded up (per resource, per device and per copy). The LP over those
constraints (and, per STRICT_SPREAD gang, at most one of its bundles per host for each copy
of the gang), with unit counts relaxed to real numbers, is therefore a valid lower bound on
the cost of any plan under the policy in force; the same LP with unit costs of 1 bounds the
number of units, and with a cap on the cost added, the number of units of any plan costing
at most that much. Its whole-unit MIPs keep unit counts whole, and the copies placed of
items a unit holds few of where the LP splits them (:data:`WHOLE_COPIES_UP_TO`), as they
are in any plan.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial

import numpy as np

from accel.allocation import SHARE_UNITS
from autoscaler.planner.items import DEVICE_RESOURCES, Item
from autoscaler.planner.packing import Kind, fit
from autoscaler.planner.solver import (
    GUARD_TIME_S,
    add_rows,
    in_background,
    limit_mip,
    make_integer,
    new_solver,
)

MIP_BOUND_ABOVE = 0.025
"""Where the plan costs more than this above the LP bound, the Lagrangian bound is asked for,
and where it is still that far, whole units are required too (closer than that, the bound
already proves the plan within the 3% target)."""
NODE_MIP_ABOVE = 1.5
"""The node bound gets its whole-unit MIP only where the plan has more than this many times
the LP's node bound (closer than that, the LP bound already shows the plan near its fewest).
That MIP is cut off at the plan's own units (the plan shows no fewer are needed to beat it)
and does not restart: on 200-bundle plans, the same bounds in a third to a half of the time
(without the cutoff, HiGHS searched for any first plan at its root, up to a quarter of a
second)."""
NODE_MIP_NODES = 1
"""...and it stops after its root (its cut loop): on the 9 plans of the 200-bundle sweep where
it runs, the search beyond the root took as long again (up to 0.15 s) to raise the node bound
by 0 to 8 nodes, for a bound the plan's cost does not depend on."""
MIP_BOUND_UNITS = 300
"""...and where the plan has at most this many units (beyond that, rounding a fractional
unit per kind is a small share of the cost, the Lagrangian bound covers what packing adds,
and the MIP's root costs more than it gains)."""
MIP_BOUND_NODES = 20
"""Branch-and-bound nodes for those MIPs (deterministic; the dual bound is valid wherever the
search stops). A few nodes beyond the root close what the root's cuts leave of small plans'
whole units (a 20-bundle plan's bound went from 5.9% below its cost to its cost); the MIP
still stops once its bound shows the plan close (:func:`~autoscaler.planner.solver.limit_mip`)."""
COST_STALL = 10
"""The whole-unit cost MIP stops once its dual bound stalls over this many callbacks
(:func:`~autoscaler.planner.solver.limit_mip`), but only where it shows the plan within
:data:`TARGET` already (else it works on for the proof; the unit bound's MIP always does)."""
TARGET = 0.03
"""The planner's quality target: a plan costs at most this fraction above its bound."""
DFF_ORDERS = (1, 2)
"""Per kind and resource, a row per order of the dual-feasible function (:func:`_dff`)."""
PRIMAL_SIMPLEX = 4
"""HiGHS's ``simplex_strategy`` value for the primal simplex method."""
DANTZIG_PRICING = 0
"""HiGHS's ``simplex_dual_edge_weight_strategy`` value for Dantzig pricing, which the cost LP
uses: over 85 bound LPs of 200 to 20,000 bundles and 20 to 60 node types, half the time of
the default (steepest edge; the same optimum), and at most 0.12 s where the default took
1.2 s on one (a gang-heavy 2,000-bundle plan over 60 types: 9,845 iterations against
1,439)."""
WHOLE_COPIES_UP_TO = 1
"""In the whole-unit MIPs, the copies of an item placed on a kind are whole too where one
unit of that kind holds at most this many and the LP places a fraction of one there: with
units alone whole, a bundle that fills a unit (an 8-GPU task) could still be spread over the
room other work leaves on several units (on a gang-heavy 200-bundle plan, a bound 3.2%
below the optimum; with those copies whole, the optimum's own cost, at the root). Only
those the LP splits: with every such column whole, MIPs over 75 node types took ten times
as long for a bound 0.2% higher."""
BOUND_ONLY_OFF = (
    "mip_heuristic_run_feasibility_jump",
    "mip_heuristic_run_rins",
    "mip_heuristic_run_rens",
    "mip_heuristic_run_root_reduced_cost",
    "mip_detect_symmetry",
)
"""Heuristics a MIP run only for its dual bound does without."""


@dataclass(frozen=True)
class _CostMip:
    """A whole-unit cost MIP a bound model ran."""

    cap: float | None
    dual: float
    optimum: float | None
    """The cost of its plan, where it ended at its optimum."""
    enough: bool
    """It stopped once its bound reached what was enough then (it searched no further)."""


@dataclass(frozen=True)
class Bounds:
    cost: float
    """Cost of the new units of any plan placing as much (0 when nothing is needed)."""
    units: int
    """New units of any such plan."""
    notes: tuple[str, ...] = ()


class BoundModel:
    """The bound's rows for one demand (see the module doc) and its cost LP. Built once, it
    serves whatever cost cap is asked for later: the units' columns are tightened to what the
    cap buys and the LP solved again from where it stood. Its cost LP may be solved in the
    background (``background``): HiGHS lets go of the interpreter while it solves, so the
    planner builds the model before it plans and the LP runs beside the planning."""

    def __init__(
        self,
        items: Sequence[Item],
        demand: Mapping[int, int],
        kinds: Sequence[Kind],
        global_room: int | None,
        cost_cap: float | None = None,
        background: bool = False,
    ) -> None:
        self.demand = demand
        self.items = [item for item in items if demand.get(item.index, 0) > 0]
        self.kinds = [kind for kind in kinds if kind.limit != 0]
        self.notes: list[str] = []
        self.cap = cost_cap
        self.counted = False
        self.cost_bound = 0.0
        self._solving: Future[None] | None = None
        self._cost_mips: list[_CostMip] = []
        if self.items:
            self._build(global_room)
            self.h = self._model()
            self.h.setOptionValue("simplex_dual_edge_weight_strategy", DANTZIG_PRICING)
            if background:
                self._solving = in_background(self._solve_cost)
            else:
                self._solve_cost()

    def _build(self, global_room: int | None) -> None:
        import highspy

        items, demand, kinds, cost_cap = self.items, self.demand, self.kinds, self.cap
        inf = highspy.kHighsInf
        self.cost: list[float] = []
        self.upper: list[float] = []
        self.nodes: list[float] = []
        cost, upper, nodes = self.cost, self.upper, self.nodes

        def column(c: float, hi: float, node: float = 0.0) -> int:
            cost.append(c)
            upper.append(hi)
            nodes.append(node)
            return len(cost) - 1

        rows: list[tuple[list[int], list[float], float, float]] = []
        self.x_of = x_of = {
            id(kind): column(
                kind.cost, _most_units(kind, demand, cost_cap), 1.0 if kind.new else 0.0
            )
            for kind in kinds
        }
        self.penalty = penalty = 1000.0 * max([kind.cost for kind in kinds] + [1.0])
        placements: dict[int, list[int]] = {item.index: [] for item in items}
        self.few_copies_cols: list[int] = []
        """Copies placed of an item one unit of the kind holds at most
        :data:`WHOLE_COPIES_UP_TO` of (whole numbers in any plan)."""
        hosting: dict[int, list[tuple[int, int]]] = {item.index: [] for item in items}
        anchoring: set[int] = set()
        self.anchor_placements: dict[int, list[int]] = {}
        """Where each item that may hold an accelerator unit is placed (see
        :meth:`_cover_anchors_once`)."""
        units: dict[int, tuple[dict[str, int], dict[str, tuple[int, int]]]] = {}
        for kind in kinds:
            x = x_of[id(kind)]
            eligible = []
            for item in kind.items:
                if item.index not in placements:
                    continue
                copies = sum(
                    fit(host, item, demand[item.index]) for host in kind.hosts
                )  # reads only
                if copies:
                    eligible.append((item, copies))
            if not eligible:
                continue
            y_of = {}
            for item, copies in eligible:
                hosting[item.index].append((x, copies))
                y = column(0.0, inf)
                if copies <= WHOLE_COPIES_UP_TO:
                    self.few_copies_cols.append(y)
                y_of[item.index] = y
                placements[item.index].append(y)
                rows.append(([y, x], [1.0, -float(copies)], -inf, 0.0))  # copies per unit
            gangs: dict[int, list[Item]] = {}  # a host holds one bundle of each gang copy at most
            for item, _ in eligible:
                if item.spread_group is not None:
                    gangs.setdefault(item.spread_group, []).append(item)
            for members in (m for m in gangs.values() if len(m) > 1):
                copies = min(demand[i.index] // i.slots for i in members)  # of the gang
                cols = [*(y_of[i.index] for i in members), x]
                rows.append((cols, [1.0] * len(members) + [-copies * len(kind.hosts)], -inf, 0))
            capacity: dict[str, int] = {}
            for host in kind.hosts:
                for name, quantity in host.free.items():
                    capacity[name] = capacity.get(name, 0) + max(quantity, 0)
            units[x] = (capacity, _devices(kind))
            users_of: dict[str, list[tuple[int, int]]] = {}  # resource -> (y, need) per user
            for item, _ in eligible:
                for name, need in item.needs.items():
                    if need:
                        users_of.setdefault(name, []).append((y_of[item.index], need))
            for name in sorted(users_of):
                if capacity.get(name):
                    users = users_of[name]
                    cols = [y for y, _ in users] + [x]
                    vals = [need / capacity[name] for _, need in users] + [-1.0]
                    rows.append((cols, vals, -inf, 0.0))
            for name in sorted(users_of):
                host_room = max((max(h.free.get(name, 0), 0) for h in kind.hosts), default=0)
                holding = sum(1 for h in kind.hosts if h.free.get(name, 0) > 0)
                users = [(y, need) for y, need in users_of[name] if need > 0]
                for order in DFF_ORDERS:
                    weights = [(y, need, _dff(need, host_room, order)) for y, need in users]
                    if any(w * host_room > need for _, need, w in weights):
                        cols = [y for y, _, _ in weights] + [x]
                        vals = [w for _, _, w in weights] + [-float(holding)]
                        rows.append((cols, vals, -inf, 0.0))
            for name, (devices, size) in _devices(kind).items():
                weights = [(item, _device_weight(item, name, size)) for item, _ in eligible]
                weights = [(item, w) for item, w in weights if w > 0]
                if weights:
                    cols = [y_of[item.index] for item, _ in weights] + [x]
                    rows.append((cols, [w for _, w in weights] + [-float(devices)], -inf, 0.0))
                rows.extend(_shared_device_rows(eligible, y_of, x, name, devices, size))
            if kind.new:  # a launched unit holds something (accelerator work, if it must)
                holders = [
                    y_of[item.index]
                    for item, _ in eligible
                    if not (kind.needs_anchor and item.rider)
                ]
                if kind.needs_anchor:
                    anchoring.update(item.index for item, _ in eligible if not item.rider)
                rows.append(([x, *holders], [1.0] + [-1.0] * len(holders), -inf, 0.0))
        for item in items:
            u = column(penalty, inf)
            cols = [*placements[item.index], u]
            rows.append((cols, [1.0] * len(cols), float(demand[item.index]), inf))
            if item.index in anchoring:
                self.anchor_placements[item.index] = list(placements[item.index])
            placements[item.index].append(u)
        self.slack_cols = [placements[item.index][-1] for item in items]
        rows.extend(_cover_rows(items, demand, hosting, units))
        if global_room is not None:
            new = [x_of[id(kind)] for kind in kinds if kind.new]
            if new:
                rows.append((new, [1.0] * len(new), -inf, float(global_room)))

        self.rows = rows

    def _model(self):
        h = new_solver()
        n = len(self.cost)
        h.addVars(n, np.zeros(n), np.array(self.upper))
        h.changeColsCost(n, np.arange(n, dtype=np.int32), np.array(self.cost))
        add_rows(h, self.rows)
        return h

    def _solve_cost(self) -> None:
        self.cost_bound = _solve(self.h, self.notes, self.slack_cols, self.penalty)
        while rows := self._cover_anchors_once():
            add_rows(self.h, rows)
            self.rows.extend(rows)
            self.cost_bound = _solve(self.h, self.notes, self.slack_cols, self.penalty)

    def _cover_anchors_once(self) -> list[tuple[list[int], list[float], float, float]]:
        """Rows placing at most the demand of each item whose copies the LP places more of
        than there are, each extra copy holding an accelerator unit that only CPU-only work
        fills (no plan places a copy twice). Added only where the LP does so, the model is
        otherwise unchanged."""
        import highspy

        if self.h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return []
        values = self.h.getSolution().col_value
        rows = []
        for index, cols in list(self.anchor_placements.items()):
            if sum(values[c] for c in cols) > self.demand[index] + 1e-6:
                rows.append((cols, [1.0] * len(cols), -math.inf, float(self.demand[index])))
                del self.anchor_placements[index]
        return rows

    def _set_cap(self, cost_cap: float | None) -> None:
        """Units' columns bounded by what ``cost_cap`` buys (the cost LP solved again where
        that changes them)."""
        if self._solving is not None:
            self._solving.result()
            self._solving = None
        if cost_cap == self.cap:
            return
        self.cap = cost_cap
        changed = []
        for kind in self.kinds:
            x = self.x_of[id(kind)]
            most = _most_units(kind, self.demand, cost_cap)
            if most != self.upper[x]:
                self.upper[x] = most
                changed.append(x)
        if changed:
            self.h.changeColsBounds(
                len(changed),
                np.array(changed, np.int32),
                np.zeros(len(changed)),
                np.array([self.upper[x] for x in changed]),
            )
            self._solve_cost()

    def bounds(
        self,
        cost_cap: float | None = None,
        plan_units: int | None = None,
        known_cost: Callable[[float], float] | None = None,
        close: float = MIP_BOUND_ABOVE,
        count_units: bool = True,
        whole_floor: float = 0.0,
        meanwhile: Callable[[Future[float | None]], None] | None = None,
        plan_cost: float | None = None,
    ) -> Bounds:
        """Bounds for placing the demand; the unit bound holds for plans whose new units cost
        at most ``cost_cap`` (None: any plan). ``known_cost(floor)``: a cost bound proved
        otherwise (a Lagrangian one; at most ``floor`` where it cannot beat that), asked for
        only where the LP bound does not show a plan costing ``cost_cap`` within ``close`` of
        the bound; where it does, the whole-unit cost MIP is skipped, and that MIP stops once
        it does (it runs beside the unit bound). ``count_units``: False leaves the unit bound
        at 0 (only the cost bound is wanted; counting changes the model, so it comes last).
        ``whole_floor``: a cost bound this demand got before (rounding's), kept where the LP's
        is lower; where it shows a plan costing ``cost_cap`` within :data:`TARGET`, the
        whole-unit cost MIP, which gave it, is not run again. ``meanwhile(mip)``: the caller's
        work, done while that MIP runs (only where it runs; ``mip`` will hold its dual
        bound). ``plan_cost``: the cost of the plan the bound is for; where the bound known
        shows it within :data:`TARGET`, that MIP is not run for a tighter one (on the
        200-bundle sweep, 0.1-0.3 s for a bound a few tenths of a percent higher)."""
        if not self.items:
            return Bounds(0.0, 0)
        if self.counted:
            raise RuntimeError("this bound model's units were counted already")
        self._set_cap(cost_cap)
        notes = list(self.notes)
        cost_bound = max(self.cost_bound, whole_floor)
        small = plan_units is not None and plan_units <= MIP_BOUND_UNITS
        close = 1 + close
        if known_cost is not None and cost_cap is not None and cost_cap > close * cost_bound:
            cost_bound = max(cost_bound, known_cost(cost_bound))
        again = cost_cap is not None and cost_cap > (1 + TARGET) * whole_floor
        if again and (earlier := self._earlier_cost_mip(cost_cap)) is not None:
            cost_bound, again = max(cost_bound, earlier), False
        cost_mip, cost_notes = None, []
        shown = plan_cost is not None and plan_cost <= (1 + TARGET) * cost_bound
        if small and again and not shown and cost_cap > close * cost_bound:
            enough, stall_above = cost_cap / close, cost_cap / (1 + TARGET)
            lp = list(self.h.getSolution().col_value)  # read here: the unit bound changes it
            cost_mip = in_background(self._whole_units, None, enough, cost_notes, lp, stall_above)
        units = 0
        if count_units:
            units = self._unit_bound(plan_units if small else None, notes)
        if cost_mip is not None:
            if meanwhile is not None:
                meanwhile(cost_mip)
            dual = cost_mip.result()
            notes.extend(cost_notes)
            if dual is not None:
                cost_bound = max(cost_bound, dual)
        return Bounds(max(cost_bound, 0.0), units, tuple(notes))

    def _earlier_cost_mip(self, cost_cap: float) -> float | None:
        """The bound of a whole-unit cost MIP this model ran that one under ``cost_cap``
        cannot better: one that ended at its optimum, where ``cost_cap`` buys that plan (the
        optimum under any such cap), or one that searched as far as its limits let it under
        a cap no looser (a looser cap only lets dearer plans in). Any such MIP's bound holds
        for every plan: it is at most its cap, and a plan its cap leaves out costs more."""
        found = [
            run.dual
            for run in self._cost_mips
            if (run.optimum is not None and run.optimum <= cost_cap)
            or (not run.enough and run.cap is not None and run.cap <= cost_cap)
        ]
        return max(found, default=None)

    def _unit_bound(self, plan_units: int | None, notes: list[str]) -> int:
        """Fewest new units of a plan placing as much and costing at most the cap; with whole
        units too where the LP's bound is far below ``plan_units``."""
        h, slack_cols, n = self.h, self.slack_cols, len(self.cost)
        self.counted = True
        # The unit bound is for plans placing as much: hold the unplaced copies where they are.
        left = h.getSolution().col_value
        for col in slack_cols:
            h.changeColBounds(col, 0.0, left[col] + 1e-9)
        if self.cap is not None:
            self._add_cost_cap(h)
        node_objective = np.array(self.nodes)
        node_objective[slack_cols] = 10.0
        h.changeColsCost(n, np.arange(n, dtype=np.int32), node_objective)
        # The cost LP's basis stays feasible (its plan costs at most the cap, and leaves no
        # more unplaced): primal simplex reoptimises it for units in a fraction of dual
        # simplex's iterations (a third to a fifth on 2,000-bundle gang-heavy plans).
        h.setOptionValue("simplex_strategy", PRIMAL_SIMPLEX)
        unit_bound = _solve(h, notes, slack_cols, 10.0)
        if plan_units is not None and plan_units > NODE_MIP_ABOVE * unit_bound:
            enough = plan_units / NODE_MIP_ABOVE
            dual = self._whole_units(
                np.array(self.nodes),
                enough,
                notes,
                h.getSolution().col_value,
                cutoff=plan_units,
                nodes=NODE_MIP_NODES,
            )
            if dual is not None:
                unit_bound = max(unit_bound, dual)
        return max(0, math.ceil(unit_bound - 1e-6))

    def _add_cost_cap(self, h) -> None:
        """Only plans whose new units cost at most the cap (a row on ``h``)."""
        new = [self.x_of[id(kind)] for kind in self.kinds if kind.new and kind.cost > 0]
        if new:
            prices = np.array([self.cost[c] for c in new])
            h.addRow(-math.inf, self.cap, len(new), np.array(new, np.int32), prices)

    def _whole_units(
        self,
        objective: np.ndarray | None,
        enough: float,
        notes: list[str],
        lp_values: Sequence[float],
        stall_above: float = math.inf,
        cutoff: float | None = None,
        nodes: int = MIP_BOUND_NODES,
    ) -> float | None:
        """Root dual bound with whole units (and whole copies of the items a unit holds at
        most :data:`WHOLE_COPIES_UP_TO` of, where ``lp_values`` split them), of the cost
        (``objective`` None) or of ``objective`` among plans within the cap (valid wherever
        the search stops: at the node limit, once it reaches ``enough``, or once the cut loop
        stalls). ``cutoff``: the objective of a known plan (HiGHS then prunes what cannot beat
        it, and does not restart). ``nodes``: its branch-and-bound node limit."""
        import highspy

        mip = self._model()
        n = len(self.cost)
        split = [c for c in self.few_copies_cols if abs(lp_values[c] - round(lp_values[c])) > 1e-6]
        make_integer(mip, [*self.x_of.values(), *split])
        for col in self.slack_cols:  # a plan placing the demand given leaves nothing unplaced
            mip.changeColBounds(col, 0.0, 0.0)
        if self.cap is not None and objective is not None:
            self._add_cost_cap(mip)
            mip.changeColsCost(n, np.arange(n, dtype=np.int32), objective)
        mip.setOptionValue("mip_max_nodes", nodes)
        for option in BOUND_ONLY_OFF:  # a bound needs no primal heuristics
            mip.setOptionValue(option, False)
        mip.setOptionValue("mip_heuristic_effort", 0.0)
        mip.setOptionValue("mip_rel_gap", 1e-4)
        if cutoff is not None:
            mip.setOptionValue("objective_bound", cutoff)
            mip.setOptionValue("mip_allow_restart", False)
        limit_mip(mip, dual_enough=enough, stall=COST_STALL, stall_above=stall_above)
        mip.run()
        status = mip.getModelStatus()
        if status == highspy.HighsModelStatus.kTimeLimit:
            notes.append(f"bound MIP: solver time guard ({GUARD_TIME_S:g} s) reached")
        dual = mip.getInfo().mip_dual_bound
        if not np.isfinite(dual) or status == highspy.HighsModelStatus.kInfeasible:
            return None
        if objective is None:
            optimal = status == highspy.HighsModelStatus.kOptimal
            optimum = mip.getInfo().objective_function_value if optimal else None
            self._cost_mips.append(_CostMip(self.cap, dual, optimum, dual >= enough))
        return dual


def _most_units(kind: Kind, demand: Mapping[int, int], cost_cap: float | None) -> float:
    """Units of ``kind`` in any plan that matters: within its limit, at most one per copy it
    may hold (a plan with an empty unit costs more and has more units than one without),
    and, for a bound on plans costing at most ``cost_cap``, no more than that buys (tight
    bounds on the whole-unit columns make the MIPs' roots cheap)."""
    caps = [sum(demand.get(item.index, 0) for item in kind.items)]
    if kind.limit is not None:
        caps.append(kind.limit)
    if cost_cap is not None and kind.cost > 0:
        caps.append(math.floor(cost_cap / kind.cost + 1e-9))
    return float(max(0, min(caps)))


def _solve(h, notes: list[str], slack_cols: list[int], penalty: float) -> float:
    import highspy

    h.run()
    status = h.getModelStatus()
    if status != highspy.HighsModelStatus.kOptimal:
        notes.append(f"bound LP ended {h.modelStatusToString(status)}: bound reported as 0")
        return 0.0
    values = h.getSolution().col_value
    # Dual objective minus the penalty of what the LP leaves unplaced: what placing the rest
    # costs at least (an LP's objective equals its dual bound at optimality).
    value = h.getInfo().objective_function_value
    return value - penalty * sum(values[c] for c in slack_cols)


def _cover_rows(
    items: Sequence[Item],
    demand: Mapping[int, int],
    holders: Mapping[int, list[tuple[int, int]]],
    units: Mapping[int, tuple[dict[str, int], dict[str, tuple[int, int]]]],
) -> list[tuple[list[int], list[float], float, float]]:
    """Whole units: per set of kinds that some item may use, the units of those kinds hold
    every item that may use no other kind, so there are at least as many as the most
    demanding resource (scalar, devices, copies per unit) needs, rounded up."""
    inf = float("inf")
    kinds_of = {i.index: frozenset(x for x, _ in holders[i.index]) for i in items}
    sets = sorted({tuple(sorted(kinds_of[i.index])) for i in items if kinds_of[i.index]})
    rows = []
    for kinds in sets:
        within = frozenset(kinds)
        members = [i for i in items if kinds_of[i.index] and kinds_of[i.index] <= within]
        need = 0
        for item in members:
            most = max(copies for _, copies in holders[item.index])
            need = max(need, -(-demand[item.index] // most))
        names = sorted({n for item in members for n in item.needs})
        for name in names:
            total = sum(item.needs.get(name, 0) * demand[item.index] for item in members)
            room = max(units[x][0].get(name, 0) for x in kinds)
            if total > 0 and room > 0:
                need = max(need, -(-total // room))
        device_names = sorted({n for x in kinds for n in units[x][1]})
        for name in device_names:
            shapes = [units[x][1].get(name) for x in kinds]
            if any(s is None for s in shapes) and any(units[x][0].get(name, 0) for x in kinds):
                continue
            shapes = [s for s in shapes if s is not None]
            size = max(s[1] for s in shapes)
            count = max(s[0] for s in shapes)
            weight = sum(_device_weight(item, name, size) * demand[item.index] for item in members)
            if weight > 0 and count > 0:
                need = max(need, math.ceil(weight / count - 1e-9))
        if need > 0:
            rows.append((list(kinds), [1.0] * len(kinds), float(need), inf))
    return rows


def _devices(kind: Kind) -> dict[str, tuple[int, int]]:
    """Per device resource: (devices per unit, share per device) where all are equal."""
    found: dict[str, tuple[int, int]] = {}
    for host in kind.hosts:
        for name, shares in host.devices.items():
            if name not in DEVICE_RESOURCES or not shares:
                continue
            if len(set(shares)) != 1:
                return {}
            count, size = found.get(name, (0, shares[0]))
            if size != shares[0]:
                return {}
            found[name] = (count + len(shares), size)
    return found


def _dff(need: int, room: int, order: int) -> float:
    """Fekete and Schepers' dual-feasible function u^(order) of ``need / room``: weights of
    items that fit one host together sum to at most 1 (and 1 for anything above ``room``),
    so per host they bound the copies a resource holds more tightly than its share (an item
    above half a host's room weighs 1: two of them never share a host)."""
    if need > room:
        return 1.0
    if (order + 1) * need % room == 0:
        return need / room
    return ((order + 1) * need // room) / order


def _device_weight(item: Item, resource: str, size: int) -> float:
    """Devices one copy occupies at least: whole ones, 1 for a share above half a device,
    1/2 for exactly half, 0 below (per device these weights sum to at most 1)."""
    weight = 0.0
    for part in item.parts:
        for name, share in part.devices:
            if name != resource:
                continue
            if share >= SHARE_UNITS:
                weight += share // SHARE_UNITS
            elif 2 * share > size:
                weight += 1.0
            elif 2 * share == size:
                weight += 0.5
    return weight


def _shared_device_rows(
    eligible: Sequence[tuple[Item, int]],
    y_of: Mapping[int, int],
    x: int,
    resource: str,
    devices: int,
    size: int,
) -> list[tuple[list[int], list[float], float, float]]:
    """Per item taking part of one device of ``resource`` (of ``size``) that a unit holds
    fewer copies of than that device's share would allow (another resource limits it, e.g.
    a quarter GPU with all of a node's CPUs): every unit holding a copy has a device that no
    whole request can take, and so does every ``size // share`` copies, so the devices its
    copies hold are at least its copies over the fewer of those two counts; with the devices
    whole requests take (never shared), at most the units' devices. (The share rows count a
    copy at its share alone: whole requests could then fill the rest of its units' devices.)
    And no unit holds both a copy of it and one of an item taking all its devices: the units
    each needs (copies over copies per unit) add up to at most the units."""
    taken = {item.index: _whole_devices(item, resource) for item, _ in eligible}
    whole = [(y_of[index], n) for index, n in taken.items() if n]
    full = [(y_of[item.index], n) for item, n in eligible if taken[item.index] >= devices]
    rows = []
    for item, per_unit in eligible:
        shares = [s for part in item.parts for r, s in part.devices if r == resource]
        fractions = [s for s in shares if s < size]
        if len(fractions) != 1:
            continue
        y = y_of[item.index]
        if full:
            cols = [y, *(col for col, _ in full), x]
            vals = [1.0 / per_unit, *(1.0 / n for _, n in full), -1.0]
            rows.append((cols, vals, -math.inf, 0.0))
        per_device = size // fractions[0]
        copies = min(per_unit, per_device)
        if copies * fractions[0] >= size:  # no tighter than its share
            continue
        weight = taken[item.index] + 1.0 / copies
        others = [(col, n) for col, n in whole if col != y]
        cols = [y, *(col for col, _ in others), x]
        rows.append((cols, [weight, *(n for _, n in others), -float(devices)], -math.inf, 0.0))
    return rows


def _whole_devices(item: Item, resource: str) -> int:
    """Whole devices of ``resource`` one copy takes."""
    return sum(
        share // SHARE_UNITS
        for part in item.parts
        for name, share in part.devices
        if name == resource and share >= SHARE_UNITS
    )


FLOOR_MARGIN = 1e-3
"""A Lagrangian bound is priced only where its values' sum exceeds the bound already proved
by more than this fraction (else it cannot raise the bound enough to matter)."""


UnitValues = tuple[tuple[int, float], ...]
"""Per kind (its position), a bound on what one unit of it can hold at a Lagrangian's values."""


@dataclass
class DualBound:
    """One Lagrangian relaxation of "place every copy of the demand": item values (their sum
    over the demand is ``value``) and, per kind, a bound on what one unit of it can hold at
    those values (``unit_values``, exact knapsacks; ``price`` computes them when first
    needed: ``price(hopeless)`` may stop, returning None, once ``hopeless(values)`` says the
    bound over values at least as large as it will find is too low, and go on when asked
    again)."""

    value: float
    unit_values: UnitValues | None = None
    price: Callable[[Callable[[UnitValues], bool]], UnitValues | None] | None = None

    def cost_bound(
        self, kinds: Sequence[Kind], budget: float, floor: float = -math.inf
    ) -> float | None:
        """No plan placing the demand costs less. The values scaled by any factor in (0, 1]
        are values too: at each scale, their sum minus, per kind whose unit can hold more than
        it costs, the excess times the most units a plan costing at most ``budget`` can take
        of it; the best scale is one where some kind's excess vanishes (or 1). None: no
        finite bound, or (before every knapsack is solved) none above ``floor``: the bound is
        at most the values' sum, and at most the same figure over smaller unit values (each
        kind's excess is then no larger at any scale)."""
        if self.value <= floor * (1 + FLOOR_MARGIN):
            return None
        if self.unit_values is None:
            self.unit_values = self.price(partial(_at_most, self.value, kinds, budget, floor))
            if self.unit_values is None:
                return None
        best = _scaled_bound(self.value, kinds, self.unit_values, budget)
        return None if best == -math.inf else best


def _at_most(
    value: float, kinds: Sequence[Kind], budget: float, floor: float, unit_values: UnitValues
) -> bool:
    """Whether the bound over ``unit_values`` (or any larger ones) is at most ``floor`` (a
    little below, against rounding)."""
    return _scaled_bound(value, kinds, unit_values, budget) <= floor - 1e-9 * abs(floor)


def _scaled_bound(
    value: float, kinds: Sequence[Kind], unit_values: UnitValues, budget: float
) -> float:
    """:meth:`DualBound.cost_bound`'s figure (-inf where none is finite): over the scales
    where some kind's excess vanishes (and 1), the values' sum scaled, less each kind's
    excess at that scale times its unit cap."""
    held = [kinds[index] for index, _ in unit_values]
    units = np.array([unit for _, unit in unit_values])
    costs = np.array([kind.cost for kind in held])
    caps = np.array(
        [math.inf if (cap := _unit_cap(kind, budget)) is None else cap for kind in held]
    )
    over = (units > costs) & (costs > 0)
    scales = np.unique(np.concatenate(([1.0], costs[over] / units[over])))
    excess = scales[:, None] * units[None, :] - costs[None, :]
    with np.errstate(invalid="ignore"):
        lost = np.where(excess > 1e-12, excess * caps[None, :], 0.0).sum(axis=1)
    return float(np.max(scales * value - lost))


def _unit_cap(kind: Kind, budget: float) -> float | None:
    """Units of ``kind`` any plan costing at most ``budget`` takes at most (None: unbounded)."""
    caps = [float(kind.limit)] if kind.limit is not None else []
    if kind.cost > 0:
        caps.append(max(budget, 0.0) / kind.cost)
    return min(caps) if caps else None
