"""Demand as packable items, the node types each item fits, and why an item fits none.

An item is ``count`` copies of something that must land on one host: a bundle, or a whole
STRICT_PACK group (several parts together). A STRICT_SPREAD group (a *gang*, placed all or
nothing) becomes one item per distinct bundle shape in it, standing for that shape's
``slots`` positions: ``slots`` copies per copy of the group. A host holds at most as many of
a gang's bundles, of any shapes and positions, as the gang has copies, which is all a plan
needs (by König's theorem its bundles can then be handed to the copies and positions so
that every copy has each position once and no host holds two bundles of one copy:
:mod:`~autoscaler.planner.witness` does). Positions of one shape are interchangeable, so
they are one item: fewer rows for the master and no plans that differ only in which
position a bundle takes. PACK and SPREAD are Ray's preferences, not constraints: their
bundles are planned as independent bundles (a group splits where that is cheaper, or where
no host holds it whole).

Identical shapes are one item whatever record they come from (bundles, soft groups' bundles;
identical STRICT_PACK groups, and STRICT_SPREAD groups of the same bundle shapes, which
are one gang of as many copies); ``Item.sources`` says where its copies come from, so a
plan's witness can name every bundle's origin.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from accel.allocation import SHARE_UNITS
from accel.family_rules import ACCELERATOR_RESOURCES
from accel.names import closest, get
from autoscaler.planner.capacity import Bin, Part, share_vector
from autoscaler.planner.model import (
    SPARE,
    STRICT,
    STRICT_PACK,
    STRICT_SPREAD,
    Demand,
    NodeType,
    Resources,
)

TOKEN_PREFIX = "accelerator_type:"
DEVICE_RESOURCES = frozenset(ACCELERATOR_RESOURCES)


Source = tuple[str, int, int | None]
"""Where copies come from: ``("bundles", i, None)`` for ``demand.bundles[i]``,
``("placement_groups", g, j)`` for bundle ``j`` of group ``g`` (``j`` None: the whole
STRICT_PACK group)."""


@dataclass(eq=False)
class Item:
    index: int
    resources: tuple[Resources, ...]
    """The bundle(s) one copy consists of."""
    parts: tuple[Part, ...]
    count: int
    sources: list[tuple[Source, int]] = field(default_factory=list)
    """(source, copies) in demand order; the copies sum to ``count``."""
    candidates: tuple[str, ...] = ()
    spread_group: int | None = None
    """The STRICT_SPREAD gang the item belongs to (None: not a gang's)."""
    slots: int = 1
    """Positions of its gang the item stands for (bundles per copy of the gang)."""
    cpu_only: bool = False
    rider: bool = False
    """CPU-only and some plain (accelerator-free) type fits it: it may never be the reason
    an accelerator node is launched (under ``spare`` it may use room on one)."""

    def __post_init__(self) -> None:
        total: dict[str, int] = {}
        for part in self.parts:
            for name, need in part.needs:
                total[name] = total.get(name, 0) + need
        self._needs = total
        self.positive_needs = tuple((n, q) for n, q in sorted(total.items()) if q > 0)
        """(resource, units) one copy needs, for a quick check of scalar room."""
        self.device_parts = tuple(part for part in self.parts if part.devices)
        """The parts that take device shares."""
        self.scalar = len(self.parts) == 1 and not self.device_parts and self.spread_group is None
        """Whether scalar room alone decides how many copies fit (no devices, one part, no
        STRICT_SPREAD gang)."""

    @property
    def needs(self) -> dict[str, int]:
        """Summed needs of one copy, in units."""
        return self._needs

    @property
    def gang_copies(self) -> int:
        """Copies of its STRICT_SPREAD gang (the most of the gang's bundles a host holds)."""
        return self.count // self.slots


def positions(items: Sequence[Item]) -> int:
    """Items as the demand lists them: a gang's item once per position it stands for (how
    big a plan is, whatever the planner merges)."""
    return sum(item.slots for item in items)


def is_accelerator_resource(name: str) -> bool:
    return name in DEVICE_RESOURCES or name.startswith(TOKEN_PREFIX)


def is_accelerator_type(node_type: NodeType) -> bool:
    resources = {**node_type.resources, **node_type.head_resources}
    return any(q > 0 and is_accelerator_resource(r) for r, q in resources.items())


def fresh_host(node_type: NodeType, host: int, unit: int, new: bool = True) -> Bin:
    """An empty host of ``node_type`` (host 0 of a slice carries the head resources)."""
    resources = dict(node_type.resources)
    if host == 0:
        for name, quantity in node_type.head_resources.items():
            resources[name] = resources.get(name, 0) + quantity
    devices = {
        name: device_shares(quantity, node_type.devices.get(name))
        for name, quantity in resources.items()
        if name in DEVICE_RESOURCES and quantity > 0
    }
    return Bin(node_type.name, unit, share_vector(resources), devices, new)


def device_shares(quantity: float, count: int | None) -> list[int]:
    """Per-device free units: ``count`` equal devices, or whole devices plus a fraction
    (a partitioned GPU advertising 0.125 is one device with an eighth of a share)."""
    total = share_vector({"x": quantity}).get("x", 0)
    if count:
        return [total // count] * count
    whole, rest = divmod(total, SHARE_UNITS)
    return [SHARE_UNITS] * whole + ([rest] if rest else [])


def build_items(demand: Demand) -> list[Item]:
    """Items in demand order, identical shapes merged (candidates are assigned separately)."""
    items: list[Item] = []
    by_key: dict[tuple, Item] = {}

    def add(resources: Sequence[Resources], count: int, source: Source, key: tuple, **extra):
        if count <= 0:
            return
        item = by_key.get(key)
        if item is None:
            parts = tuple(Part.of(r, DEVICE_RESOURCES) for r in resources)
            cpu_only = not any(is_accelerator_resource(n) for r in resources for n in r if r[n])
            item = Item(len(items), tuple(resources), parts, 0, cpu_only=cpu_only, **extra)
            items.append(item)
            by_key[key] = item
        item.count += count
        item.sources.append((source, count))

    def shape(resources: Resources) -> tuple:
        return tuple(sorted((n, q) for n, q in resources.items() if q))

    for position, bundle in enumerate(demand.bundles):
        add((bundle.resources,), bundle.count, ("bundles", position, None), shape(bundle.resources))
    gangs: dict[tuple, int] = {}
    for group_index, group in enumerate(demand.placement_groups):
        shapes = tuple(shape(b) for b in group.bundles)
        if group.strategy == STRICT_SPREAD:
            # Groups of the same bundle shapes (in any order) are one gang whatever record
            # they come from; its positions of one shape are one item.
            gang = gangs.setdefault(tuple(sorted(shapes)), group_index)
            for position, bundle in enumerate(group.bundles):
                source = ("placement_groups", group_index, position)
                slots = shapes.count(shapes[position])
                key = ("spread", gang, shapes[position])
                add((bundle,), group.count, source, key, spread_group=gang, slots=slots)
        elif group.strategy == STRICT_PACK:
            source = ("placement_groups", group_index, None)
            add(group.bundles, group.count, source, ("pack", shapes))
        else:  # PACK, SPREAD: preferences; capacity-wise independent bundles
            for position, bundle in enumerate(group.bundles):
                source = ("placement_groups", group_index, position)
                add((bundle,), group.count, source, shape(bundle))
    return items


def fits_type(item: Item, node_type: NodeType) -> bool:
    """Whether one copy fits on one host of a fresh unit (host 0 is the roomiest)."""
    return fresh_host(node_type, 0, -1).fits_all(item.parts)


def assign_candidates(
    items: list[Item], node_types: Sequence[NodeType], conservation: str = SPARE
) -> None:
    """Each item's candidate types: the fitting ones. A CPU-only item that some type without
    accelerators fits (whatever other demand does) is a *rider*: under ``strict`` its
    candidates are the plain types only; under ``spare`` accelerator types stay candidates
    (for room on nodes there for accelerator work), but never a reason to launch one."""
    accelerated = {t.name for t in node_types if is_accelerator_type(t)}
    roomiest = [(t.name, fresh_host(t, 0, -1)) for t in node_types]  # host 0: see fits_type
    fitting_of: dict[tuple, list[str]] = {}  # many items share their parts (gangs' items)
    for item in items:
        if item.parts not in fitting_of:
            fitting_of[item.parts] = [name for name, host in roomiest if host.fits_all(item.parts)]
        fitting = fitting_of[item.parts]
        if item.cpu_only:
            plain = [name for name in fitting if name not in accelerated]
            item.rider = bool(plain)
            if plain and conservation == STRICT:
                fitting = plain
        item.candidates = tuple(fitting)


def infeasible_reason(item: Item, node_types: Sequence[NodeType]) -> tuple[str, str | None]:
    """Why no node type fits ``item``, and the closest one."""
    tokens = {
        n[len(TOKEN_PREFIX) :] for r in item.resources for n in r if n.startswith(TOKEN_PREFIX)
    }
    advertised = {
        n[len(TOKEN_PREFIX) :]
        for t in node_types
        for n in {**t.resources, **t.head_resources}
        if n.startswith(TOKEN_PREFIX)
    }
    for token in sorted(tokens - advertised):
        if get(token) is None:
            suggestions = closest(token)
            hint = f"; closest: {', '.join(suggestions)}" if suggestions else ""
            return f"unknown accelerator type {token!r}{hint}", None
        offered = ", ".join(sorted(advertised)) or "none"
        return (
            f"no node type advertises accelerator_type:{token} (node types offer: {offered})",
            None,
        )
    if not node_types:
        return "no node types are configured", None
    scores = {t.name: _distance(item, t) for t in node_types}
    best = min(node_types, key=lambda t: (scores[t.name], -t.priority, t.name))
    detail = "; ".join(_shortfall(item, best)) or "the parts do not fit together on one host"
    return f"no node type can host it; closest is {best.name}: {detail}", best.name


def _distance(item: Item, node_type: NodeType) -> tuple[int, float]:
    """How far a type is from fitting: resources it lacks entirely, then relative shortfall."""
    have = fresh_host(node_type, 0, -1).free
    needs = item.needs
    absent = sum(1 for name, need in needs.items() if need and not have.get(name))
    short = sum(max(0, need - have.get(name, 0)) / need for name, need in needs.items() if need)
    return absent, round(short, 9)


def _shortfall(item: Item, node_type: NodeType) -> list[str]:
    host = fresh_host(node_type, 0, -1)
    needs = item.needs
    problems = []
    for name, need in sorted(needs.items()):
        have = host.free.get(name, 0)
        if need > have:
            problems.append(f"needs {name} {need / SHARE_UNITS:g}, has {have / SHARE_UNITS:g}")
    for part in item.parts:
        for name, share in part.devices:
            shares = host.devices.get(name, [])
            if share < SHARE_UNITS and shares and max(shares) < share:
                problems.append(
                    f"{name} {share / SHARE_UNITS:g} must fit on one device "
                    f"(largest device share {max(shares) / SHARE_UNITS:g})"
                )
    return problems
