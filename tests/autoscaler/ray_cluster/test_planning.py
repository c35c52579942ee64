"""Planning Ray's view: nodes Ray reports are capacity (what is free on them now), pending
work is placed on them first, and ``request_resources`` constraints are held against node
totals, used or not, before the pending work is planned."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autoscaler.cluster import open_cluster
from autoscaler.config import load_cluster_config
from autoscaler.planner import BundleDemand, Demand
from autoscaler.ray_cluster.state import RayNode, RayState
from autoscaler.reconciler import Observation
from providers.local.gcp.tpu import TpuEmulator
from tests.fakes.clusters import TPU_NODE_CONFIG, write_cluster

TPU = {"TPU": 4.0}
BUSY = RayNode("ab" * 28, "", "", {"CPU": 240.0, **TPU}, {"CPU": 240.0}, "RUNNING", 0.0)
"""A Ray node that is not ours (started by hand), its TPUs all in use."""


@pytest.fixture
def reconciler(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOSCALE_STATE_DIR", str(tmp_path / "state"))
    types = {"tpu_v4_8": {"node_config": TPU_NODE_CONFIG, "cost_per_hour": 12.88}}
    with TpuEmulator() as server:
        path = write_cluster(tmp_path, server.url, available_node_types=types, head_node_type=None)
        cluster = open_cluster(load_cluster_config(path))
        yield cluster.reconciler()
        cluster.close()


def _plan(reconciler, demand=(), constraints=(), nodes=(BUSY,)):
    ray = RayState(
        nodes=tuple(nodes),
        demand=Demand(tuple(BundleDemand(TPU, n) for n in demand)),
        constraints=Demand(tuple(BundleDemand(TPU, n) for n in constraints)),
    )
    return reconciler.current_plan(Observation(views=[], ray=ray)).launch_counts()


def test_pending_work_goes_where_ray_has_room_first(reconciler):
    idle = RayNode("cd" * 28, "", "", TPU, TPU, "IDLE", 30.0)
    assert _plan(reconciler, demand=[1], nodes=[BUSY, idle]) == {}
    assert _plan(reconciler, demand=[2], nodes=[BUSY, idle]) == {"tpu_v4_8": 1}


def test_a_constraint_counts_node_totals_even_when_they_are_busy(reconciler):
    assert _plan(reconciler, constraints=[1]) == {}
    assert _plan(reconciler, constraints=[2]) == {"tpu_v4_8": 1}


def test_pending_work_uses_what_a_constraint_launches(reconciler):
    assert _plan(reconciler, demand=[1], constraints=[2]) == {"tpu_v4_8": 1}
    assert _plan(reconciler, demand=[2], constraints=[2]) == {"tpu_v4_8": 2}


def test_objects_stored_between_rounds_do_not_plan_again(reconciler):
    # Ray's free object store moves with every object put or freed; no bundle asks for it.
    idle = RayNode("cd" * 28, "", "", TPU, TPU, "IDLE", 30.0)
    for stored in (7.5e9, 7.4e9, 7.45e9):
        busy = replace(
            BUSY,
            total={**BUSY.total, "object_store_memory": 8e9},
            available={**BUSY.available, "object_store_memory": stored},
        )
        assert _plan(reconciler, demand=[2], nodes=[busy, idle]) == {"tpu_v4_8": 1}
    assert (reconciler.memo.made, reconciler.memo.reused) == (1, 2)
