"""Column generation on large plans: the stall stop keeps plans close to their bound."""

from __future__ import annotations

import pytest

from autoscaler.planner import plan
from tests.autoscaler.planner.test_plan_quality import (
    assert_places_all_within_three_percent,
    generated,
)


@pytest.mark.parametrize("seed", [0, 2])
def test_a_large_gang_heavy_plan_stays_within_three_percent_and_deterministic(seed):
    # Over 150 items (hundreds of gang slots): the stall stop applies.
    request = generated(2000, "gangs", seed)
    result = plan(request)
    assert_places_all_within_three_percent(result)
    assert plan(request) == result
