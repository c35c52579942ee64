"""The work budget: once spent, the planner keeps its best plan so far, places the rest
greedily, says so, and keeps a valid bound; the same input always gives the same plan."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import Future
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
from autoscaler.planner.bound import BoundModel
from autoscaler.planner.budget import WORK_LIMIT, Budget
from autoscaler.planner.rounding import _Ahead
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


def test_an_interrupt_spends_all_work_while_it_says_so_and_leaves_the_limits_alone():
    stop = [False]
    budget = Budget(limit=1_000, mip_limit=500, interrupt=lambda: stop[0])
    assert not budget.exhausted and not budget.mip_exhausted
    stop[0] = True
    assert budget.exhausted and budget.mip_exhausted
    assert (budget.limit, budget.used, budget.mip_limit, budget.mip_used) == (1_000, 0, 500, 0)


def _work_ahead(budget: Budget, notes: list[str], pool: dict, seen: list[bool]):
    def work():
        seen.append(budget.exhausted)
        budget.spend(10)
        budget.spend_mip(5)
        notes.append("made ahead")
        pool["pattern made ahead"] = None
        return {"pattern made ahead": 1}

    return work


def test_a_rounding_made_ahead_stops_once_the_bound_shows_it_unwanted_and_is_undone_whole():
    budget, notes, pool, seen = Budget(used=7, mip_used=3), ["before"], {"kept": None}, []
    ahead = _Ahead(_work_ahead(budget, notes, pool, seen), budget, notes, pool, lambda b: b >= 9)
    mip: Future[float | None] = Future()
    mip.set_result(10.0)  # the bound MIP finished first, and its bound shows the plan close
    ahead.run(mip)
    assert seen == [True]  # the rounding saw its work spent, so it stopped where it stood
    ahead.undo()
    assert (budget.used, budget.mip_used, budget.interrupt) == (7, 3, None)
    assert notes == ["before"] and list(pool) == ["kept"]


def test_a_rounding_made_ahead_and_wanted_is_kept_as_made_and_not_made_again():
    budget, notes, pool, seen = Budget(), [], {}, []
    ahead = _Ahead(_work_ahead(budget, notes, pool, seen), budget, notes, pool, lambda b: b >= 9)
    mip: Future[float | None] = Future()
    ahead.run(mip)  # the bound MIP still runs: the rounding goes on to its end
    mip.set_result(8.0)  # ... and its bound does not show the plan close: the rounding is kept
    assert ahead.result() == {"pattern made ahead": 1}
    assert seen == [False] and budget.used == 10 and notes == ["made ahead"]
    assert budget.interrupt is None


@pytest.mark.parametrize(("kind", "seed"), [("flexible", 1), ("gcp", 3), ("gangs", 1)])
def test_rounding_ahead_of_the_bound_gives_the_plan_rounding_after_it_gives(
    kind, seed, monkeypatch
):
    """Plans whose bound MIP decides whether to round again (kept on the first and last,
    undone on the second): the plan is the same as when each rounding waits for that bound."""
    request = generated(200, kind, seed)
    made_ahead = []
    run = _Ahead.run
    monkeypatch.setattr(_Ahead, "run", lambda self, mip: made_ahead.append(run(self, mip)))
    ahead = plan(request)
    assert made_ahead
    bounds = BoundModel.bounds
    monkeypatch.setattr(
        BoundModel, "bounds", lambda self, *a, meanwhile=None, **k: bounds(self, *a, **k)
    )
    in_order = plan(request)
    assert ahead == in_order  # launches, cost, bounds, node bound, notes
