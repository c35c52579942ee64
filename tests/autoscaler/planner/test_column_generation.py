"""Large gang-heavy plans: column generation's stall stop and the rounding's greedy seeds keep
plans close to their bound."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from autoscaler.planner import columns, plan
from autoscaler.planner.solver import side_by_side
from tests.autoscaler.planner.test_plan_quality import (
    assert_places_all_within_three_percent,
    generated,
)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_large_gang_heavy_plan_stays_within_three_percent_and_deterministic(seed):
    # Over 150 items (hundreds of gang slots): the stall stop applies, and the rounding's
    # MIP is offered the remainder packed greedily (seed 1: dear gang nodes, 4% above its
    # bound without).
    request = generated(2000, "gangs", seed)
    result = plan(request)
    assert_places_all_within_three_percent(result)
    assert plan(request) == result


def test_exact_pricing_solves_two_knapsacks_at_once_and_plans_as_one_at_a_time(monkeypatch):
    # A limit-bound plan prices exactly: its knapsacks are independent, so they run two at
    # once; the plan must be the one that solving them one by one gives.
    request = generated(200, "gangs", 1)
    max_workers = int(0.6 * plan(request).node_count)
    limited = replace(request, limits=replace(request.limits, max_workers=max_workers))
    together = []

    def watched(work, inputs):
        together.append(len(inputs))
        return side_by_side(work, inputs)

    monkeypatch.setattr(columns, "side_by_side", watched)
    side = plan(limited)
    assert max(together) >= 2
    monkeypatch.setattr(columns, "side_by_side", lambda work, inputs: [work(x) for x in inputs])
    assert plan(limited) == side


def test_side_by_side_keeps_the_inputs_order_and_raises_what_a_work_raises():
    def slow_on_odd(x: int) -> int:
        time.sleep(0.02 if x % 2 else 0)
        if x == 7:
            raise ValueError("seven")
        return x * x

    assert side_by_side(slow_on_odd, range(6)) == [0, 1, 4, 9, 16, 25]
    with pytest.raises(ValueError, match="seven"):
        side_by_side(slow_on_odd, range(9))
