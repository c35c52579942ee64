"""What we report to Ray, as Ray's own AutoscalingState message."""

from __future__ import annotations

import pytest

from autoscaler.ray_cluster.report import (
    FailedLaunch,
    Infeasible,
    PendingLaunch,
    PendingNode,
    ScalingReport,
    autoscaling_state,
)

pb = pytest.importorskip("ray.core.generated.autoscaler_pb2")


def test_launches_boots_failures_and_infeasible_demand_with_our_reason():
    report = ScalingReport(
        launching=(PendingLaunch("a100", "p4d.24xlarge", 2, 1700000000.5),),
        booting=(PendingNode("i-1", "a100", "p4d.24xlarge", "10.0.0.7", "allocated"),),
        failed=(FailedLaunch("trn", "trn1.2xlarge", 1, "InsufficientInstanceCapacity", 17.0),),
        infeasible=(Infeasible({"GPU": 64.0}, 3, "no node type can host it"),),
    )
    state = pb.AutoscalingState.FromString(
        autoscaling_state(report, pb, seen=4, version=9).SerializeToString()
    )
    assert (state.last_seen_cluster_resource_state_version, state.autoscaler_state_version) == (
        4,
        9,
    )
    (launch,) = state.pending_instance_requests
    assert (launch.ray_node_type_name, launch.instance_type_name, launch.count) == (
        "a100",
        "p4d.24xlarge",
        2,
    )
    (booting,) = state.pending_instances
    assert (booting.instance_id, booting.ip_address, booting.details) == (
        "i-1",
        "10.0.0.7",
        "allocated",
    )
    (failed,) = state.failed_instance_requests
    assert failed.reason == "InsufficientInstanceCapacity" and failed.ray_node_type_name == "trn"
    (bundle,) = state.infeasible_resource_requests
    assert dict(bundle.resources_bundle) == {"GPU": 64.0}
    (gang,) = state.infeasible_gang_resource_requests
    assert gang.details == "3 x: no node type can host it"
