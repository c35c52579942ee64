"""Resource demand from JSON: ``{"bundles": [...], "placement_groups": [...]}``.

A bundle is a resource map or ``{"resources": {...}, "count": N}``; a placement group is
``{"strategy": PACK|SPREAD|STRICT_PACK|STRICT_SPREAD, "bundles": [...], "count": N}``.
Identical bundles (and placement groups) merge into one shape with a summed count, and each
distinct shape is validated once, so 100,000 bundles parse in well under a second.
Quantities follow :mod:`accel.resource_rules` (finite, at most Ray's ceiling; no GPU with
neuron_cores); counts and placement-group sizes are bounded; messages quote user text briefly.
``accelerator_type:<T>`` names are left to the planner (it reports unknown ones).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from accel.family_rules import rules_for_resource
from accel.resource_rules import exclusive_conflict, name_error, quantity_error
from accel.user_input import MATCH_LIMIT, BadJsonError, brief, clip, did_you_mean, parse_json
from autoscaler.planner.model import STRATEGIES, BundleDemand, Demand, PlacementGroupDemand

MAX_MESSAGES = 20
MAX_COUNT = 10**9
"""Most copies of one bundle or placement group one demand may ask for."""
MAX_GROUP_BUNDLES = 10_000
"""Most bundles in one placement group (counted bundles expanded)."""
Shape = tuple[tuple[str, float], ...]
"""A bundle's resources as sorted (name, quantity) pairs: hashable, so shapes merge."""


class DemandError(ValueError):
    """Everything wrong with one demand, each message led by its JSON path."""

    def __init__(self, messages: Iterable[str]) -> None:
        self.messages = tuple(messages)
        lines = "\n".join(f"  {message}" for message in self.messages)
        super().__init__(f"invalid demand:\n{lines}")


class _Problems:
    """Collects messages, each distinct one once, up to MAX_MESSAGES."""

    def __init__(self) -> None:
        self.messages: list[str] = []
        self.dropped = 0

    def add(self, path: str, message: str) -> None:
        if len(self.messages) < MAX_MESSAGES:
            self.messages.append(f"{path}: {message}")
        else:
            self.dropped += 1

    def raise_any(self) -> None:
        if self.dropped:
            self.messages.append(f"... and {self.dropped} more problems")
        if self.messages:
            raise DemandError(self.messages)


def load_demand(path_or_text: str | Path) -> Demand:
    """Demand from a JSON file, or from JSON text (anything starting with ``{`` or ``[``)."""
    text = str(path_or_text)
    if isinstance(path_or_text, Path) or not text.lstrip().startswith(("{", "[")):
        try:
            text = Path(path_or_text).read_text()
        except OSError as err:
            message = f"{clip(text)}: cannot read: {err.strerror or err}"
            raise DemandError([message]) from None
    return parse_demand(_json(text))


def parse_bundles(text: str) -> Demand:
    """Demand from a JSON list of bundles (``--bundles``)."""
    data = _json(text)
    if not isinstance(data, list):
        raise DemandError(["bundles: expected a JSON list of bundles"])
    return parse_demand({"bundles": data})


def parse_demand(data: Any) -> Demand:
    """Demand from parsed JSON (a list is taken as bundles); raises :class:`DemandError`."""
    if isinstance(data, list):
        data = {"bundles": data}
    problems = _Problems()
    if not isinstance(data, dict):
        problems.add("demand", "expected an object with bundles and placement_groups")
        problems.raise_any()
    for key in data.keys() - {"bundles", "placement_groups"}:
        hint = _hint(key, ["bundles", "placement_groups"])
        problems.add(clip(key), f"unknown key{hint}")
    valid: dict[tuple, Shape] = {}
    bundles: dict[Shape, int] = {}
    for shape, count in _bundles(data.get("bundles", []), "bundles", problems, valid):
        bundles[shape] = bundles.get(shape, 0) + count
    groups: dict[tuple[str, tuple[Shape, ...]], int] = {}
    for index, group in enumerate(_list(data.get("placement_groups", []), "placement_groups")):
        parsed = _placement_group(group, f"placement_groups[{index}]", problems, valid)
        if parsed is not None:
            groups[parsed[0]] = groups.get(parsed[0], 0) + parsed[1]
    problems.raise_any()
    return Demand(
        bundles=tuple(BundleDemand(dict(shape), count) for shape, count in bundles.items()),
        placement_groups=tuple(
            PlacementGroupDemand(strategy, tuple(dict(s) for s in shapes), count)
            for (strategy, shapes), count in groups.items()
        ),
    )


def combine(*demands: Demand) -> Demand:
    """One demand holding all of ``demands``, identical shapes merged."""
    bundles: dict[Shape, int] = {}
    groups: dict[tuple[str, tuple[Shape, ...]], int] = {}
    for demand in demands:
        for bundle in demand.bundles:
            shape = _shape_of(bundle.resources)
            bundles[shape] = bundles.get(shape, 0) + bundle.count
        for group in demand.placement_groups:
            key = (group.strategy, tuple(_shape_of(b) for b in group.bundles))
            groups[key] = groups.get(key, 0) + group.count
    return Demand(
        tuple(BundleDemand(dict(shape), count) for shape, count in bundles.items()),
        tuple(
            PlacementGroupDemand(strategy, tuple(dict(s) for s in shapes), count)
            for (strategy, shapes), count in groups.items()
        ),
    )


