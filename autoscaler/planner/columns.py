"""Column generation: patterns with a negative reduced cost at the master's duals.

Greedy pricing packs each kind in three orders (by dual per dominant share, per summed share,
per copy), then, once those find nothing, a wider search that starts a packing with each of
the best-ranked items. Exact pricing (:mod:`~autoscaler.planner.knapsack`, small plans only)
solves the knapsack of each kind whose fractional single-resource bound lets a unit be worth
more than it costs, and yields Lagrangian bounds
(:class:`~autoscaler.planner.bound.DualBound`). Round counts are fixed: the same input gives
the same patterns on any machine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from autoscaler.planner.bound import DualBound, UnitValues
from autoscaler.planner.budget import Budget
from autoscaler.planner.items import Item
from autoscaler.planner.knapsack import Unit, best_unit
from autoscaler.planner.master import Master
from autoscaler.planner.packing import (
    Kind,
    Pattern,
    UnitVectors,
    fit,
    pack,
    pack_rows,
    replay,
    unit_vectors,
)
from autoscaler.planner.solver import side_by_side

MAX_ROUNDS = 60
"""Column-generation rounds at most (deterministic)."""
WIDE_FIRST = 8
"""The wider pricing search starts a packing with each of this many best-ranked items."""
EXACT_ROUNDS = 6
"""Rounds of exact pricing per phase at most (deterministic)."""
TAIL_ROUNDS = 5
TAIL_GAIN = 0.002
TAIL_FROM_ITEMS = 150
"""On masters of at least :data:`TAIL_FROM_ITEMS` items, column generation stops once the LP
value fell by less than :data:`TAIL_GAIN` of it over the last :data:`TAIL_ROUNDS` rounds: the
long tail of greedy pricing (many rounds, each a few patterns that barely move the LP) was
most of the time of large gang-heavy plans. Smaller masters price on to the end: their
rounds are cheap, and their rounding is sensitive to the last patterns. (The fewer-nodes
phase stops on a stall whatever the master's size: its patterns only feed the fewest-nodes
step, and its tail was most of its rounds, e.g. 52 on a 60-bundle Cloud TPU plan.)"""
TAIL_FROM_WORK = 50_000
"""...and on any master once it has spent this much of the plan's work budget
(:data:`~autoscaler.planner.budget.WORK_LIMIT`): where the tail would spend the rest,
rounding got none, and what the LP left was packed greedily (gang-heavy 2,000-bundle plans
over 50 and 60 node types: 44 rounds, 3.9% and 4.5% above their bounds; 2.2% now). No plan
of the benchmark's 100 up to 2,000 bundles changed; of 30 gang-heavy ones over 40-60 types,
three others did, by under 0.1%; of 146 limit-bound ones, one placed 3 copies more and one
cost 1.4% more (3.0% above its bound)."""
BOUND_GAP = 1e-3
"""Relative gap of the knapsacks solved only for a Lagrangian bound (not for patterns): their
dual bound is valid wherever they stop, and closing the last 0.1% was most of their time on
large plans."""
LAGRANGIAN_MIP_WORK = 20_000
"""MIP work (:func:`~autoscaler.planner.solver.limit_mip`) of one Lagrangian bound's knapsacks
together; past it, each knapsack stops at its first callback with the dual bound it has
(valid, if weaker). On the benchmark sweep they need far less; a knapsack of a node type
that may hold 150 gang-heavy shapes spent most of a second on its root cut loop, for the
last 0.2% of its bound."""


def exact_rounds(
    master: Master,
    kinds: Sequence[Kind],
    caps: Mapping[int, int],
    by_index: Mapping[int, Item],
    cost_phase: bool = False,
    max_rounds: int = EXACT_ROUNDS,
    work: Budget | None = None,
) -> list[DualBound]:
    """Price every kind exactly (after the greedy pricing found nothing): add the patterns
    with a negative reduced cost, then the greedy search again; a Lagrangian relaxation per
    round. Stops when exact pricing finds nothing (the LP is then optimal over all patterns)
    or after ``max_rounds`` rounds. ``work``: the knapsacks' MIP work is counted there, and
    once it is spent each stops at its first callback (its bound stays valid, its pattern
    may not be the best)."""
    found: list[DualBound] = []
    for _ in range(max_rounds):
        item_duals, kind_duals, _ = master.solve_lp()
        value = sum(item_duals[i] * caps[i] for i in caps if i in item_duals)
        dual_vector, cap_vector = _vectors(kinds, item_duals, caps)
        fractional: dict[int, float] = {}
        for kind in kinds:
            # A unit worth no more than it costs neither prices out nor adds to the bound.
            bound = _value_bound(kind, dual_vector, cap_vector)
            worth_pricing = master.unit_cost(kind) - kind_duals[kind.index]
            if bound <= (min(kind.cost, worth_pricing) if cost_phase else worth_pricing):
                fractional[kind.index] = bound
        priced = [kind for kind in kinds if kind.index not in fractional]
        units = _best_units(priced, item_duals, caps, work)
        unit_of = {kind.index: unit for kind, unit in zip(priced, units, strict=True)}
        unit_values = []
        added = 0
        for kind in kinds:
            if kind.index in fractional:
                unit_values.append((kind.index, fractional[kind.index]))
                continue
            unit = unit_of[kind.index]
            unit_values.append((kind.index, unit.value_bound))
            if unit.contents is None:
                continue
            pattern = Pattern(kind.index, unit.contents)
            if replay(kind, pattern, by_index) is None:
                continue
            reduced = master.unit_cost(kind) - _worth(pattern, item_duals) - kind_duals[kind.index]
            if reduced < -1e-7 * max(1.0, master.unit_cost(kind)) and master.add(pattern):
                added += 1
        if cost_phase:
            found.append(DualBound(value, tuple(unit_values)))
        if not added:
            break
        column_generation(master, kinds, caps, MAX_ROUNDS)
    return found


def _best_units(
    kinds: Sequence[Kind],
    item_duals: Mapping[int, float],
    caps: Mapping[int, int],
    work: Budget | None,
) -> list[Unit]:
    """Each kind's most valuable unit at ``item_duals``: two knapsacks at once, as they are
    independent, unless they share ``work`` (whose spending order decides where each stops)."""

    def solved(kind: Kind) -> Unit:
        return best_unit(
            kind.hosts, kind.items, item_duals, caps, kind.needs_anchor, fit, work=work
        )

    return side_by_side(solved, kinds) if work is None else [solved(kind) for kind in kinds]


def lagrangian(
    master: Master, kinds: Sequence[Kind], caps: Mapping[int, int], budget: Budget
) -> DualBound:
    """The Lagrangian relaxation at the master's last duals; its knapsacks (one per kind) are
    solved only if its bound is asked for (:class:`_Knapsacks`)."""
    duals = dict(master.item_duals)
    value = sum(duals[i] * caps[i] for i in caps if i in duals)
    return DualBound(value, price=_Knapsacks(kinds, duals, caps, budget))


class _Knapsacks:
    """Per kind, a bound on what one unit holds at the given item values: the fractional
    bound, or where that leaves a unit worth more than it costs, the knapsack's too (a kind
    worth no more than its cost adds nothing to the bound), while ``budget`` lasts (past it,
    the fractional bound stands in: valid, if weaker). The knapsacks are solved one at a time,
    in the kinds' order, each kept: pricing stops once the bound over the values known, with
    the rest at what a greedy packing holds (no more than their knapsacks find), is shown too
    low, and goes on from there when asked again, so every knapsack is solved as it would be
    in one go."""

    def __init__(
        self,
        kinds: Sequence[Kind],
        duals: Mapping[int, float],
        caps: Mapping[int, int],
        budget: Budget,
    ) -> None:
        self.kinds, self.duals, self.caps, self.budget = kinds, duals, caps, budget
        self.work = Budget(mip_limit=LAGRANGIAN_MIP_WORK)
        self.values: dict[int, float] = {}
        """Per kind (by position): its fractional bound, or once solved, its knapsack's."""
        self.queue: list[Kind] | None = None
        """Kinds whose knapsack is yet to solve (None: not sorted out yet)."""
        self.greedy: dict[int, float] = {}
        """Per kind in the queue: what its greedy packings hold at best."""

    def __call__(self, hopeless: Callable[[UnitValues], bool]) -> UnitValues | None:
        if self.queue is None:
            self.queue = self._sort_out()
        while self.queue:
            waiting = {kind.index for kind in self.queue}
            held = tuple(
                (k.index, self.greedy[k.index] if k.index in waiting else self.values[k.index])
                for k in self.kinds
            )
            if hopeless(held):
                return None
            kind = self.queue.pop(0)
            unit = best_unit(
                kind.hosts,
                kind.items,
                self.duals,
                self.caps,
                kind.needs_anchor,
                fit,
                BOUND_GAP,
                self.work,
            )
            self.values[kind.index] = min(self.values[kind.index], unit.value_bound)
        return tuple((kind.index, self.values[kind.index]) for kind in self.kinds)

    def _sort_out(self) -> list[Kind]:
        """Each kind's fractional bound, and the kinds whose knapsack is to be solved (their
        work spent now, as each is met), with what a greedy packing of theirs holds."""
        dual_vector, cap_vector = _vectors(self.kinds, self.duals, self.caps)
        queue = []
        for kind in self.kinds:
            fractional = _value_bound(kind, dual_vector, cap_vector)
            self.values[kind.index] = fractional
            if fractional <= kind.cost or self.budget.exhausted:
                continue
            self.budget.spend(len(kind.items) * len(kind.hosts))
            queue.append(kind)
            packed = _price(kind, dual_vector, cap_vector)
            self.greedy[kind.index] = max((_worth(p, dual_vector) for p in packed), default=0.0)
        return queue


