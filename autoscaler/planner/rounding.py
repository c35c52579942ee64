"""Integer plans from column generation: rounding, diving, improvement, fewest units.

Gilmore-Gomory over patterns (:mod:`~autoscaler.planner.columns`) finds the cheapest fractional
mix; fewer nodes: a second phase prices each new unit at :data:`NODE_PRICING` of the average
unit cost, so patterns of bigger units are generated too. Integer plan: the units the LP takes
whole are kept (each new unit priced at :data:`NODE_TOLERANCE`, so bigger units win ties); the
remainder (a few units per basic pattern) gets its own column generation, seeded with small
single-item units (and, on large plans, with the remainder packed greedily: whole units whose
contents fit together, which the LP's fractional patterns of, e.g., gang items on dear nodes
rarely offer), and a MIP over that LP's support and those seeds (on mid-sized plans,
:data:`DIVE_UNITS`, beside an LP dive whose plan may stop it); a plan still far from its bound
(:data:`ROUND_AGAIN_ABOVE`), or with far more units than the LP
(:data:`ROUND_AGAIN_UNITS_ABOVE`), is rounded again other ways, past the work budget where it may
miss the planner's target (:data:`REPAIR_WORK`). Small plans (:data:`EXACT_UNITS`) whose
first integer plan is not that close yet: every kind is also priced exactly, which gives
Lagrangian cost bounds, the plan is rounded again and a dive makes another; so is a plan that
still misses the planner's target above its proven bounds after all that, of any size
(:data:`EXACT_REPAIR_ROUNDS`); one still missing it gets a MIP over every pattern seen, no
unit fixed (:func:`_pooled`). The best one after :mod:`~autoscaler.planner.improve` is kept.
Last, for small plans (:data:`FEWEST_UNITS_MAX`), among the plans that place as much and cost
at most :data:`NODE_TOLERANCE` more (never past the target above a bound rounding proved), one with
fewer new units: local moves first, then, for the smallest (:data:`FEWEST_MIP_UNITS`), a MIP
over the patterns seen near that problem's LP solution (:data:`FEWEST_REDUCED_COST`). Large
plans (:data:`GREEDY_START_ITEMS`) start from a greedy plan instead of single-item units.
Column generation stops once the work budget (:mod:`~autoscaler.planner.budget`) is spent;
the LP's whole units are then kept, the rest packed greedily, and the greedy start kept where
it is better. Every work limit is a count; nothing depends on wall-clock time."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from functools import partial

from autoscaler.planner.aggregate import merged_by_shape
from autoscaler.planner.bound import TARGET, BoundModel, DualBound
from autoscaler.planner.budget import Budget
from autoscaler.planner.columns import (
    EXACT_ROUNDS,
    MAX_ROUNDS,
    column_generation,
    exact_rounds,
    lagrangian,
    seed,
)
from autoscaler.planner.greedy import greedy
from autoscaler.planner.improve import improve
from autoscaler.planner.items import Item, positions
from autoscaler.planner.master import MIP_MAX_NODES, MIP_REL_GAP, LPDive, Master
from autoscaler.planner.packing import Kind, Pattern, covered_copies

GREEDY_START_ITEMS = 150
"""Plans of at least this many items (:func:`~autoscaler.planner.items.positions`) start
column generation from a greedy plan (:mod:`~autoscaler.planner.greedy`): where every round
is dear, a good start saves many, and
if the work budget runs out that plan is still there to keep. Their rounding's MIP is also
offered the remainder packed greedily (gang-heavy plans of 2,000 bundles: up to 4% above
their bound before, at most 3.6% after, most under 2%)."""
RESIDUAL_SEEDS = 3
"""Single-item units offered per item for the remainder (small units round better)."""
NODE_TOLERANCE = 0.005
"""Fewer nodes at (nearly) equal cost: a plan may cost at most this fraction more than the
cheapest one found to launch fewer units. While rounding, each new unit is also priced at
this fraction of the average unit cost of the cheapest fractional plan (ties go to bigger
units)."""
NODE_PRICING = 0.03
"""While generating patterns for fewer nodes, each new unit is priced at this fraction of the
average unit cost: bigger-unit patterns enter the pool the fewest-nodes step chooses from
(what a plan may cost more is still :data:`NODE_TOLERANCE`). This phase stops once its LP
value stalls (:data:`~autoscaler.planner.columns.TAIL_GAIN`), on masters of any size."""
FEWEST_UNITS_MAX = 60
"""The fewest-nodes step runs for plans of at most this many new units; bigger plans are
within a few percent of their node bound already."""
FEWEST_MIP_UNITS = 20
"""...and its MIP (after the local moves) for plans of at most this many: there its root is
cheap, and it finds trades across several units that local moves miss. On the 200-bundle
benchmark's plans (20 to 60 nodes) its root cut loop took 0.05-0.2 s, most often finding
no plan with a unit fewer; without it (local moves gathering several units into one
bigger unit instead) those plans have 1.4% more nodes, cost the same within 0.1%, and take
a third less time."""
FEWEST_MIP_NODES = 100
"""Branch-and-bound nodes for the fewest-nodes MIP (deterministic; it starts from a plan)."""
FEWEST_IMPROVING = 2
"""The fewest-nodes MIP stops once it has found this many plans better than the one it
starts from: on the benchmark sweep later ones were rare, and searching on for them (and
proving there are none) was most of its work."""
FEWEST_REDUCED_COST = 0.1
"""The fewest-nodes MIP runs over the patterns whose reduced cost in its LP is at most this
fraction of one unit's weight (the LP's support and the starting plans' patterns always):
a few dozen columns near the incumbent instead of every pattern seen, so its root is cheap."""
TIE_BREAK = 1e-3
"""Per-unit surcharge, as a fraction of the cheapest price, so equal-cost patterns favour
bigger units (it changes any plan's cost by at most this fraction)."""
EXACT_UNITS = 20
"""Exact pricing (:mod:`~autoscaler.planner.knapsack`) when the cheapest fractional plan has
at most this many new units and its first integer plan is not within
:data:`ROUND_AGAIN_ABOVE` of the LP or the whole-unit bound: there rounding and missed
patterns weigh most, and the Lagrangian bounds it yields are what make small plans' bounds
tight. (A plan already that close gains nothing from it on the benchmark sweeps, and its
knapsacks were up to half of a small plan's time.)"""
ROUND_AGAIN_ABOVE = 0.02
"""Where the best integer plan costs more than this fraction above both the cheapest
fractional plan and the bound (:class:`~autoscaler.planner.bound.BoundModel`, which knows
whole units, e.g. of multi-host slices; its whole-unit MIP runs until it shows the plan that
close), it is rounded again, up to three ways, until one is that close: holding back a unit
of each pattern the LP takes whole (where those units leave an expensive fraction, the
residual MIP may choose a cheaper mix); keeping them but giving the residual MIP every
pattern whose reduced cost is within :data:`NEAR_REDUCED_COST` of the average unit cost;
both. The cheapest plan is kept, and the bound goes with it to the plan's own."""
EXACT_REPAIR_ROUNDS = 10
"""A plan (of any size) that is still more than the planner's target
(:data:`~autoscaler.planner.bound.TARGET`) above its bound after rounding again (the bound
LP, the Lagrangian bound at the greedy pricing's duals, then whole units, as the plan's own
bound is computed, each only where the last does not show the plan within the target) is
priced exactly too (at most :data:`EXACT_REPAIR_ROUNDS` rounds; the fewer-nodes
phase greedily), then rounded and dived again, and while it still misses the target, rounded
again the other ways over the new patterns (as past the budget, :data:`REPAIR_WORK`). Greedy
pricing can miss the patterns of the cheapest mix, leaving the LP itself several percent too
dear: e.g. packing a big accelerator unit's room with the CPU-only bundles worth most per
share of its dominant resource, where a mix fills both CPU and memory. On flexible-shaped
200-bundle problems outside the benchmark's seeds (10-44), 4 plans were 3.4-5.1% above their
bounds before, at most 2.6% after, for 0.1-0.5 s more each. Three rounds left flexible seed
51's LP still dear and its Lagrangian bound weak (3.4% above it); ten reach both (1.1%):
over the 300 200-bundle problems of seeds 10-69 that changed 3 other plans (one 1% cheaper,
two 0.5% and 1.4% dearer, all within 2.2% of their bounds), in the same time. Plans of more
than 100 new units were left out once; on 2,000-bundle problems outside the benchmark's
(seeds 10-39 over 20-60 types), greedy pricing left three 3.0-3.4% above their bounds
(the LP 2.2% too dear on one): 1.0-1.35% now, for 0.6-1.5 s more each (see
:data:`LARGE_REPAIR_WORK`). No plan of the benchmark's 100 changed."""
LEFT_OUT_REPAIR_ROUNDS = 3
"""...but at most this many where the LP leaves copies out (limits bind): its duals carry
those copies' penalties, and each round's knapsacks are slow (with ten, limit-bound
200-bundle plans took up to 9 s more)."""
ROUND_AGAIN_UNITS_ABOVE = 0.25
"""...or where it has more than this fraction (and one) more new units than the cheapest
fractional plan: the first rounding's MIP may cover the remainder with many small units."""
NEAR_REDUCED_COST = 0.1
ROUND_AGAIN_UNITS = 100
"""...for plans of at most this many new units in the LP (beyond that, a unit's rounding is a
small share of the cost, and the residual MIPs grow dear)."""
ROUND_AGAIN_NODES = 50
"""...each with a MIP of at most this many branch-and-bound nodes (its patterns are many)."""
REPAIR_WORK = 20_000
REPAIR_MIP_WORK = 10_000
"""Rounding again stops once the plan's work budgets are spent, unless the best plan is still
more than the planner's target (:data:`~autoscaler.planner.bound.TARGET`) above the
whole-unit bound (or, where that was not needed yet, above the LP): then the ways not tried
yet go on, together with at most :data:`REPAIR_WORK` more units of column generation, each
MIP with :data:`REPAIR_MIP_WORK` more. That costs time only on plans that may miss the
target: with the head's free room, 3 of the 200-bundle benchmark's 50 plans, which came
within it (4.1%, 4.4% and 5.0% above their bounds before, 2.7%, 2.4% and 2.6% after) for
0.15-0.35 s more each."""
FIRST_SETTLE = 0.02
"""The first rounding's MIP, once the plan's MIP work budget is spent, stops with a plan whose
cost is within this fraction of the LP's cost above the MIP's dual bound (it searched on to
:data:`~autoscaler.planner.master.MIP_REL_GAP`: on gang-heavy 200-bundle plans, hundreds of
callbacks, up to half a second, for the same plan)."""
DIVE_UNITS = (100, 1_000)
"""Plans of more new units in the LP than the first and at most the second: the first
rounding also makes the rest whole by an LP dive (:class:`~autoscaler.planner.master.LPDive`:
one small LP per step), and its MIP stops as soon as its dual bound shows the dive's plan
within :data:`FIRST_SETTLE`; the cheaper of the two plans of the rest is kept, improved by
local moves while the units the LP took whole stay as they are
(:mod:`~autoscaler.planner.improve`; a plan of more units than its limit was not improved at
all before). On the 2,000-bundle benchmark the two MIPs whose root cut loop ran
longest (0.3-0.5 s) stop within 0.02 s (those plans: 0.62 -> 0.38 s at most), plans were
0.60% above their bounds on average instead of 0.77% (over 60 node types, 0.53% instead of
0.81%), and all 50 took about as long (-5% to +1% over runs). Smaller plans: the dive's plan
is rarely that close. Larger ones (20,000 bundles): their MIP is quick already, and the dive
and improving took up to 0.1 s more, for plans 0.1% cheaper. Not where a limit on new units
binds in the LP (:meth:`~autoscaler.planner.master.Master.new_units_bound`): there which
copies the first plan places decides what the plan made again for the rest can place, more
than its cost does (at 60% of their nodes, a few plans placed fewer bundles)."""
FIRST_OVERRUN = 30_000
"""...but once the plan's MIP work is spent by this much more, it stops at any plan: where
the gap is in the penalties of copies left out (gangs a plan cannot place whole, limits
that leave demand out), no plan within FIRST_SETTLE may exist, and the search ran on to its
node limit (400 nodes, up to 1.5 s per MIP on gang-heavy 2,000-bundle plans whose
``max_workers`` leaves 40% of their nodes out). Where the master's LP itself leaves copies
out, the first rounding stops at any plan once the MIP work is spent: its gap is in those
penalties from the start, and what it places is planned again alone
(:meth:`~autoscaler.planner.planner._Realisation._fitted`)."""
PLACED_EXACT_WORK = 20_000
"""MIP work of :meth:`PlacedLP.bounds`' exact pricing, all rounds together (past it, each
knapsack stops at its first callback)."""
POOLED_ALL_UP_TO = 200
"""The last MIP (:func:`_pooled`) chooses among every pattern seen where there are at most
this many (small plans: a Neuron backlog of 14 nodes was 1.4% above its optimum with the
patterns near the LP's support only, at it with all 52; 0.02 s), among more only those."""
PLACED_POOLED_ALL_UP_TO = 1_000
PLACED_POOLED_MIP_WORK = 30_000
"""Where limits left demand out and the plan is made again for what it placed, that MIP
chooses among every pattern seen up to this many, with this much more MIP work (not
:data:`REPAIR_MIP_WORK`): by then the limit-bound plan has spent its MIP budget several
times over, and with less, HiGHS stopped at the plan it started from. The plan made before
places every copy and stays a candidate, so only a cheaper plan that places them all is
taken (a GCP
cluster at its ``max_workers`` of 24: 9.3% above its bound before, 5.2% after; the
patterns near the LP's support alone did not hold that plan)."""
DIVE_STEPS = 80
"""Where pricing is exact, another integer plan comes from a dive: fix the units the LP takes
(at least one), plan the rest again with patterns made for what is left, at most this many
times; then a MIP over every pattern seen, started from the dive's plan."""
LARGE_REPAIR_UNITS = 100
LARGE_REPAIR_WORK = 60_000
"""A plan of more than :data:`LARGE_REPAIR_UNITS` new units in the LP is repaired with less:
its exact pricing's knapsacks share this much MIP work (past it, each stops at its first
callback), and no dive follows. On a gang-heavy 2,000-bundle plan of 410 units, the dive's
steps (one unit each where the LP takes none whole) ran out first, spending the whole work
budget (what it left was packed greedily, at 2.4 times the cost), and its knapsacks took 2 s
for a plan 0.4% cheaper; with these limits, 1.5 s and 4.4% above its bound, from 4.95%
(0.6 s, no repair). Smaller plans are repaired as before."""


MadeBefore = Mapping[tuple[tuple, tuple], int]
"""A plan made before: units per (kind identity, hosts' contents), whatever position a list
of kinds gives each kind."""


@dataclass
class Result:
    kinds: list[Kind]
    """The kinds the patterns refer to (by position)."""
    chosen: list[tuple[Pattern, int]]
    """Patterns and how many units of each."""
    unplaced: dict[int, int]
    notes: list[str]
    dual_bounds: list[DualBound] = field(default_factory=list)
    """Lagrangian relaxations of placing the whole demand (at the greedy pricing's duals,
    their knapsacks solved only if the bound asks; and exact pricing's, where it ran)."""
    cost_floor: float = 0.0
    """A bound on the cost of any plan placing the whole demand, where rounding proved one
    (whole units; 0 where it needed none)."""
    proven_cost: float = 0.0
    """A bound on the same, where rounding checked its plan against the target (0 where it
    did not): at least the bound LP's, the Lagrangian one's at the greedy duals, and, where
    those do not show the plan within the target, the whole-unit one's."""


def generate(
    items: Sequence[Item],
    demand: Mapping[int, int],
    kinds: Sequence[Kind],
    global_room: int | None,
    budget: Budget | None = None,
    bound: BoundModel | None = None,
    before: MadeBefore | None = None,
) -> Result:
    """Patterns and units per pattern that cover ``demand`` (copies per item index); once
    ``budget`` is spent, what the patterns so far leave out is packed greedily. ``bound``:
    the bound's model for ``demand`` (the planner's), asked for whole-unit bounds instead of
    building one here. ``before``: a plan of ``demand`` made before, among the plans to
    choose from from the start (so one made again is never worse, and where it is shown
    close to a bound the search ends)."""
    budget = Budget() if budget is None else budget
    notes: list[str] = []
    items, kinds = _wanted(items, demand, kinds)
    if not items or not kinds:
        return Result(kinds, [], {i.index: demand[i.index] for i in items}, notes)
    if budget.exhausted:
        chosen, unplaced = greedy(items, demand, kinds, global_room)
        return Result(kinds, chosen, unplaced, notes)
    by_index = {item.index: item for item in items}
    master, start, caps = _started(items, demand, kinds, global_room)
    surcharge, penalty, limits = master.surcharge, master.penalty, master.limits
    rounds = column_generation(master, kinds, caps, MAX_ROUNDS, budget)
    lp_cost, lp_units = master.lp_cost_and_units()
    small = lp_units <= EXACT_UNITS
    dual_bounds = [lagrangian(master, kinds, caps, budget)]  # its knapsacks: only if asked
    rounds += _node_pricing(master, kinds, caps, budget)

    pool: dict[Pattern, None] = dict.fromkeys(master.patterns)
    args = (master, items, demand, kinds, limits, global_room, penalty, notes, pool, budget)
    plans: list[dict[Pattern, int]] = []
    made_before = _translated(before or {}, kinds)
    placeable = bool(made_before) and _places(made_before, demand)

    def keep(plan: Mapping[Pattern, int]) -> None:
        plans.append(_improved(plan, kinds, by_index, demand, global_room, master.surcharge))

    mid_sized = DIVE_UNITS[0] < lp_units <= DIVE_UNITS[1]
    keep(_round(*args, held_back=0, dive=mid_sized and not master.new_units_bound()))
    kept_before = None
    if made_before:  # a candidate from the start: shown close to a bound, it ends the search
        keep(made_before)
        kept_before = plans[-1]
    if start and budget.exhausted:  # the plan it started from may still be the better one
        keep(start)
    floor: float | None = None
    proven = 0.0

    def cheapest() -> dict[Pattern, int]:
        """The plan of least cost among those leaving the fewest copies out (under limits a
        rounding may leave out copies the LP places: its cost says nothing of the plan)."""
        return min(plans, key=lambda plan: (_left_out(plan, demand), _cost(plan, kinds)))

    def best_cost() -> float:
        return _cost(cheapest(), kinds)

    def best_placing(among: Sequence[dict[Pattern, int]] = plans) -> dict[Pattern, int]:
        """The plan of least cost plus surcharges plus penalties for what it leaves out."""
        return min(among, key=lambda plan: _objective(master, plan, demand))

    def close_enough(meanwhile: Callable[[Future[float | None]], None] | None = None) -> bool:
        """The best plan is within ROUND_AGAIN_ABOVE of the LP or of the whole-unit bound
        (computed once, where the LP does not show it; ``meanwhile`` runs while its MIP
        does, where it needs one), and has at most ROUND_AGAIN_UNITS_ABOVE more units than
        the LP."""
        if _new_units(cheapest(), kinds) > (1 + ROUND_AGAIN_UNITS_ABOVE) * lp_units + 1:
            return False
        return shows_close(lp_cost) or shows_close(whole_floor(meanwhile))

    def shows_close(bound: float) -> bool:
        """The best plan is within ROUND_AGAIN_ABOVE of ``bound``."""
        return best_cost() <= (1 + ROUND_AGAIN_ABOVE) * bound

    def whole_bound(
        close: float,
        lagrangian: bool = False,
        meanwhile: Callable[[Future[float | None]], None] | None = None,
    ) -> float:
        """A bound among plans costing at most the best one's (one that places everything):
        whole units may make any plan dearer than the LP's (its whole-unit MIP only where
        the LP bound, and with ``lagrangian`` the Lagrangian bound at the greedy pricing's
        duals, do not show the best plan within ``close``). ``meanwhile``: work done while
        that MIP runs, where it does."""
        best_plan = cheapest()
        best = _cost(best_plan, kinds)

        def proved(at_least: float) -> float:
            found = dual_bounds[0].cost_bound(kinds, best + 1e-9, at_least)
            return at_least if found is None else max(at_least, found)

        cap = best if _places(best_plan, demand) else None
        model = bound or BoundModel(*merged_by_shape(items, demand, kinds), global_room, cap)
        units = _new_units(best_plan, kinds)
        lifted = proved if lagrangian else None
        found = model.bounds(
            cap, units, lifted, close=close, count_units=False, meanwhile=meanwhile
        )
        return found.cost

    def whole_floor(meanwhile: Callable[[Future[float | None]], None] | None = None) -> float:
        """:func:`whole_bound` within :data:`ROUND_AGAIN_ABOVE`, computed once (it goes on to
        the plan's own bound)."""
        nonlocal floor
        if floor is None:
            floor = whole_bound(ROUND_AGAIN_ABOVE, meanwhile=meanwhile)
        return floor

    def proven_bound() -> float:
        """The best plan's bound, computed as the plan's own bound is (whose Lagrangian
        knapsacks are the ones solved here), but only as far as needed to show the plan within
        the planner's target (the plan's own bound then goes on from scratch)."""
        best = best_cost()
        known = whole_bound(TARGET, lagrangian=True) if floor is None else floor
        if best <= (1 + TARGET) * known:
            return known
        return max(known, dual_bounds[0].cost_bound(kinds, best + 1e-9, known) or 0.0)

    def misses_proven() -> bool:
        return best_cost() > (1 + TARGET) * proven

    def misses_target() -> bool:
        """The best plan is not close to the LP and more than the planner's target above the
        whole-unit bound (so maybe above its own bound too), or where that bound was not
        needed yet, above the LP."""
        best = best_cost()
        if best <= (1 + ROUND_AGAIN_ABOVE) * lp_cost:
            return False
        return best > (1 + TARGET) * (lp_cost if floor is None else floor)

    def priced_exactly(max_rounds: int, exact_nodes: bool) -> None:
        """Exact pricing, its Lagrangian bounds, and a second integer plan by diving (not on
        a large plan: :data:`LARGE_REPAIR_WORK`)."""
        nonlocal lp_cost, lp_units, rounds
        master.set_surcharge(surcharge)
        large = lp_units > LARGE_REPAIR_UNITS
        work = Budget(mip_limit=LARGE_REPAIR_WORK) if large else None
        found = exact_rounds(
            master, kinds, caps, by_index, cost_phase=True, max_rounds=max_rounds, work=work
        )
        dual_bounds.extend(found)
        lp_cost, lp_units = master.lp_cost_and_units()
        rounds += _node_pricing(master, kinds, caps, budget, by_index if exact_nodes else None)
        pool.update(dict.fromkeys(master.patterns))
        keep(_round(*args, held_back=0))
        if not large:
            keep(_dive(*args))

    exact = small and not budget.exhausted and not close_enough()
    if exact:
        priced_exactly(EXACT_ROUNDS, exact_nodes=True)

    def ways_to_round_again() -> list[tuple[int, float | None]]:
        near = NEAR_REDUCED_COST * lp_cost / max(lp_units, 1.0)
        return [(1, None), (0, near), (1, near)]

    def round_again_past_budget(ways, misses: Callable[[], bool]) -> None:
        """Rounding again the ``ways`` given while ``misses()``, past the work budgets."""
        with budget.at_most(REPAIR_WORK):
            for held_back, within in ways:
                if budget.exhausted or not misses():
                    break
                with budget.more_mip(REPAIR_MIP_WORK):
                    keep(_round(*args, held_back=held_back, near=within))

    ways = ways_to_round_again()
    if lp_units <= ROUND_AGAIN_UNITS:
        while ways and not (budget.exhausted or budget.mip_exhausted):
            held_back, within = ways[0]
            again = partial(_round, *args, held_back=held_back, near=within)
            ahead = _Ahead(again, budget, notes, pool, shows_close)
            if close_enough(meanwhile=ahead.run):
                ahead.undo()
                break
            ways.pop(0)
            keep(ahead.result())
        round_again_past_budget(ways, misses_target)  # where the plan may miss the target
    if not exact and not budget.exhausted:
        proven = proven_bound()
        if misses_proven():  # greedy pricing may have missed the patterns of the cheapest mix
            repair_rounds = LEFT_OUT_REPAIR_ROUNDS if master.leaves_out() else EXACT_REPAIR_ROUNDS
            priced_exactly(repair_rounds, exact_nodes=False)
            round_again_past_budget(ways_to_round_again(), misses_proven)
    if (
        lp_units <= ROUND_AGAIN_UNITS
        and not budget.exhausted
        and not master.leaves_out()
        and (misses_proven() if proven else misses_target())
    ):  # every way of rounding may have fixed the wrong whole units
        up_to, work = POOLED_ALL_UP_TO, REPAIR_MIP_WORK
        if placeable:
            up_to, work = PLACED_POOLED_ALL_UP_TO, PLACED_POOLED_MIP_WORK
        # From the best plan made here: with the plan made before as its cutoff, HiGHS found
        # no plan within its work on some (a GCP plan at 60% of its nodes: 9.3% above its
        # bound, against 3.5%).
        made_here = [plan for plan in plans if plan is not kept_before]
        with budget.more_mip(work):
            keep(_pooled(*args, start=best_placing(made_here), up_to=up_to))
    for plan in plans:
        pool.update(dict.fromkeys(plan))
    taken = best_placing()
    taken = _fewest_units(
        taken,
        list(pool),
        items,
        demand,
        kinds,
        limits,
        global_room,
        notes,
        budget,
        max(floor or 0.0, proven),
    )
    if rounds >= 2 * MAX_ROUNDS:
        notes.append(f"column generation stopped at its round limit ({MAX_ROUNDS} per phase)")
    chosen = sorted(taken.items(), key=lambda pu: (pu[0].kind, pu[0].hosts))
    covered = covered_copies(taken)
    unplaced = {
        index: demand[index] - covered.get(index, 0)
        for index in by_index
        if covered.get(index, 0) < demand[index]
    }
    return Result(kinds, chosen, unplaced, notes, dual_bounds, floor or 0.0, proven)


class PlacedLP:
    """The LP of placing ``placed`` (the copies a plan placed where limits left some of its
    demand out, so every one of them can be placed), by greedy column generation over that
    demand alone (a work budget of its own); :meth:`bounds` goes on to bound it."""

    def __init__(
        self,
        items: Sequence[Item],
        placed: Mapping[int, int],
        kinds: Sequence[Kind],
        global_room: int | None,
    ) -> None:
        self.items, self.kinds = _wanted(items, placed, kinds)
        self.master: Master | None = None
        if self.items and self.kinds:
            self.master, _, self.caps = _started(self.items, placed, self.kinds, global_room)
            column_generation(self.master, self.kinds, self.caps, MAX_ROUNDS, Budget())

    def bounds(self, wanted: float) -> Iterator[tuple[list[Kind], DualBound]]:
        """Lagrangian relaxations of placing the copies, each with the kinds it is over, at
        the duals of each round of exact pricing (the first at column generation's), at most
        :data:`~autoscaler.planner.columns.EXACT_ROUNDS` (the last where it finds no pattern
        more); the caller stops once one is tight enough. No more once the LP's value is
        below ``wanted``: no bound exceeds it. (The plan's rounding bounds the whole demand
        instead, whose unplaceable copies' penalties swamp its duals; and the bound's LP,
        over resources, is far weaker where units are lumpy: on stress problems with tight
        per-type limits, 10-26% below plans these bounds show within 3%.)"""
        master = self.master
        if master is None:
            return
        by_index = {item.index: item for item in self.items}
        work = Budget(mip_limit=PLACED_EXACT_WORK)
        for _ in range(EXACT_ROUNDS):
            if master.lp_objective() < wanted:
                return
            patterns = len(master.patterns)
            found = exact_rounds(
                master, self.kinds, self.caps, by_index, True, max_rounds=1, work=work
            )
            yield self.kinds, found[0]
            if len(master.patterns) == patterns:  # the LP is optimal over every pattern
                return


def _translated(plan: MadeBefore, kinds: Sequence[Kind]) -> dict[Pattern, int]:
    """``plan`` as patterns of ``kinds``; empty where one of its kinds is not among them."""
    position = {kind.identity: kind.index for kind in kinds}
    patterns: dict[Pattern, int] = {}
    for (identity, hosts), units in plan.items():
        if identity not in position:
            return {}
        pattern = Pattern(position[identity], hosts)
        patterns[pattern] = patterns.get(pattern, 0) + units
    return patterns


def _wanted(
    items: Sequence[Item], demand: Mapping[int, int], kinds: Sequence[Kind]
) -> tuple[list[Item], list[Kind]]:
    """The items ``demand`` asks for, and the kinds that may hold any of them (with units
    left), each holding only those items and numbered by position."""
    items = [item for item in items if demand.get(item.index, 0) > 0]
    wanted = {item.index for item in items}
    kinds = [
        replace(kind, index=position, items=[i for i in kind.items if i.index in wanted])
        for position, kind in enumerate(k for k in kinds if k.limit != 0)
    ]
    kinds = [
        replace(kind, index=position) for position, kind in enumerate(k for k in kinds if k.items)
    ]
    return items, kinds


def _started(
    items: Sequence[Item],
    demand: Mapping[int, int],
    kinds: Sequence[Kind],
    global_room: int | None,
) -> tuple[Master, dict[Pattern, int], dict[int, int]]:
    """The master for ``demand`` (of :func:`_wanted`'s items and kinds) with its first
    patterns; the greedy plan those came from on large plans (empty on small ones, which
    start from a unit of the cheapest kind per item); each item's cap (its demand)."""
    prices = [kind.cost for kind in kinds if kind.new and kind.cost > 0]
    surcharge = TIE_BREAK * min(prices, default=1.0)
    penalty = 1000.0 * max([kind.cost for kind in kinds] + [1.0])
    limits = {kind.index: kind.limit for kind in kinds}
    master = Master(items, demand, kinds, limits, global_room, penalty, surcharge)
    start: dict[Pattern, int] = {}
    if positions(items) >= GREEDY_START_ITEMS:
        start = _greedy_rest({}, items, demand, kinds, global_room)
    master.add_all(start)
    caps = {item.index: demand[item.index] for item in items}
    for item in [] if start else items:
        seed(master, kinds, item, caps, 1)
    return master, start, caps


class _Ahead:
    """A rounding made before it is known to be wanted, while the MIP of the bound that
    decides runs on another thread (HiGHS lets go of the interpreter). Once that MIP's bound
    shows it unwanted (``unwanted(bound)``: the bound that decides is at least that MIP's,
    so it decides the same), the rounding stops where it stands, and it is
    undone: the work it spent goes back to the budget, and its notes and the patterns it
    added to the pool are dropped. So the plan is the one rounding only once the bound asks
    for it would give."""

    def __init__(
        self,
        work: Callable[[], dict[Pattern, int]],
        budget: Budget,
        notes: list[str],
        pool: dict[Pattern, None],
        unwanted: Callable[[float], bool],
    ) -> None:
        self.work, self.budget, self.notes, self.pool = work, budget, notes, pool
        self.unwanted = unwanted
        self.saved: tuple[Budget, int, dict[Pattern, None]] | None = None
        self.done: dict[Pattern, int] = {}

    def run(self, mip: Future[float | None]) -> None:
        self.saved = (replace(self.budget), len(self.notes), dict(self.pool))

        def unwanted() -> bool:
            return mip.done() and (bound := mip.result()) is not None and self.unwanted(bound)

        self.budget.interrupt = unwanted
        try:
            self.done = self.work()
        finally:
            self.budget.interrupt = None

    def undo(self) -> None:
        if self.saved is None:
            return
        budget, notes, pool = self.saved
        self.budget.used, self.budget.mip_used = budget.used, budget.mip_used
        del self.notes[notes:]
        self.pool.clear()
        self.pool.update(pool)

    def result(self) -> dict[Pattern, int]:
        return self.done if self.saved is not None else self.work()


def _node_pricing(
    master: Master,
    kinds: Sequence[Kind],
    caps: Mapping[int, int],
    budget: Budget,
    by_index: Mapping[int, Item] | None = None,
) -> int:
    """Fewer nodes: price each new unit at :data:`NODE_PRICING` of the average unit cost of
    the cheapest (fractional) plan and generate the patterns that favours (``by_index``:
    exactly priced too), then leave the master priced for rounding (:data:`NODE_TOLERANCE`).
    Returns the rounds of column generation."""
    lp_cost, lp_units = master.lp_cost_and_units()
    if lp_units <= 0 or lp_cost <= 0:
        return 0
    master.set_surcharge(NODE_PRICING * lp_cost / lp_units)
    rounds = column_generation(master, kinds, caps, MAX_ROUNDS, budget, stall_stop=True)
    if by_index is not None:
        exact_rounds(master, kinds, caps, by_index)
    master.set_surcharge(NODE_TOLERANCE * lp_cost / lp_units)
    master.solve_lp()
    return rounds


def _round(
    master,
    items,
    demand,
    kinds,
    limits,
    global_room,
    penalty,
    notes,
    pool,
    budget,
    held_back,
    near=None,
    dive=False,
):
    """Integer plan: what the LP takes whole stays, but for ``held_back`` units of each
    pattern; the rest (a few units per basic pattern) is planned again with patterns
    generated for it, then solved as a MIP (unless the budget is spent: the rest is then left
    to the greedy packing). Once the budget's MIP work is spent, the MIP stops with its best
    plan: rounding again, or where the LP leaves copies out, whatever that plan; the first
    rounding, once it is within :data:`FIRST_SETTLE` of the MIP's dual bound, or whatever it
    is past :data:`FIRST_OVERRUN` more. With ``dive`` (where the LP places everything), an LP
    dive makes the rest whole first and the MIP stops once it shows that plan within
    :data:`FIRST_SETTLE`; the cheaper plan of the rest is kept, improved by local moves
    (the units the LP took whole stay as they are; :data:`DIVE_UNITS`)."""
    by_index = {item.index: item for item in items}
    lp_cost, _ = master.lp_cost_and_units()
    taken: dict[Pattern, int] = {}
    for pattern, value in zip(master.patterns, master.lp_values(), strict=True):
        if math.floor(value + 1e-9) > held_back:
            taken[pattern] = math.floor(value + 1e-9) - held_back
    covered = covered_copies(taken)
    rest = {i: demand[i] - covered.get(i, 0) for i in by_index if covered.get(i, 0) < demand[i]}
    if not rest:
        return taken
    if budget.exhausted:
        return _greedy_rest(taken, items, demand, kinds, global_room)
    rest_limits, rest_room = _room_left(taken, kinds, global_room)
    rest_items = [by_index[i] for i in sorted(rest)]
    residual = Master(rest_items, rest, kinds, rest_limits, rest_room, penalty, master.surcharge)
    residual.add_all(master.patterns)
    seeded = [  # small units for what is left: each item alone
        pattern
        for item in rest_items
        for pattern in seed(residual, kinds, item, rest, RESIDUAL_SEEDS)
    ]
    if positions(items) >= GREEDY_START_ITEMS:  # and on large plans, what is left packed greedily
        for pattern, _ in _packed(rest_items, rest, kinds, rest_limits, rest_room):
            residual.add(pattern)
            seeded.append(pattern)
    column_generation(residual, kinds, rest, MAX_ROUNDS, budget)
    pool.update(dict.fromkeys(residual.patterns))
    if near is None:  # the MIP: the LP's support and single-item units
        support = residual.on_support(seeded)
    else:  # ... or every pattern within ``near`` of entering the LP
        support = residual.near_support(near, seeded)
        support.solve_lp()
    again = held_back > 0 or near is not None
    nodes = ROUND_AGAIN_NODES if again else MIP_MAX_NODES
    dived = LPDive(support).run() if dive and not master.leaves_out() else None
    dived_objective = math.inf if dived is None else support.objective_of(dived)
    units_per_pattern = support.solve_integer(
        notes,
        MIP_REL_GAP * lp_cost,
        max_nodes=nodes,
        budget=budget,
        settle_gap=math.inf if again or master.leaves_out() else FIRST_SETTLE * lp_cost,
        overrun=FIRST_OVERRUN,
        dual_enough=None if dived is None else dived_objective - FIRST_SETTLE * lp_cost,
    )
    if dived is None:
        rest_plan = [(p, n) for p, n in zip(support.patterns, units_per_pattern, strict=True)]
    else:  # the cheaper of the dive's plan and the MIP's (None: stopped before it had one)
        if units_per_pattern is None or dived_objective < support.objective_of(units_per_pattern):
            units_per_pattern = dived
        rest_plan = improve(
            [(p, n) for p, n in zip(support.patterns, units_per_pattern, strict=True) if n > 0],
            kinds,
            by_index,
            rest,
            global_room,
            master.surcharge,
            beside=taken,
        )
    for pattern, units in rest_plan:
        if units > 0:
            taken[pattern] = taken.get(pattern, 0) + units
    return taken


def _pooled(
    master, items, demand, kinds, limits, global_room, penalty, notes, pool, budget, start, up_to
) -> dict[Pattern, int]:
    """Integer plan by a MIP over the patterns of ``pool`` (where there are more than
    ``up_to``, those whose reduced cost, in the LP over them all, is within
    :data:`NEAR_REDUCED_COST` of the average unit cost), with no unit fixed, searching only
    for plans better than ``start`` (``start`` where it finds none).

    The last try for a plan still more than the planner's target above its bound after
    every way of rounding: each of those keeps the units some LP takes whole, and where those
    are the wrong ones, none recovers (a GCP plan of 200 bundles outside the benchmark's
    seeds: 5.6% above its bound after every way, 1.6% after this MIP, which took 0.08 s).
    Not where the LP leaves copies out (limits bind): there its plan changes which copies
    the plan made again for what was placed starts from, and on 2,000-bundle problems at
    60 workers some final plans placed fewer copies."""
    whole = Master(items, demand, kinds, limits, global_room, penalty, master.surcharge)
    whole.add_all([*pool, *start])
    whole.solve_lp()
    lp_cost, lp_units = whole.lp_cost_and_units()
    searched = whole
    if len(whole.patterns) > up_to:
        near = NEAR_REDUCED_COST * lp_cost / max(lp_units, 1.0)
        searched = whole.near_support(near, list(start))
        searched.solve_lp()
    units = searched.solve_integer(
        notes, MIP_REL_GAP * lp_cost, start, demand, MIP_MAX_NODES, budget=budget
    )
    return {p: u for p, u in zip(searched.patterns, units, strict=True) if u > 0}


def _improved(plan, kinds, by_index, demand, global_room, surcharge) -> dict[Pattern, int]:
    return dict(improve(list(plan.items()), kinds, by_index, demand, global_room, surcharge))


def _greedy_rest(
    taken: Mapping[Pattern, int],
    items: Sequence[Item],
    demand: Mapping[int, int],
    kinds: Sequence[Kind],
    global_room: int | None,
) -> dict[Pattern, int]:
    """``taken`` and, beside it, what it leaves out packed greedily."""
    covered = covered_copies(taken)
    rest = {i: n - covered.get(i, 0) for i, n in demand.items() if covered.get(i, 0) < n}
    limits, room = _room_left(taken, kinds, global_room)
    plan = dict(taken)
    for pattern, units in _packed(items, rest, kinds, limits, room):
        plan[pattern] = plan.get(pattern, 0) + units
    return plan


def _packed(
    items: Sequence[Item],
    rest: Mapping[int, int],
    kinds: Sequence[Kind],
    limits: Mapping[int, int | None],
    room: int | None,
) -> list[tuple[Pattern, int]]:
    """``rest`` packed greedily into the units each kind (``limits``) and the cluster
    (``room``) may still take."""
    left_kinds = [replace(kind, limit=limits[kind.index]) for kind in kinds]
    chosen, _ = greedy([item for item in items if item.index in rest], rest, left_kinds, room)
    return chosen


def _room_left(
    taken: Mapping[Pattern, int], kinds: Sequence[Kind], global_room: int | None
) -> tuple[dict[int, int | None], int | None]:
    """Units each kind, and new units the cluster, may still take beside ``taken``."""
    used: dict[int, int] = {}
    for pattern, units in taken.items():
        used[pattern.kind] = used.get(pattern.kind, 0) + units
    limits = {k.index: None if k.limit is None else k.limit - used.get(k.index, 0) for k in kinds}
    if global_room is None:
        return limits, None
    return limits, global_room - sum(u for k, u in used.items() if kinds[k].new)


def _dive(master, items, demand, kinds, limits, global_room, penalty, notes, pool, budget):
    """Integer plan by diving: fix the units the LP takes whole, and where it takes none the
    pattern it takes most of; plan what is left again (patterns made for it); repeat. (Its
    patterns join the pool the fewest-units MIP chooses from.)"""
    dive = Master(items, demand, kinds, limits, global_room, penalty, master.surcharge)
    dive.add_all(master.patterns)
    fixed: dict[Pattern, int] = {}
    for _ in range(DIVE_STEPS):
        covered = covered_copies(fixed)
        rest = {i: max(0, n - covered.get(i, 0)) for i, n in demand.items()}
        if not any(rest.values()):
            break
        rest_limits, rest_room = _room_left(fixed, kinds, global_room)
        dive.bound_rows(rest, rest_limits, rest_room)
        for item in items:
            if rest[item.index]:
                seed(dive, kinds, item, rest, 1)
        column_generation(dive, kinds, rest, MAX_ROUNDS, budget)
        values = dive.lp_values()
        step = {
            pattern: math.floor(value + 1e-6)
            for pattern, value in zip(dive.patterns, values, strict=True)
            if value > 1 - 1e-6
        }
        if not step:
            best = max(range(len(values)), key=lambda c: (values[c], -c), default=None)
            if best is None or values[best] < 1e-6:
                break  # what is left stays unplaced (limits)
            step = {dive.patterns[best]: 1}
        for pattern, units in step.items():
            fixed[pattern] = fixed.get(pattern, 0) + units
    pool.update(dict.fromkeys(dive.patterns))
    return fixed


def _fewest_units(
    taken: Mapping[Pattern, int],
    pool: Sequence[Pattern],
    items: Sequence[Item],
    demand: Mapping[int, int],
    kinds: Sequence[Kind],
    limits: Mapping[int, int | None],
    global_room: int | None,
    notes: list[str],
    work: Budget,
    floor: float | None = None,
) -> Mapping[Pattern, int]:
    """Among the plans over ``pool`` that place as much as ``taken`` and cost at most
    :data:`NODE_TOLERANCE` more (but no more than the planner's target above ``floor``, a
    bound on their cost, where ``taken`` is within it), one with the fewest new units found:
    local moves, then (plans of at most :data:`FEWEST_MIP_UNITS`) a MIP over the patterns
    near the LP's, with a deterministic node limit, searching below the local moves' plan;
    ``taken`` where none has fewer."""
    new_units = _new_units(taken, kinds)
    if not 1 < new_units <= FEWEST_UNITS_MAX:
        return taken
    covered = covered_copies(taken)
    placed = {index: min(n, covered.get(index, 0)) for index, n in demand.items()}
    cost = _cost(taken, kinds)
    budget = cost * (1 + NODE_TOLERANCE)
    if floor:
        budget = max(cost, min(budget, (1 + TARGET) * floor))
    budget += 1e-9
    weight = budget + 1.0  # one unit fewer outweighs any cost difference within the budget
    # In the MIP, by more than the budget: it stops once its bound shows that no plan has a
    # unit fewer (an absolute gap of the budget), without ranking plans of as many units.
    mip_weight = 2 * budget + 1.0
    penalty = mip_weight * (new_units + 1)  # leaving a copy out costs more than ``taken``
    by_index = {item.index: item for item in items}

    def rank(plan: Mapping[Pattern, int]) -> tuple[float, float]:
        cost = _cost(plan, kinds)
        if cost > budget or not _places(plan, placed):
            return (float("inf"), 0.0)
        return (_new_units(plan, kinds), cost)

    # Local moves first (cheap; they trade cost for fewer units within the budget), then a
    # MIP over the patterns near the LP's (every pattern seen, priced), started from theirs.
    moved = dict(improve(list(taken.items()), kinds, by_index, placed, global_room, weight, budget))
    best = min((taken, moved), key=rank)
    if work.mip_exhausted or new_units > FEWEST_MIP_UNITS:
        return best
    master = Master(items, placed, kinds, limits, global_room, penalty, weight)
    master.add_all([*pool, *moved])
    master.cap_cost(budget)
    column_generation(master, kinds, placed, MAX_ROUNDS, work)
    *_, value = master.solve_lp()  # (column generation may stop with patterns unpriced)
    if _fewest_in_lp(value, budget, weight) >= _new_units(best, kinds):
        return best  # the LP shows that no plan over these patterns has a unit fewer
    near = master.near_support(weight * FEWEST_REDUCED_COST, [*taken, *moved])
    near.cap_cost(budget)
    near.set_surcharge(mip_weight)
    units = near.solve_integer(
        notes, budget, moved, placed, FEWEST_MIP_NODES, FEWEST_IMPROVING, work
    )
    chosen = {p: u for p, u in zip(near.patterns, units, strict=True) if u > 0}

    return min((best, chosen), key=rank)


def _fewest_in_lp(value: float, budget: float, weight: float) -> int:
    """New units of any plan over the master's patterns placing its demand at a cost of at
    most ``budget``, given its LP ``value`` with each new unit surcharged ``weight``: the
    plan's cost plus ``weight`` per unit is at least ``value``, so it has at least
    ``(value - budget) / weight`` units, rounded up."""
    return max(0, math.ceil((value - budget) / weight - 1e-6))


def _cost(plan: Mapping[Pattern, int], kinds: Sequence[Kind]) -> float:
    return sum(kinds[p.kind].cost * u for p, u in plan.items())


def _places(plan: Mapping[Pattern, int], demand: Mapping[int, int]) -> bool:
    return _left_out(plan, demand) == 0


def _left_out(plan: Mapping[Pattern, int], demand: Mapping[int, int]) -> int:
    """Copies of ``demand`` that ``plan`` does not place."""
    covered = covered_copies(plan)
    return sum(max(0, n - covered.get(index, 0)) for index, n in demand.items())


def _new_units(plan: Mapping[Pattern, int], kinds: Sequence[Kind]) -> int:
    return sum(u for p, u in plan.items() if kinds[p.kind].new)


def _objective(master: Master, chosen: Mapping[Pattern, int], demand: Mapping[int, int]) -> float:
    """Cost plus surcharges plus the penalty of what is left unplaced."""
    cost = sum(master.unit_cost(master.kinds[p.kind]) * u for p, u in chosen.items())
    return cost + master.penalty * _left_out(chosen, demand)
