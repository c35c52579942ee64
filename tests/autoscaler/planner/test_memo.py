"""A request planned before gets the plan made for it, without planning again; any change
to the request is planned anew."""

from __future__ import annotations

from dataclasses import replace

from autoscaler.planner import (
    BundleDemand,
    Demand,
    ExistingNode,
    Limits,
    NodeType,
    Plan,
    PlanRequest,
)
from autoscaler.planner.aliases import plan_canonical
from autoscaler.planner.memo import PlanMemo

A100 = NodeType("a100", {"CPU": 96, "GPU": 8, "accelerator_type:A100": 1}, 32.77)
T4 = NodeType("t4", {"CPU": 4, "GPU": 1, "accelerator_type:T4": 1}, 0.53)


def request(gpus: int = 8, copies: int = 3, max_workers: int | None = 3) -> PlanRequest:
    """A backlog ``max_workers`` keeps waiting (the t4 and two A100 nodes: two of three
    copies placed)."""
    return PlanRequest(
        node_types=(A100, T4),
        demand=Demand(
            bundles=(BundleDemand({"GPU": gpus, "accelerator_type:A100": 0.001}, copies),)
        ),
        existing=(ExistingNode("t4", {"CPU": 4.0, "GPU": 1.0}, node_id="i-1"),),
        limits=Limits(max_workers=max_workers),
    )


class Counting:
    """The real planner, counting its runs."""

    def __init__(self) -> None:
        self.runs = 0

    def __call__(self, asked: PlanRequest) -> Plan:
        self.runs += 1
        return plan_canonical(asked)


def test_the_same_request_again_is_handed_the_plan_made_for_it():
    planner = Counting()
    memo = PlanMemo(planner)
    first = memo.plan(request())
    assert first.launch_counts() == {"a100": 2} and first.infeasible  # the third copy waits
    again = memo.plan(request())  # built anew, equal
    assert again == first == plan_canonical(request())
    assert planner.runs == 1 and (memo.made, memo.reused) == (1, 1)


def test_mappings_listed_in_another_order_are_the_same_request():
    planner = Counting()
    memo = PlanMemo(planner)
    first = memo.plan(request())
    reordered = replace(
        request(), existing=(ExistingNode("t4", {"GPU": 1.0, "CPU": 4.0}, node_id="i-1"),)
    )  # Ray may list a node's resources in any order from one round to the next
    assert memo.plan(reordered) is first and planner.runs == 1


def test_free_room_of_a_resource_no_bundle_asks_for_is_not_a_change():
    planner = Counting()
    memo = PlanMemo(planner)
    first = memo.plan(request())
    for stored in (2.5e9, 2.4e9):  # Ray's free object store, as objects come and go
        node = ExistingNode("t4", {"CPU": 4.0, "GPU": 1.0, "object_store_memory": stored})
        moved = replace(request(), existing=(replace(node, node_id="i-1"),))
        assert memo.plan(moved) is first
    assert planner.runs == 1 and memo.reused == 2


def test_free_room_of_a_resource_a_bundle_asks_for_is_planned_anew():
    planner = Counting()
    memo = PlanMemo(planner)
    t4 = replace(T4, resources={**T4.resources, "object_store_memory": 4e9})
    bundle = BundleDemand({"CPU": 1, "object_store_memory": 1e9})
    plans = [
        memo.plan(
            PlanRequest(
                node_types=(t4,),
                demand=Demand(bundles=(bundle,)),
                existing=(ExistingNode("t4", {"CPU": 4.0, "object_store_memory": room}),),
            )
        )
        for room in (2e9, 0.5e9)
    ]
    assert planner.runs == 2
    assert plans[0].launch_counts() == {} and plans[1].launch_counts() == {"t4": 1}


def test_an_alias_asks_for_its_canonical_resource_too():
    planner = Counting()
    memo = PlanMemo(planner)
    metax = NodeType("metax", {"CPU": 32, "GPU": 8, "accelerator_type:MetaX-C500": 1}, 9.0)
    asked = Demand(bundles=(BundleDemand({"GPU": 1, "accelerator_type:MXC500": 0.001}),))

    def existing(token: float) -> PlanRequest:
        node = ExistingNode(
            "metax", {"CPU": 32.0, "GPU": 8.0, "accelerator_type:MetaX-C500": token}
        )
        return PlanRequest((metax,), asked, (node,))

    with_token, without = memo.plan(existing(1.0)), memo.plan(existing(0.0))
    assert planner.runs == 2  # MXC500 is planned as the MetaX-C500 token the node has
    assert with_token.launch_counts() == {} and without.launch_counts() == {"metax": 1}


def test_any_change_to_the_request_is_planned_anew():
    planner = Counting()
    memo = PlanMemo(planner)
    memo.plan(request())
    changed = [
        request(copies=4),
        request(gpus=4),
        request(max_workers=4),
        replace(request(), existing=()),
        replace(request(), node_types=(A100, replace(T4, price=0.6))),
    ]
    plans = [memo.plan(asked) for asked in changed]
    assert planner.runs == 1 + len(changed) and memo.reused == 0
    assert plans == [plan_canonical(asked) for asked in changed]
    assert plans[2].launch_counts() == {"a100": 3} and not plans[2].infeasible


def test_the_least_recently_asked_request_is_forgotten_first():
    planner = Counting()
    memo = PlanMemo(planner, size=2)
    one, two, three = request(copies=1), request(copies=2), request(copies=3)
    for asked in (one, two, one, three):  # three forgets two, not one (asked for since)
        memo.plan(asked)
    assert planner.runs == 3
    memo.plan(one)
    assert planner.runs == 3
    memo.plan(two)
    assert planner.runs == 4
