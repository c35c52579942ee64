"""A demand token that is another spelling of a canonical accelerator type is planned as
that type, and the plan says so."""

from __future__ import annotations

from autoscaler.planner import BundleDemand, Demand, NodeType, PlacementGroupDemand, PlanRequest
from autoscaler.planner.aliases import canonical_demand, plan_canonical

GAUDI2 = NodeType(
    "gaudi2", {"CPU": 96, "HPU": 8, "accelerator_type:Intel-GAUDI2": 1}, 32.0, max_workers=4
)
MXC = NodeType("metax", {"CPU": 32, "GPU": 8, "accelerator_type:MXC500": 1}, 9.0)


def test_an_alias_is_planned_as_its_canonical_name_with_a_note():
    demand = Demand(
        bundles=(BundleDemand({"HPU": 8, "accelerator_type:Gaudi2": 0.001}, 2),),
        placement_groups=(
            PlacementGroupDemand("STRICT_SPREAD", ({"HPU": 1, "accelerator_type:gaudi2": 0.001},)),
        ),
    )
    result = plan_canonical(PlanRequest(node_types=(GAUDI2,), demand=demand))
    # Two full hosts for the bundles, a third for the group: all of it planned as Intel-GAUDI2.
    assert result.launch_counts() == {"gaudi2": 3} and not result.infeasible
    assert (
        "accelerator_type:Gaudi2 is an alias of accelerator_type:Intel-GAUDI2: planned as "
        "accelerator_type:Intel-GAUDI2" in result.notes
    )


def test_tokens_a_node_type_advertises_and_unknown_tokens_are_left_alone():
    demand = Demand(
        bundles=(
            BundleDemand({"GPU": 1, "accelerator_type:MXC500": 0.001}),  # Ray's own name
            BundleDemand({"GPU": 1, "accelerator_type:NotAChip": 0.001}),
        )
    )
    same, notes = canonical_demand(demand, (MXC,))
    assert same == demand and notes == ()
