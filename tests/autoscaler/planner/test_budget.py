"""The work budget: once spent, the planner keeps its best plan so far, places the rest
greedily, says so, and keeps a valid bound; the same input always gives the same plan."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from autoscaler.planner import (
    BundleDemand,
    Demand,
    ExistingNode,
    Limits,
    PlacementGroupDemand,
    PlanRequest,
    plan,
)
from autoscaler.planner.budget import WORK_LIMIT, Budget
from autoscaler.planner.verify import verify
from tests.autoscaler.planner.test_plan_quality import generated
from tests.autoscaler.planner.test_witness import CPU8, GIB, T4X4

ROOT = Path(__file__).resolve().parents[3]
LIMITED = ("limited by", "STRICT_SPREAD", "every fitting")


def _checked(request: PlanRequest, work_limit: int):
    result = plan(request, witness=True, work_limit=work_limit)
    launched = result.launch_counts()
    for name, units in result.deferred:
        launched[name] = launched.get(name, 0) + units
    return result, verify(request, result.witness, launched)


def _reached(result) -> bool:
    noted = any(note.startswith("work budget reached") for note in result.notes)
    assert noted == result.budget_reached
    return noted


@pytest.mark.parametrize(("kind", "work_limit"), [("gangs", 0), ("gcp", 3_000), ("diverse", 0)])
def test_budget_reached_still_places_every_feasible_bundle_with_a_valid_bound(kind, work_limit):
    request = generated(200, kind, 1)
    result, problems = _checked(request, work_limit)
    assert _reached(result)
    assert problems == []  # every bundle placed once or listed, within every node
    assert [i for i in result.infeasible if i.reason.startswith(LIMITED)] == []
    full = plan(request)
    assert not _reached(full)
    assert result.infeasible == full.infeasible  # only what no node type holds
    assert 0 < result.lower_bound_per_hour <= result.cost_per_hour
    assert result.lower_bound_per_hour <= full.cost_per_hour


BENCHMARK_IMPORTS = (
    "import sys; sys.path.insert(0, 'benchmarks');"
    "from planner_problems import mixed_problem;"
    "from autoscaler.config import parse_cluster_config;"
    "from autoscaler.demand import parse_demand;"
    "from autoscaler.planner import PlanRequest, plan;"
)


def in_two_processes(code: str) -> list[str]:
    """What ``code`` (after the benchmark problems' imports) prints in two fresh processes."""
    return [
        subprocess.run(
            [sys.executable, "-c", BENCHMARK_IMPORTS + code],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for _ in range(2)
    ]


def test_budget_is_counted_work_so_the_plan_is_the_same_in_another_process():
    runs = in_two_processes(
        "c, d = mixed_problem(2000, 'gangs', 0); config = parse_cluster_config(c, 'bench');"
        "r = plan(PlanRequest(config.node_types(), parse_demand(d), (), config.limits()),"
        " work_limit=20_000);"
        "print(sorted(r.launch_counts().items()), r.cost_per_hour, r.lower_bound_per_hour)"
    )
    assert runs[0] == runs[1]
    result = plan(generated(2000, "gangs", 0), work_limit=20_000)
    assert _reached(result)
    assert runs[0].strip().endswith(f"{result.cost_per_hour} {result.lower_bound_per_hour}")


def test_greedy_uses_free_capacity_first_and_keeps_limits_and_gangs_whole():
    existing = (ExistingNode("m6i.2xlarge", {"CPU": 8, "memory": 32 * GIB}, node_id="i-1"),)
    gang = PlacementGroupDemand("STRICT_SPREAD", ({"GPU": 1, "CPU": 1},) * 3, count=3)
    demand = Demand((BundleDemand({"CPU": 1}, 10),), (gang,))
    roomy = PlanRequest((CPU8, T4X4), demand, existing)
    result = plan(roomy, work_limit=0)
    assert _reached(result)
    assert result.placed_on_existing >= 8
    assert result.infeasible == ()
    assert result.launch_counts()["g4dn.12xlarge"] == 3  # one slot of each gang per node
    tight = PlanRequest((CPU8, T4X4), demand, existing, Limits(max_workers=2))
    result = plan(tight, work_limit=0)
    (short,) = [i for i in result.infeasible if "STRICT_SPREAD" in i.reason]
    assert short.count == 3  # gangs are placed whole or not at all
    assert sum(result.launch_counts().values()) <= 2


def test_ordinary_problems_stay_within_the_default_budget():
    for kind in ("flexible", "gcp"):
        assert not _reached(plan(generated(2000, kind, 0), work_limit=WORK_LIMIT))


def test_a_repair_allowance_never_raises_the_work_limit_and_is_undone_after_its_block():
    budget = Budget(limit=1_000, used=900, mip_limit=500, mip_used=600)
    with budget.at_most(50):
        assert not budget.exhausted
        budget.spend(50)
        assert budget.exhausted  # 50 more, not the 100 the limit leaves
    assert not budget.exhausted and budget.limit == 1_000
    with budget.at_most(500):
        budget.spend(100)
        assert budget.exhausted  # never past the plan's own limit
    with pytest.raises(RuntimeError), budget.more_mip(200):
        assert not budget.mip_exhausted  # past the MIP limit: more MIP work within the block
        budget.spend_mip(199)
        assert not budget.mip_exhausted
        raise RuntimeError
    assert budget.mip_exhausted and budget.mip_limit == 500
