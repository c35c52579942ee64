"""`status` names Ray's pending demand, what is launching for it, what can never be served
and why, and requests waiting for capacity (read-only, against the fake Cloud TPU server)."""

from __future__ import annotations

import pytest

from autoscaler.cluster import Cluster
from autoscaler.config import parse_cluster_config
from autoscaler.monitor import InfeasibleWatch
from autoscaler.planner import BundleDemand, Demand
from autoscaler.ray_cluster.client import RayUnavailableError
from autoscaler.ray_cluster.state import RayState
from autoscaler.reconciler import Reconciler
from autoscaler.state import StateStore
from autoscaler.status_view import build_status
from providers.gcp.provider import GcpNodeProvider
from providers.local.gcp.tpu import TpuCloud, TpuEmulator
from tests.fakes.clock import Clock
from tests.fakes.clusters import gcp_settings

QUEUED = {"acceleratorType": "v4-8", "queuedResource": {"validUntilDuration": "3600s"}}


class StubRay:
    """Ray's GCS as the reconciler reads it: pending demand, no nodes."""

    address = "10.0.0.1:6379"

    def __init__(self, demand: Demand | None) -> None:
        self.demand = demand

    def read(self) -> RayState:
        if self.demand is None:
            raise RayUnavailableError("Ray at 10.0.0.1:6379 is unreachable")
        return RayState(nodes=(), demand=self.demand, constraints=Demand())

    def report(self, report) -> None:
        pass


@pytest.fixture
def cloud() -> TpuCloud:
    return TpuCloud()


@pytest.fixture
def cluster(cloud, tmp_path):
    with TpuEmulator(cloud=cloud) as server:
        config = parse_cluster_config(
            {
                "cluster_name": "st",
                "max_workers": 10,
                "provider": gcp_settings(server.url),
                "available_node_types": {
                    "tpu": {"node_config": QUEUED, "cost_per_hour": 12.0, "max_workers": 4}
                },
            },
            "test",
        )
        provider = GcpNodeProvider(config.provider_settings(), "st")
        opened = Cluster(config, provider, StateStore(tmp_path / "state.db"), Clock())
        yield opened
        opened.close()


def test_status_shows_rays_demand_what_launches_and_what_never_can(cluster, cloud):
    cloud.hold("provision")
    cluster.ray = StubRay(
        Demand((BundleDemand({"TPU": 4}, 2), BundleDemand({"GPU": 16, "accelerator_type:B300": 1})))
    )
    Reconciler(
        cluster.config, cluster.provider, cluster.store, cluster.clock, ray=cluster.ray
    ).tick()

    data = build_status(cluster)

    assert data["ray"]["address"] == StubRay.address
    assert {"resources": {"TPU": 4.0}, "count": 2} in data["ray"]["pending"]
    (never,) = data["infeasible"]
    assert never["resources"]["GPU"] == 16 and never["reason"]
    assert "closest_node_type" in never
    assert [(e["node_type"], e["state"]) for e in data["launching"]] == [("tpu", "queued")]
    assert sum(e["count"] for e in data["launching"]) == 2
    queued = data["nodes"][0]
    assert queued["state"] == "queued" and queued["waiting_for_capacity"]["until"]
    assert "waiting for capacity since" in queued["reason"] and "until" in queued["reason"]


def test_status_without_a_readable_ray_still_shows_the_cloud(cluster):
    cluster.ray = StubRay(None)
    data = build_status(cluster)
    assert "unreachable" in data["ray"]["error"]
    assert data["nodes"] == []


def test_the_monitor_says_each_infeasible_reason_once_per_change(cluster):
    cluster.ray = StubRay(Demand((BundleDemand({"GPU": 16}),)))
    reconciler = Reconciler(
        cluster.config, cluster.provider, cluster.store, cluster.clock, ray=cluster.ray
    )
    watch = InfeasibleWatch()
    (line,) = watch.update(reconciler.tick().plan)
    assert line.startswith("infeasible: {GPU: 16}: ")
    assert watch.update(reconciler.tick().plan) == []
    cluster.ray.demand = Demand()
    assert watch.update(reconciler.tick().plan) == ["feasible again: {GPU: 16}"]
