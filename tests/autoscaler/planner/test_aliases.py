"""A demand token that is another spelling of a canonical accelerator type is planned as
that type, and the plan says so."""

from __future__ import annotations

from autoscaler.planner import BundleDemand, Demand, NodeType, PlacementGroupDemand, PlanRequest
from autoscaler.planner.aliases import canonical_demand, plan_canonical

GAUDI2 = NodeType(
    "gaudi2", {"CPU": 96, "HPU": 8, "accelerator_type:Intel-GAUDI2": 1}, 32.0, max_workers=4
)
MXC = NodeType("metax", {"CPU": 32, "GPU": 8, "accelerator_type:MXC500": 1}, 9.0)


def test_an_alias_is_planned_only_for_nodes_that_advertise_it():
    demand = Demand(
        bundles=(BundleDemand({"HPU": 8, "accelerator_type:Gaudi2": 0.001}, 2),),
        placement_groups=(
            PlacementGroupDemand("STRICT_SPREAD", ({"HPU": 1, "accelerator_type:gaudi2": 0.001},)),
        ),
    )
    result = plan_canonical(PlanRequest(node_types=(GAUDI2,), demand=demand))
    # Ray would schedule these on "accelerator_type:Gaudi2", which an Intel-GAUDI2 node never
    # advertises: launching one would never serve them. They stay unplanned, with the fix.
    assert result.launch_counts() == {} and result.infeasible
    assert (
        "accelerator_type:Gaudi2 is an alias of accelerator_type:Intel-GAUDI2, but nodes "
        "advertise only accelerator_type:Intel-GAUDI2 and Ray schedules on the name as "
        "written: request accelerator_type:Intel-GAUDI2" in result.notes
    )


def test_a_ray_name_of_a_node_type_is_planned_on_it():
    furiosa = NodeType(
        "rngd",
        {
            "CPU": 48,
            "FURIOSA": 8,
            "accelerator_type:FURIOSA_RNGD": 1,
            "accelerator_type:Furiosa-RNGD": 1,
        },
        10.0,
    )
    demand = Demand(bundles=(BundleDemand({"FURIOSA": 1, "accelerator_type:FURIOSA_RNGD": 0.001}),))
    result = plan_canonical(PlanRequest(node_types=(furiosa,), demand=demand))
    assert result.launch_counts() == {"rngd": 1}


def test_tokens_a_node_type_advertises_and_unknown_tokens_are_left_alone():
    demand = Demand(
        bundles=(
            BundleDemand({"GPU": 1, "accelerator_type:MXC500": 0.001}),  # Ray's own name
            BundleDemand({"GPU": 1, "accelerator_type:NotAChip": 0.001}),
        )
    )
    same, notes = canonical_demand(demand, (MXC,))
    assert same == demand and notes == ()
