"""Ray that cannot be asked: the round fails with an event, nothing is launched from stale
demand, nothing is retired, and the loop goes on."""

from __future__ import annotations

import socket

import pytest

from autoscaler.cluster import open_cluster
from autoscaler.config import load_cluster_config
from autoscaler.monitor import run_rounds
from autoscaler.ray_cluster.client import RayCluster, RayUnavailableError
from providers.local.gcp.tpu import TpuEmulator
from tests.fakes.clusters import write_cluster

pytest.importorskip("ray")


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOSCALE_STATE_DIR", str(tmp_path / "state"))
    with TpuEmulator() as server:
        opened = open_cluster(load_cluster_config(write_cluster(tmp_path, server.url)))
        yield opened
        opened.close()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_unreachable_ray_fails_each_round_without_acting_and_the_loop_goes_on(cluster):
    cluster.store.set_demand({"bundles": [{"TPU": 4}]}, cluster.clock())
    cluster.ray = RayCluster(f"127.0.0.1:{_closed_port()}")
    reconciler = cluster.reconciler()
    rounds = []
    run_rounds(reconciler, 0, lambda result, error: rounds.append((result, error)), rounds=2)
    assert [result for result, _ in rounds] == [None, None]
    assert all(isinstance(error, RayUnavailableError) for _, error in rounds)
    assert "is unreachable" in str(rounds[0][1])
    assert cluster.provider.nodes() == []  # not even min_workers: Ray could not be asked
    events = [e for e in cluster.store.events() if e.kind == "ray-unavailable"]
    assert len(events) == 2 and "nothing launched or retired" in events[0].message