def _hint(text: str, choices: Iterable[str]) -> str:
    """A did-you-mean hint; none for text too long to be a misspelling."""
    return did_you_mean(text, choices) if len(text) <= MATCH_LIMIT else ""


def _json(text: str) -> Any:
    try:
        return parse_json(text)
    except BadJsonError as err:
        raise DemandError([str(err)]) from None


def _list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise DemandError([f"{path}: expected a list"])
    return value


def _shape_of(resources: Any) -> Shape:
    return tuple(sorted(resources.items()))


def _check_key(resources: dict) -> tuple:
    """The shape plus each quantity's type, so ``True`` is checked apart from ``1``."""
    return tuple(sorted((name, type(q).__name__, q) for name, q in resources.items()))


def _bundles(
    items: Any, path: str, problems: _Problems, valid: dict[tuple, Shape]
) -> Iterable[tuple[Shape, int]]:
    """(shape, count) of each valid bundle. Each distinct shape is checked once: a valid one
    once per demand (``valid``, shared by its lists), a wrong one reported once per list."""
    wrong: set[tuple] = set()
    for index, item in enumerate(_list(items, path)):
        where = f"{path}[{index}]"
        resources, count = _unwrap(item, where, problems)
        if resources is None:
            continue
        try:
            key = _check_key(resources)
            shape = valid.get(key)
        except TypeError:  # an unhashable quantity: the check below reports it
            key, shape = (), None
        if shape is None and key not in wrong:
            shape = _check_resources(resources, where, problems)
            if shape is None:
                wrong.add(key)
            else:
                valid[key] = shape
        if shape is not None and count is not None:
            yield shape, count


def _unwrap(item: Any, path: str, problems: _Problems) -> tuple[dict | None, int | None]:
    """A bundle's (resources, count): a plain resource map counts once."""
    if not isinstance(item, dict):
        problems.add(path, "expected a resource map or {resources, count}")
        return None, None
    if "count" in item and not isinstance(item.get("resources"), dict):
        problems.add(f"{path}.resources", "a bundle with a count needs a resource map here")
        return None, None
    if "resources" not in item:
        return item, 1
    if not isinstance(item["resources"], dict):
        got = brief(item["resources"])
        problems.add(f"{path}.resources", f"expected a resource map, got {got}")
        return None, None
    for key in item.keys() - {"resources", "count"}:
        hint = _hint(key, ["resources", "count"])
        problems.add(f"{path}.{clip(key)}", f"unknown key{hint}")
    return item["resources"], _count(item.get("count", 1), f"{path}.count", problems)


def _count(value: Any, path: str, problems: _Problems) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COUNT:
        problems.add(
            path, f"must be a positive whole number (at most {MAX_COUNT:,}), got {brief(value)}"
        )
        return None
    return value


def _check_resources(resources: dict, path: str, problems: _Problems) -> Shape | None:
    """The bundle's shape without zero quantities, or None after reporting its problems."""
    ok = True
    for name, quantity in resources.items():
        error = name_error(name) or _quantity_error(name, quantity)
        if error:
            problems.add(f"{path}.{clip(name)}", error)
            ok = False
    conflict = exclusive_conflict(resources) if ok else None
    if conflict:
        problems.add(path, conflict)
    shape = tuple(sorted((n, float(q)) for n, q in resources.items() if ok and q != 0))
    if ok and not shape:
        problems.add(path, "a bundle needs at least one resource above zero")
    return shape if ok and shape and not conflict else None


def _quantity_error(name: str, quantity: Any) -> str | None:
    error = quantity_error(quantity)
    if error:
        return f"quantity {error}"
    families = rules_for_resource(name)
    return families[0].validate_quantity(quantity) if families else None


def _placement_group(
    group: Any, path: str, problems: _Problems, valid: dict[tuple, Shape]
) -> tuple[tuple[str, tuple[Shape, ...]], int] | None:
    """((strategy, bundle shapes), count); None where nothing can be built (reported)."""
    if not isinstance(group, dict):
        problems.add(path, "expected {strategy, bundles, count}")
        return None
    for key in group.keys() - {"strategy", "bundles", "count"}:
        hint = _hint(key, ["strategy", "bundles", "count"])
        problems.add(f"{path}.{clip(key)}", f"unknown key{hint}")
    strategy = group.get("strategy", "PACK")
    strategy = strategy.upper() if isinstance(strategy, str) else strategy
    if strategy not in STRATEGIES:
        problems.add(
            f"{path}.strategy",
            f"{brief(group['strategy'])} is not one of {', '.join(STRATEGIES)}"
            f"{_hint(str(strategy), STRATEGIES)}",
        )
    count = _count(group.get("count", 1), f"{path}.count", problems)
    bundles = group.get("bundles")
    if not isinstance(bundles, list) or not bundles:
        problems.add(f"{path}.bundles", "expected a non-empty list of bundles")
        return None
    counted = list(_bundles(bundles, f"{path}.bundles", problems, valid))
    size = sum(n for _, n in counted)
    if size > MAX_GROUP_BUNDLES:
        problems.add(f"{path}.bundles", f"{size:,} bundles; at most {MAX_GROUP_BUNDLES:,}")
        return None
    shapes = tuple(shape for shape, n in counted for _ in range(n))
    return ((strategy, shapes), count) if count is not None else None
