"""Packing one unit: the fast paths count and place exactly what fitting copy by copy does."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest

from autoscaler.planner.columns import _price, _ratio_bound, _worth
from autoscaler.planner.items import build_items, fresh_host
from autoscaler.planner.knapsack import best_unit
from autoscaler.planner.model import (
    STRICT_PACK,
    STRICT_SPREAD,
    BundleDemand,
    Demand,
    NodeType,
    PlacementGroupDemand,
)
from autoscaler.planner.packing import Kind, Pattern, fit, pack, pack_rows, put, unit_vectors

GIB = 1024**3
GPU4 = NodeType("gpu4", {"CPU": 32, "memory": 128 * GIB, "GPU": 4}, 3.0)


def copy_by_copy(host, item, limit: int) -> int:
    """The reference: copies while the whole group still fits, each placed in turn."""
    trial = host.copy(host.unit)
    copies = 0
    while copies < limit and trial.fits_all(item.parts):
        for part in item.parts:
            trial.place(part, 1)
        copies += 1
    return copies


def strict_pack_items():
    groups = (
        PlacementGroupDemand(STRICT_PACK, ({"CPU": 1, "GPU": 0.5}, {"CPU": 2}), 1),
        PlacementGroupDemand(STRICT_PACK, ({"CPU": 1, "GPU": 1}, {"CPU": 1}, {"CPU": 4}), 1),
        PlacementGroupDemand(STRICT_PACK, ({"CPU": 1, "GPU": 0.25}, {"GPU": 0.5}), 1),
        PlacementGroupDemand(STRICT_PACK, ({"CPU": 0.5}, {"CPU": 1, "memory": 8 * GIB}), 1),
    )
    return build_items(Demand((), groups))


@pytest.mark.parametrize("seed", range(20))
def test_a_strict_pack_group_fits_as_often_as_placing_it_copy_by_copy(seed):
    rng = random.Random(seed)
    items = strict_pack_items()
    host = fresh_host(GPU4, 0, -1)
    # Devices partly taken (fractions left on each), CPU partly used.
    host.devices["GPU"] = [rng.choice([0, 2500, 5000, 7500, 10000]) for _ in range(4)]
    host.free["GPU"] = sum(host.devices["GPU"])
    host.free["CPU"] = rng.randint(0, 32) * 10000
    for item in items:
        limit = rng.randint(1, 40)
        assert fit(host, item, limit) == copy_by_copy(host, item, limit)
        copies = fit(host, item, limit)
        placed = host.copy(host.unit)
        put(placed, item, copies)
        assert all(q >= 0 for q in placed.free.values())
        assert all(s >= 0 for shares in placed.devices.values() for s in shares)


def fit_each_item_on_each_host(kind, order, caps):
    """The reference: each item in turn, on each host in turn, as many copies as fit."""
    hosts = [host.copy(host.unit) for host in kind.hosts]
    content = [[] for _ in hosts]
    for item in order:
        left = caps[item.index]
        for position, host in enumerate(hosts):
            copies = fit(host, item, left)
            if copies:
                put(host, item, copies)
                content[position].append((item.index, copies))
                left -= copies
    if not any(content):
        return None
    return Pattern(kind.index, tuple(tuple(c) for c in content))


@pytest.mark.parametrize("hosts", [1, 4])
@pytest.mark.parametrize("seed", range(10))
def test_packing_matches_fitting_each_item_on_each_host(seed, hosts):
    # One host, or a multi-host slice whose first host carries head resources.
    rng = random.Random(seed)
    shapes = [
        {"CPU": rng.choice([0.5, 1, 2, 4]), "memory": rng.choice([1, 4, 16]) * GIB}
        for _ in range(8)
    ] + [{"CPU": 1, "GPU": rng.choice([0.25, 0.5, 1, 2])} for _ in range(4)]
    shapes.append({"CPU": 1, "slice-head": 1})
    bundles = tuple(BundleDemand(s, rng.randint(1, 9)) for s in shapes)
    groups = (
        PlacementGroupDemand(STRICT_SPREAD, ({"CPU": 2, "GPU": 1}, {"CPU": 4}), 3),
        PlacementGroupDemand(STRICT_PACK, ({"CPU": 1, "GPU": 0.5}, {"CPU": 2}), 2),
    )
    items = build_items(Demand(bundles, groups))
    node_type = replace(GPU4, head_resources={"slice-head": 1})
    slice_hosts = tuple(fresh_host(node_type, h, -1) for h in range(hosts))
    kind = Kind(0, "gpu4", GPU4.price, None, slice_hosts, True, items=items)
    caps = np.array([rng.randint(0, 40) for _ in items], np.int64)  # 0: nothing left of it
    for _ in range(10):
        order = np.array(rng.sample(range(len(items)), len(items)), np.int64)
        ordered = [items[r] for r in order]
        by_index = {items[r].index: int(caps[r]) for r in order}
        expected = fit_each_item_on_each_host(kind, ordered, by_index)
        assert pack_rows(kind, order, caps) == expected
        assert pack(kind, ordered, by_index) == expected
        # Pricing meets the same order again with other caps: a packing is remembered for
        # its order and caps together, never for the order alone.
        fewer = np.maximum(caps // 3, 1)
        expected_fewer = fit_each_item_on_each_host(
            kind, ordered, {items[r].index: int(fewer[r]) for r in order}
        )
        assert pack_rows(kind, order, fewer) == expected_fewer
        assert pack_rows(kind, order, caps) == expected


@pytest.mark.parametrize("hosts", [1, 4])
@pytest.mark.parametrize("seed", range(6))
def test_pricing_skips_a_kind_only_where_no_unit_is_worth_more_than_asked(seed, hosts):
    # The best unit (exact knapsack, which holds no item beyond its cap on a multi-host unit
    # either) is never worth more than the ratio bound, so a kind the bound shows worthless
    # has no improving pattern for pricing to miss.
    rng = random.Random(seed)
    shapes = [
        {"CPU": rng.choice([0.5, 1, 2, 4, 8]), "memory": rng.choice([1, 4, 16, 64]) * GIB}
        for _ in range(8)
    ] + [{"CPU": rng.choice([1, 4]), "GPU": rng.choice([0.25, 0.5, 1, 2])} for _ in range(4)]
    groups = (PlacementGroupDemand(STRICT_PACK, ({"CPU": 1, "GPU": 0.5}, {"CPU": 2}), 2),)
    items = build_items(Demand(tuple(BundleDemand(s, 1) for s in shapes), groups))
    slice_hosts = tuple(fresh_host(GPU4, h, -1) for h in range(hosts))
    kind = Kind(0, "gpu4", GPU4.price, None, slice_hosts, True, items=items)
    size = 1 + max(item.index for item in items)
    vectors = unit_vectors(kind)
    for _ in range(5):
        duals = np.zeros(size)
        caps = np.zeros(size, np.int64)
        for item in items:
            duals[item.index] = rng.choice([0.0, rng.uniform(0.01, 1.0)])
            caps[item.index] = rng.randint(0, 30)
        values = duals[vectors.indices].tolist()
        valued = [row for row, value in enumerate(values) if value > 0]
        bound = _ratio_bound(vectors, values, valued, caps[vectors.indices].tolist())
        by_index = {item.index: float(duals[item.index]) for item in items}
        cap_of = {item.index: int(caps[item.index]) for item in items}
        best = best_unit(kind.hosts, items, by_index, cap_of, False, fit)
        if best.contents is not None:
            best_pattern = Pattern(0, best.contents)
            assert all(n <= cap_of[i] for i, n in best_pattern.totals().items())
            assert _worth(best_pattern, by_index) <= bound
        assert _price(kind, duals, caps, worth_more=bound) == []
        for pattern in _price(kind, duals, caps):
            assert _worth(pattern, by_index) <= bound


def best_fit_one_by_one(shares: list[int], share: int, copies: int) -> list[int]:
    """The reference: each copy of a fraction goes to the device with the least room that
    holds it (lowest index among equals)."""
    chosen = []
    for _ in range(copies):
        _, device = min((free, d) for d, free in enumerate(shares) if free >= share)
        shares[device] -= share
        chosen.append(device)
    return chosen


@pytest.mark.parametrize("seed", range(20))
def test_placing_copies_at_once_takes_the_devices_best_fit_would_copy_by_copy(seed):
    rng = random.Random(seed)
    gpu = rng.choice([0.25, 0.3, 0.5])
    item = build_items(Demand((BundleDemand({"CPU": 1, "GPU": gpu}),)))[0]
    (part,) = item.parts
    host = fresh_host(GPU4, 0, -1)
    host.devices["GPU"] = [rng.choice([0, 2500, 3000, 5000, 7500, 10000]) for _ in range(4)]
    host.free["GPU"] = sum(host.devices["GPU"])
    reference = list(host.devices["GPU"])
    copies = host.fit_count(part, 99)
    one_by_one = host.copy(host.unit)
    grants = [one_by_one.grant(part) for _ in range(copies)]
    host.place(part, copies)
    expected = best_fit_one_by_one(reference, round(gpu * 10000), copies)
    assert [device for ((_, device, _),) in grants] == expected
    assert host.devices["GPU"] == one_by_one.devices["GPU"] == reference


def test_a_gangs_positions_of_one_shape_are_one_item_and_like_gangs_one_gang():
    a, b = {"CPU": 1}, {"CPU": 2, "GPU": 1}
    groups = (
        PlacementGroupDemand(STRICT_SPREAD, (a, b, a), 2),
        PlacementGroupDemand(STRICT_SPREAD, (b, a, a), 3),  # the same shapes, another order
        PlacementGroupDemand(STRICT_SPREAD, (a, b), 1),  # other shapes: a gang of its own
    )
    items = build_items(Demand((), groups))
    gangs = {}
    for item in items:
        gangs.setdefault(item.spread_group, []).append(item)
    assert sorted(len(members) for members in gangs.values()) == [2, 2]
    (merged,) = [m for m in gangs.values() if sum(i.slots for i in m) == 3]
    of_a = next(i for i in merged if i.resources == (a,))
    assert (of_a.slots, of_a.count, of_a.gang_copies) == (2, 10, 5)
    assert [source for source, _ in of_a.sources] == [
        ("placement_groups", 0, 0),
        ("placement_groups", 0, 2),
        ("placement_groups", 1, 1),
        ("placement_groups", 1, 2),
    ]
    host = fresh_host(GPU4, 0, -1)
    assert fit(host, of_a, 99) == 5  # a host holds one bundle of each copy at most
    put(host, of_a, 3)
    of_b = next(i for i in merged if i.resources == (b,))
    assert fit(host, of_b, 99) == 2  # ... of any of the gang's shapes