def _vectors(
    kinds: Sequence[Kind], duals: Mapping[int, float], caps: Mapping[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """Duals and caps as arrays by item index (over the kinds' items)."""
    size = _index_size(kinds)
    return _by_index(duals, size), _by_index(caps, size, np.int64)


def _index_size(kinds: Sequence[Kind]) -> int:
    """Length of an array indexed by the kinds' item indices."""
    return 1 + max((i.index for kind in kinds for i in kind.items), default=0)


def _by_index(values: Mapping[int, float], size: int, dtype=np.float64) -> np.ndarray:
    """``values`` as an array of ``size`` by item index (indices beyond it left out)."""
    array = np.zeros(size, dtype)
    for index, value in values.items():
        if index < size:
            array[index] = value
    return array


def seed(
    master: Master, kinds: Sequence[Kind], item: Item, caps: Mapping[int, int], best: int
) -> list[Pattern]:
    """Add the ``best`` cheapest-per-copy units holding only ``item`` (up to its cap); returns
    them (whether or not the master had them already)."""
    ranked = []
    for kind in kinds:
        if item not in kind.items or (kind.needs_anchor and item.rider):
            continue
        pattern = pack(kind, [item], {item.index: caps[item.index]})
        if pattern is not None:
            copies = pattern.totals()[item.index]
            ranked.append((master.unit_cost(kind) / copies, kind.index, pattern))
    chosen = [pattern for _, _, pattern in sorted(ranked, key=lambda r: r[:2])[:best]]
    for pattern in chosen:
        master.add(pattern)
    return chosen


def column_generation(
    master: Master,
    kinds: Sequence[Kind],
    caps: Mapping[int, int],
    max_rounds: int,
    budget: Budget | None = None,
    stall_stop: bool = False,
) -> int:
    """Add improving patterns until none is found, ``budget`` is spent or (large masters,
    or any master with ``stall_stop``) the LP value stalls; returns the rounds used."""
    size = _index_size(kinds)
    cap_vector = _by_index(caps, size, np.int64)
    values: list[float] = []
    tail = stall_stop or len(master.row_of) >= TAIL_FROM_ITEMS
    start = budget.used if budget is not None else 0
    for rounds in range(1, max_rounds + 1):
        if budget is not None and budget.exhausted:
            return rounds - 1
        item_duals, kind_duals, objective = master.solve_lp()
        values.append(objective)
        heavy = budget is not None and budget.used - start >= TAIL_FROM_WORK
        if (tail or heavy) and _stalled(values):
            return rounds
        if budget is not None:
            budget.spend(master.size())
        duals = _by_index(item_duals, size)
        added = 0
        for wide in (False, True):  # the wider search only once the quick one finds nothing
            if budget is not None:
                budget.spend(sum(len(kind.items) for kind in kinds))
            improving = []
            for kind in kinds:
                worth_more = master.unit_cost(kind) - kind_duals[kind.index]
                for pattern in _price(kind, duals, cap_vector, wide, worth_more):
                    reduced = worth_more - _worth(pattern, item_duals)
                    if reduced < -1e-7 * max(1.0, master.unit_cost(kind)):
                        improving.append(pattern)
            added = master.add_all(improving)
            if added:
                break
        if not added:
            return rounds
    master.solve_lp()
    return max_rounds


def _stalled(values: Sequence[float]) -> bool:
    """Whether the LP value fell by at most :data:`TAIL_GAIN` of it over the last
    :data:`TAIL_ROUNDS` rounds."""
    if len(values) <= TAIL_ROUNDS:
        return False
    return values[-1 - TAIL_ROUNDS] - values[-1] <= TAIL_GAIN * abs(values[-1])


def _value_bound(kind: Kind, duals: np.ndarray, caps: np.ndarray) -> float:
    """No unit of ``kind`` holds items worth more at ``duals``: for each resource, the
    fractional knapsack of that resource alone (items that do not use it counted at their
    cap), the least of those (a little above, against rounding)."""
    vectors = unit_vectors(kind)
    values = duals[vectors.indices]
    counts = caps[vectors.indices].astype(np.float64)
    held = (values > 0) & (counts > 0)  # (an item capped at 0 copies is worth nothing here)
    if not held.any():
        return 0.0
    values, counts, needs = values[held], counts[held], vectors.needs[held]
    best = float(np.dot(values, counts))
    for j, room in enumerate(vectors.capacity.tolist()):
        users = needs[:, j] > 0
        if not users.any():
            continue
        need = needs[users, j].astype(np.float64)
        order = np.argsort(-values[users] / need, kind="stable")
        weight = (need * counts[users])[order]
        worth = (values[users] * counts[users])[order]
        before = np.concatenate(([0.0], np.cumsum(weight)[:-1]))
        share = np.clip((room - before) / weight, 0.0, 1.0)
        free = float(np.dot(values[~users], counts[~users]))
        best = min(best, free + float(np.dot(worth, share)))
    return best * (1 + 1e-9) + 1e-12


def _price(
    kind: Kind,
    duals: np.ndarray,
    caps: np.ndarray,
    wide: bool = False,
    worth_more: float | None = None,
) -> list[Pattern]:
    """Candidate patterns for ``kind`` at these duals (per item index): greedy packings in
    three orders, or (``wide``) the best of the packings that start with each item in turn;
    none where no unit can hold more than ``worth_more`` (:func:`_ratio_bound`).
    (A kind holds a dozen items on average: Python lists beat numpy's per-call cost here.)"""
    vectors = unit_vectors(kind)
    values = duals[vectors.indices].tolist()
    valued = [row for row, value in enumerate(values) if value > 1e-12]
    riders, anchored = vectors.rider_list, kind.needs_anchor
    if not valued or (anchored and all(riders[row] for row in valued)):
        return []
    kind_caps = caps[vectors.indices].tolist()
    if worth_more is not None and _ratio_bound(vectors, values, valued, kind_caps) <= worth_more:
        return []
    indices = vectors.index_list

    def ordered(per: Sequence[float] | None) -> list[int]:
        """Valued rows by value (per ``per``) descending, ties by item index; accelerator
        work first, riders in the room it leaves."""
        if per is None:
            order = sorted(valued, key=lambda row: (-values[row], indices[row]))
        else:
            order = sorted(valued, key=lambda row: (-values[row] / per[row], indices[row]))
        if anchored:
            order = [row for row in order if not riders[row]] + [r for r in order if riders[r]]
        return order

    base = ordered(vectors.dominant)
    if wide:
        best: tuple[float, Pattern] | None = None
        for first in base[:WIDE_FIRST]:
            if anchored and riders[first]:
                continue
            pattern = pack_rows(kind, [first] + [row for row in base if row != first], kind_caps)
            if pattern is not None and (best is None or _worth(pattern, duals) > best[0] + 1e-12):
                best = (_worth(pattern, duals), pattern)
        return [] if best is None else [best[1]]
    found: list[Pattern] = []
    for order in (base, ordered(vectors.summed), ordered(None)):
        pattern = pack_rows(kind, order, kind_caps)
        if pattern is None or pattern in found:
            continue
        if anchored and all(index in vectors.rider_indices for index in pattern.totals()):
            continue
        found.append(pattern)
    return found


def _ratio_bound(
    vectors: UnitVectors, values: list[float], valued: list[int], caps: list[int]
) -> float:
    """No unit holds more than this at ``values`` (per row): the items whose largest share of
    the unit is of one resource take at most the whole of it together, so each resource adds
    at most the best value per share among them; and no more than every item at its cap. (A
    few operations per item, against a packing's many: pricing skips a kind it shows
    worthless, which a third of them are in most rounds.)"""
    best: dict[int, float] = {}
    capped = 0.0
    for row in valued:
        if caps[row] <= 0:
            continue
        capped += values[row] * caps[row]
        resource = vectors.dominant_resource[row]
        best[resource] = max(best.get(resource, 0.0), values[row] / vectors.dominant[row])
    return min(capped, sum(best.values())) * (1 + 1e-9)


def _worth(pattern: Pattern, duals) -> float:
    """What ``pattern`` holds at ``duals`` (per item index: a mapping or a vector)."""
    return sum(duals[i] * n for i, n in pattern.totals().items())
