"""Demand JSON: shapes with counts, validated per accelerator family, errors with JSON paths."""

import json

import pytest

from autoscaler.demand import DemandError, combine, load_demand, parse_bundles, parse_demand
from autoscaler.planner.model import BundleDemand, PlacementGroupDemand


def errors(data) -> tuple[str, ...]:
    with pytest.raises(DemandError) as raised:
        parse_demand(data)
    return raised.value.messages


def test_identical_bundles_merge_with_summed_counts():
    demand = parse_demand(
        {
            "bundles": [
                {"CPU": 1, "GPU": 1},
                {"GPU": 1.0, "CPU": 1},
                {"resources": {"CPU": 1, "GPU": 1}, "count": 3},
                {"CPU": 2},
            ]
        }
    )
    assert demand.bundles == (
        BundleDemand({"CPU": 1.0, "GPU": 1.0}, 5),
        BundleDemand({"CPU": 2.0}, 1),
    )


def test_placement_groups_merge_and_expand_counted_bundles():
    group = {"strategy": "strict_spread", "bundles": [{"resources": {"TPU": 4}, "count": 2}]}
    demand = parse_demand({"placement_groups": [group, {**group, "count": 2}]})
    assert demand.placement_groups == (
        PlacementGroupDemand("STRICT_SPREAD", ({"TPU": 4.0}, {"TPU": 4.0}), 3),
    )


def test_tpu_quantities_are_chip_configurations():
    (message,) = errors({"bundles": [{"CPU": 1}, {"CPU": 1}, {"CPU": 1}, {"TPU": 3}]})
    assert message.startswith("bundles[3].TPU: ")
    assert parse_demand({"bundles": [{"TPU": 4}]}).bundles[0].resources == {"TPU": 4.0}


def test_gpu_fractions_are_allowed():
    assert parse_demand({"bundles": [{"GPU": 0.5}]}).bundles == (BundleDemand({"GPU": 0.5}),)


def test_neuron_cores_must_be_whole():
    (message,) = errors({"bundles": [{"neuron_cores": 1.5}]})
    assert message.startswith("bundles[0].neuron_cores: ")


def test_gpu_and_neuron_cores_cannot_be_requested_together():
    (message,) = errors({"bundles": [{"CPU": 1, "GPU": 1, "neuron_cores": 2}]})
    assert message.startswith("bundles[0]: GPU and neuron_cores cannot be requested together")
    group = {"bundles": [{"GPU": 1}, {"neuron_cores": 2, "GPU": 0.5}]}
    (message,) = errors({"placement_groups": [group]})
    assert message.startswith("placement_groups[0].bundles[1]: GPU and neuron_cores")
    # Separate bundles (a heterogeneous cluster) are fine, and a zero is not a request.
    assert len(parse_demand([{"GPU": 1}, {"neuron_cores": 2, "GPU": 0}]).bundles) == 2


@pytest.mark.parametrize(
    ("bundle", "message"),
    [
        ({"GPU": float("nan")}, "bundles[0].GPU: quantity must be a finite number, got nan"),
        ({"CPU": float("inf")}, "bundles[0].CPU: quantity must be a finite number, got inf"),
        ({"GPU": 1e308}, "bundles[0].GPU: quantity must be at most 1e+14, got 1e+308"),
        ({"CPU": 10**30}, "bundles[0].CPU: quantity must be at most 1e+14, got 1000000"),
        ({"resources": {"CPU": 1}, "count": 10**10}, "bundles[0].count: must be a positive"),
        ({"x" * 100_000: 1}, "bundles[0].xxxxxxxxxx"),
    ],
)
def test_huge_and_non_finite_numbers_are_rejected_briefly(bundle, message):
    (reported,) = errors({"bundles": [bundle]})
    assert reported.startswith(message)
    assert len(reported) < 200


@pytest.mark.parametrize(
    ("bundle", "message"),
    [
        ({"count": 3}, "bundles[0].resources: a bundle with a count needs a resource map here"),
        ({"resources": None, "count": 3}, "bundles[0].resources: a bundle with a count needs"),
        ({"resources": [1]}, "bundles[0].resources: expected a resource map, got [1]"),
    ],
)
def test_a_deleted_or_broken_resources_key_is_named(bundle, message):
    (reported,) = errors({"bundles": [bundle]})
    assert reported.startswith(message)


