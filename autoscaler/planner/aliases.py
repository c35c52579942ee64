"""Accelerator aliases in demand: a token that is another spelling of a canonical type
(``accelerator_type:Gaudi2``, ``accelerator_type:a100-80gb``).

Ray schedules a task on the resource name exactly as written, so an alias is planned as its
canonical type only where the nodes launched for it will advertise the alias itself (Ray's
own names, such as ``FURIOSA_RNGD``, are advertised tokens and need no renaming). Any other
alias is left as it is (so it shows as infeasible, not as a node that never serves it), and
the plan's notes name the token to request instead. Tokens a node type advertises are left
as they are."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from accel.names import UnknownAcceleratorTypeError, lookup, tokens_for
from autoscaler.planner.items import TOKEN_PREFIX
from autoscaler.planner.model import (
    BundleDemand,
    Demand,
    NodeType,
    PlacementGroupDemand,
    Plan,
    PlanRequest,
    Resources,
)
from autoscaler.planner.planner import plan


def plan_canonical(request: PlanRequest, witness: bool = False) -> Plan:
    """:func:`plan` with alias tokens in the demand planned as their canonical names."""
    demand, notes = canonical_demand(request.demand, request.node_types)
    result = plan(replace(request, demand=demand), witness)
    return replace(result, notes=result.notes + notes) if notes else result


def canonical_demand(
    demand: Demand, node_types: Iterable[NodeType]
) -> tuple[Demand, tuple[str, ...]]:
    """``demand`` with alias tokens renamed, and one note per renamed token."""
    advertised = {
        name
        for t in node_types
        for name in (*t.resources, *t.head_resources)
        if name.startswith(TOKEN_PREFIX)
    }
    renames: dict[str, str] = {}
    unplanned: list[str] = []
    for name in {n for n in demand.resource_names() if n.startswith(TOKEN_PREFIX)}:
        if name in advertised:
            continue
        try:
            entry = lookup(name)
        except UnknownAcceleratorTypeError:
            continue
        canonical = TOKEN_PREFIX + entry.name
        if canonical == name:
            continue
        if name.removeprefix(TOKEN_PREFIX) in tokens_for(entry.name):
            renames[name] = canonical
        else:
            unplanned.append(
                f"{name} is an alias of {canonical}, but nodes advertise only "
                f"{canonical} and Ray schedules on the name as written: request {canonical}"
            )
    if not renames:
        return demand, tuple(sorted(unplanned))

    def rename(resources: Resources) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, quantity in resources.items():
            key = renames.get(name, name)
            out[key] = max(out.get(key, 0.0), quantity)
        return out

    renamed = Demand(
        tuple(BundleDemand(rename(b.resources), b.count) for b in demand.bundles),
        tuple(
            PlacementGroupDemand(g.strategy, tuple(rename(b) for b in g.bundles), g.count)
            for g in demand.placement_groups
        ),
    )
    notes = tuple(
        f"{old} is an alias of {new}: planned as {new}" for old, new in sorted(renames.items())
    )
    return renamed, notes + tuple(sorted(unplanned))


__all__ = ["canonical_demand", "plan_canonical"]
