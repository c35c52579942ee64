"""Demand to launch plan: a pure function over plain records (see ``planner.planner``)."""

from autoscaler.planner.model import (
    BundleDemand,
    Demand,
    ExistingNode,
    Infeasible,
    Launch,
    Limits,
    NodeType,
    PlacementGroupDemand,
    Plan,
    PlanRequest,
)
from autoscaler.planner.planner import plan

__all__ = [
    "BundleDemand",
    "Demand",
    "ExistingNode",
    "Infeasible",
    "Launch",
    "Limits",
    "NodeType",
    "PlacementGroupDemand",
    "Plan",
    "PlanRequest",
    "plan",
]