def test_placement_group_size_is_bounded():
    group = {"bundles": [{"resources": {"CPU": 1}, "count": 10**9}]}
    (message,) = errors({"placement_groups": [group]})
    assert message == "placement_groups[0].bundles: 1,000,000,000 bundles; at most 10,000"


def test_huge_strings_come_back_as_a_short_prefix():
    huge = "y" * 5_000_000
    for data in (
        {huge: []},
        {"placement_groups": [{"strategy": huge, "bundles": [{"CPU": 1}]}]},
        {"bundles": [{"resources": {"CPU": 1}, huge: 1}]},
    ):
        (message,) = errors(data)
        assert "(5000000 chars)" in message
        assert len(message) < 200
    with pytest.raises(DemandError) as raised:
        load_demand(huge)
    assert len(str(raised.value)) < 200


def test_accelerator_type_tokens_are_not_validated_here():
    demand = parse_demand([{"GPU": 1, "accelerator_type:B999": 0.001}])
    assert demand.bundles[0].resources["accelerator_type:B999"] == 0.001


def test_every_problem_is_reported_with_its_path():
    messages = errors(
        {
            "bundles": [
                {"GPU": -1},
                {"CPU": "two"},
                {"CPU": True},
                {"resources": {"CPU": 1}, "count": 0},
                {"resources": {"CPU": 1}, "count": 1.5},
                {"resources": {"CPU": 1}, "cuont": 2},
                {},
                "CPU",
            ],
            "placement_groups": [
                {"strategy": "SPRED", "bundles": [{"HPU": 0.5}]},
                {"strategy": "PACK", "bundles": []},
            ],
            "bundels": [],
        }
    )
    prefixes = [
        "bundels: unknown key; did you mean 'bundles'?",
        "bundles[0].GPU: quantity must not be negative",
        "bundles[1].CPU: quantity must be a number",
        "bundles[2].CPU: quantity must be a number",
        "bundles[3].count: must be a positive whole number",
        "bundles[4].count: must be a positive whole number",
        "bundles[5].cuont: unknown key; did you mean 'count'?",
        "bundles[6]: a bundle needs at least one resource",
        "bundles[7]: expected a resource map",
        "placement_groups[0].strategy: 'SPRED' is not one of",
        "placement_groups[0].bundles[0].HPU: ",
        "placement_groups[1].bundles: expected a non-empty list",
    ]
    assert len(messages) == len(prefixes)
    for prefix in prefixes:
        assert any(m.startswith(prefix) for m in messages), prefix


def test_identical_bad_bundles_are_reported_once():
    assert len(errors([{"TPU": 3}] * 1000)) == 1


def test_load_demand_reads_files_and_text(tmp_path):
    path = tmp_path / "demand.json"
    path.write_text(json.dumps({"bundles": [{"CPU": 1}]}))
    assert load_demand(path) == load_demand(str(path)) == load_demand('{"bundles": [{"CPU": 1}]}')
    with pytest.raises(DemandError, match="not valid JSON"):
        load_demand("{bundles")
    with pytest.raises(DemandError, match="cannot read"):
        load_demand(tmp_path / "missing.json")


def test_parse_bundles_takes_a_list():
    assert parse_bundles('[{"GPU": 1}, {"GPU": 1}]').bundles == (BundleDemand({"GPU": 1.0}, 2),)
    with pytest.raises(DemandError, match="expected a JSON list"):
        parse_bundles('{"GPU": 1}')


def test_combine_merges_across_demands():
    merged = combine(parse_bundles('[{"GPU": 1}]'), parse_bundles('[{"GPU": 1}, {"CPU": 1}]'))
    assert merged.bundles == (BundleDemand({"GPU": 1.0}, 2), BundleDemand({"CPU": 1.0}, 1))


def test_100k_bundles_are_counted_by_shape():
    # (How fast: benchmarks/planner.py times the whole plan process at 100,000 bundles.)
    text = json.dumps({"bundles": [{"CPU": 1, "GPU": i % 4 + 1} for i in range(100_000)]})
    demand = load_demand(text)
    assert sum(b.count for b in demand.bundles) == 100_000
    assert len(demand.bundles) == 4


def test_a_boolean_quantity_is_rejected_even_after_an_equal_number():
    with pytest.raises(DemandError) as caught:
        parse_demand({"bundles": [{"CPU": 1}, {"CPU": True}]})
    assert any("bundles[1].CPU" in message for message in caught.value.messages)
