"""The declared lifecycle: transitions, timeouts, cloud states, records."""

from __future__ import annotations

import math

import pytest

from autoscaler.config import parse_cluster_config
from autoscaler.lifecycle import (
    ALLOCATED,
    QUEUED,
    REQUESTED,
    RUNNING,
    STATES,
    STOPPED,
    TERMINATING,
    TRANSITIONS,
    WAITING_FOR_REPORT,
    NodeRecord,
    observed_state,
    reason_for,
    timeout_s,
)
from autoscaler.state import StateStore
from providers.base import (
    CLOUD_PENDING,
    CLOUD_RUNNING,
    CLOUD_STOPPED,
    CLOUD_STOPPING,
    CLOUD_TERMINATING,
    ProviderNode,
)


def node(state: str, **fields) -> ProviderNode:
    return ProviderNode("n-1", state, {}, "v4-8", **fields)


def test_every_state_can_end_in_terminating_and_terminating_is_final():
    assert set(TRANSITIONS) == set(STATES)
    for state in STATES:
        assert state == TERMINATING or TERMINATING in TRANSITIONS[state]
    assert TRANSITIONS[TERMINATING] == frozenset()
    assert TRANSITIONS[STOPPED] == frozenset({TERMINATING})


def test_a_record_moves_only_along_declared_transitions_and_keeps_its_history():
    record = NodeRecord("n-1", "tpu", "worker", REQUESTED, 0.0)
    record = record.moved(ALLOCATED, 1.0, "the cloud is starting it")
    record = record.moved(RUNNING, 2.0, "reported")
    record = record.moved(STOPPED, 3.0, "preempted")
    with pytest.raises(ValueError, match="stopped -> running"):
        record.moved(RUNNING, 4.0, "back?")
    record = record.moved(TERMINATING, 4.0, "releasing it now")
    assert [s for s, _, _ in record.history] == [ALLOCATED, RUNNING, STOPPED, TERMINATING]
    assert (record.state, record.since, record.reason) == (TERMINATING, 4.0, "releasing it now")


def test_records_survive_the_state_file(tmp_path):
    store = StateStore(tmp_path / "state.db")
    record = NodeRecord("n-1", "tpu", "worker", REQUESTED, 0.0, offering="v4-8/z/spot")
    store.save_node_records([record.moved(QUEUED, 5.0, "waiting for capacity")])
    (loaded,) = StateStore(tmp_path / "state.db").node_records().values()
    assert loaded.state == QUEUED and loaded.offering == "v4-8/z/spot"
    assert loaded.history == ((QUEUED, 5.0, "waiting for capacity"),)


@pytest.mark.parametrize(
    ("cloud", "up", "expected"),
    [
        (CLOUD_PENDING, False, ALLOCATED),
        (CLOUD_RUNNING, False, WAITING_FOR_REPORT),
        (CLOUD_RUNNING, True, RUNNING),
        (CLOUD_STOPPING, False, STOPPED),
        (CLOUD_STOPPED, True, STOPPED),
        (CLOUD_TERMINATING, False, TERMINATING),
    ],
)
def test_cloud_states_map_onto_the_lifecycle(cloud, up, expected):
    assert observed_state(node(cloud), up) == expected


def test_a_request_waiting_for_capacity_is_queued_and_says_so():
    waiting = node(CLOUD_PENDING, waiting_for_capacity=True, status_message="waiting for TPUs")
    assert observed_state(waiting, False) == QUEUED
    assert reason_for(waiting, QUEUED) == "waiting for TPUs"


def test_a_stopped_reason_carries_the_clouds_words():
    preempted = node(CLOUD_STOPPED, cloud_status="PREEMPTED", status_message="spot reclaimed")
    assert reason_for(preempted, STOPPED) == "the cloud stopped it (PREEMPTED): spot reclaimed"


def test_timeouts_stop_at_nothing_for_stopped_and_wait_forever_for_queued():
    for accelerated in (True, False):
        assert timeout_s(STOPPED, accelerated) == 0
        assert timeout_s(QUEUED, accelerated) == math.inf
        assert timeout_s(RUNNING, accelerated) == math.inf
    assert timeout_s(ALLOCATED, True) > timeout_s(ALLOCATED, False)
    assert timeout_s(ALLOCATED, True, {ALLOCATED: 42}) == 42


def test_a_node_type_overrides_its_timeouts_in_the_yaml():
    config = parse_cluster_config(
        {
            "cluster_name": "c",
            "provider": {"type": "gcp", "project_id": "p", "availability_zone": "us-central2-b"},
            "available_node_types": {
                "tpu": {
                    "node_config": {"acceleratorType": "v4-8"},
                    "lifecycle_timeouts_s": {"allocated": 3600, "queued": 7200},
                }
            },
        },
        "test",
    )
    timeouts = config.spec.available_node_types["tpu"].lifecycle_timeouts_s
    assert timeouts == {"allocated": 3600, "queued": 7200}


def test_an_unknown_lifecycle_state_in_the_yaml_is_refused():
    from autoscaler.config.errors import ConfigError

    with pytest.raises(ConfigError, match="lifecycle_timeouts_s"):
        parse_cluster_config(
            {
                "cluster_name": "c",
                "provider": {"type": "gcp", "project_id": "p", "availability_zone": "a-b-c"},
                "available_node_types": {
                    "tpu": {
                        "node_config": {"acceleratorType": "v4-8"},
                        "lifecycle_timeouts_s": {"booting": 60},
                    }
                },
            },
            "test",
        )
