"""The node-wide ledger: validation, fractions across leases, dead-process reclaim."""

import os
import subprocess
import sys

import pytest

from accel.allocation import AllocationError
from accel.ledger import NodeLedger, ProcessRef, ResourcesUnavailableError
from accel.node import DevicePool, NodeInventory


def inventory(gpus: int = 2, family: str = "nvidia") -> NodeInventory:
    ids = tuple(str(i) for i in range(gpus))
    return NodeInventory(
        resources={"CPU": 8.0, "memory": 64e9, "GPU": float(gpus), "accelerator_type:T4": 1.0},
        pools={"GPU": DevicePool("GPU", family, ids, physical_count=gpus)},
    )


@pytest.fixture
def me() -> ProcessRef:
    return ProcessRef.of(os.getpid())


def test_leases_pack_fractions_across_processes(tmp_path, me):
    ledger = NodeLedger(tmp_path, inventory(gpus=2))
    first = ledger.acquire({"GPU": 0.6}, me)
    second = ledger.acquire({"GPU": 0.6}, me)
    assert (first.grants["GPU"].ids, second.grants["GPU"].ids) == (("0",), ("1",))
    with pytest.raises(ResourcesUnavailableError, match="does not fit on any one device"):
        ledger.acquire({"GPU": 0.6}, me)
    ledger.release(first.lease_id)
    assert ledger.acquire({"GPU": 0.6}, me).grants["GPU"].ids == ("0",)


def test_a_second_ledger_object_sees_the_same_leases(tmp_path, me):
    NodeLedger(tmp_path, inventory(gpus=1)).acquire({"GPU": 1}, me)
    with pytest.raises(ResourcesUnavailableError):
        NodeLedger(tmp_path, inventory(gpus=1)).acquire({"GPU": 1}, me)


def test_scalar_resources_are_accounted(tmp_path, me):
    ledger = NodeLedger(tmp_path, inventory())
    ledger.acquire({"CPU": 6, "accelerator_type:T4": 0.001}, me)
    with pytest.raises(ResourcesUnavailableError, match="CPU: 4 requested, 2 free"):
        ledger.acquire({"CPU": 4}, me)


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ({"GPU": 1.5}, "above 1 must be whole numbers"),
        ({"GPU": 3}, "3 requested but this node has only 2"),
        ({"GPU": -1}, "must not be negative"),
        ({"TPU": 1}, "this node has no TPU devices"),
        ({"CPUS": 1}, "did you mean CPU"),
        ({"GPU": 1, "neuron_cores": 2}, "GPU and neuron_cores cannot be requested together"),
        ({"GPU": float("nan")}, "GPU quantity must be a finite number"),
        ({"CPU": float("inf")}, "CPU quantity must be a finite number"),
    ],
)
def test_invalid_requests_say_why(tmp_path, me, request_, message):
    with pytest.raises(AllocationError, match=message) as caught:
        NodeLedger(tmp_path, inventory()).acquire(request_, me)
    assert not isinstance(caught.value, ResourcesUnavailableError)


def test_whole_number_family_rejects_fractions(tmp_path, me):
    tpu = NodeInventory(
        resources={"CPU": 1.0, "TPU": 4.0},
        pools={"TPU": DevicePool("TPU", "tpu", ("0", "1", "2", "3"), 4)},
    )
    with pytest.raises(AllocationError, match="fraction"):
        NodeLedger(tmp_path, tpu).acquire({"TPU": 0.5}, me)


def test_lease_of_a_dead_process_is_reclaimed(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    holder = ProcessRef.of(child.pid)
    child.wait()
    ledger = NodeLedger(tmp_path, inventory(gpus=1))
    ledger.acquire({"GPU": 1}, holder)
    # The holder has exited: the next caller reclaims its device.
    assert ledger.acquire({"GPU": 1}, ProcessRef.of(os.getpid())).grants["GPU"].ids == ("0",)


def test_a_reused_pid_does_not_keep_a_lease_alive(tmp_path, me):
    impostor = ProcessRef(me.pid, me.create_time - 1000)  # same pid, other start time
    assert not impostor.alive()
    ledger = NodeLedger(tmp_path, inventory(gpus=1))
    ledger.acquire({"GPU": 1}, impostor)
    assert ledger.snapshot()[0] == []


def test_lease_lives_while_any_holder_lives(tmp_path, me):
    runner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    ledger = NodeLedger(tmp_path, inventory(gpus=1))
    lease = ledger.acquire({"GPU": 1}, ProcessRef.of(runner.pid))
    ledger.add_holder(lease.lease_id, me)  # the workload outlives its runner
    runner.kill()
    runner.wait()
    leases, view = ledger.snapshot()
    assert [live.lease_id for live in leases] == [lease.lease_id]
    assert view.allocators["GPU"].free_shares() == {"0": 0.0}


def test_unreadable_ledger_is_set_aside_not_fatal(tmp_path, me):
    (tmp_path / "ledger.json").write_text("{not json")
    ledger = NodeLedger(tmp_path, inventory(gpus=1))
    assert ledger.acquire({"GPU": 1}, me).grants["GPU"].ids == ("0",)
    assert list(tmp_path.glob("ledger.corrupt-*"))
