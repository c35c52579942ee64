"""Column generation on large plans: the stall stop keeps plans close to their bound."""

from __future__ import annotations

import pytest

from autoscaler.planner import plan
from tests.autoscaler.planner.test_plan_quality import generated


@pytest.mark.parametrize("seed", [0, 2])
def test_a_large_gang_heavy_plan_stays_within_three_percent_and_deterministic(seed):
    # Over 150 items (hundreds of gang slots): the stall stop applies.
    request = generated(2000, "gangs", seed)
    result = plan(request)
    limited = [i for i in result.infeasible if "limited" in i.reason or "gang" in i.reason]
    assert limited == []
    assert len(result.infeasible) == 3  # the generator's three infeasible bundles
    assert result.lower_bound_per_hour <= result.cost_per_hour
    assert result.cost_per_hour <= 1.03 * result.lower_bound_per_hour
    assert plan(request) == result
