"""Node reports survive the trip through EC2 tags and GCP labels."""

import re

import pytest

from autoscaler.report import NodeReport, decode, encode
from providers import cloud_for

GCP_VALUE_LIMIT = cloud_for("gcp").tag_value_limit
EC2_VALUE_LIMIT = cloud_for("aws").tag_value_limit

REPORT = NodeReport(
    resources={
        "CPU": 96,
        "memory": 1.2e12,
        "GPU": 8,
        "accelerator_type:A100": 1,
        "accelerator_type:A100-80G": 1,
    },
    devices={"GPU": 8},
    free={"CPU": 90, "GPU": 6.5},
    device_free={"GPU": (1.0, 1.0, 0.5, 0.0, 1.0, 1.0, 1.0, 1.0)},
    idle_since=None,
    reported_at=1_700_000_100.0,
    agent="0.1.0",
)


@pytest.mark.parametrize("limit", [EC2_VALUE_LIMIT, GCP_VALUE_LIMIT])
def test_round_trip_within_the_value_limit(limit):
    tags = encode(REPORT, limit)
    assert all(len(value) <= limit for value in tags.values())
    assert decode(tags) == REPORT


def test_label_safe_for_gcp():
    for key, value in encode(REPORT, GCP_VALUE_LIMIT).items():
        assert re.fullmatch(r"[a-z][a-z0-9_-]{0,62}", key)
        assert re.fullmatch(r"[a-z0-9_-]{0,63}", value)


def test_each_host_of_a_slice_reports_apart():
    tags = {**encode(REPORT, GCP_VALUE_LIMIT, host=0)}
    assert decode(tags, host=1) is None
    tags.update(encode(REPORT, GCP_VALUE_LIMIT, host=1))
    assert decode(tags, host=1) == REPORT


@pytest.mark.parametrize("damage", ["drop_chunk", "corrupt", "version"])
def test_partial_or_corrupt_reports_read_as_absent(damage):
    tags = encode(REPORT, GCP_VALUE_LIMIT)
    if damage == "drop_chunk":
        del tags["accel-r0-1"]
    elif damage == "corrupt":
        tags["accel-r0-0"] = "a" + tags["accel-r0-0"][1:]
    else:
        tags["accel-r0-v"] = "99"
    assert decode(tags) is None
