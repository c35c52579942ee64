"""Per-device allocation: the seed documents' examples must come out exactly."""

import pytest

from accel.allocation import AllocationError, DeviceAllocator, Grant


def ids_of(allocator: DeviceAllocator, *quantities: float) -> list[list[str]]:
    return [list(allocator.allocate(q).ids) for q in quantities]


def test_whole_gpus_go_lowest_index_first():
    # 2 GPUs: an actor with 1 GPU gets [0], a later 1-GPU task gets [1].
    assert ids_of(DeviceAllocator(["0", "1"]), 1, 1) == [["0"], ["1"]]


def test_half_gpus_pack_one_device_before_the_next():
    # 3 GPUs, three 0.5 actors: [0], [0], [1].
    assert ids_of(DeviceAllocator(["0", "1", "2"]), 0.5, 0.5, 0.5) == [["0"], ["0"], ["1"]]


def test_four_quarter_tasks_share_one_gpu():
    allocator = DeviceAllocator(["0"])
    assert ids_of(allocator, 0.25, 0.25, 0.25, 0.25) == [["0"]] * 4
    with pytest.raises(AllocationError):
        allocator.allocate(0.25)


def test_two_point_six_requests_leave_no_room_for_a_third():
    allocator = DeviceAllocator(["0", "1"])
    assert ids_of(allocator, 0.6, 0.6) == [["0"], ["1"]]
    assert allocator.free_shares() == {"0": pytest.approx(0.4), "1": pytest.approx(0.4)}
    with pytest.raises(AllocationError, match="does not fit on any one device"):
        allocator.allocate(0.6)  # 0.8 is free in total, but not on one device


def test_fraction_goes_to_the_fullest_device_that_fits():
    allocator = DeviceAllocator(["0", "1", "2"])
    allocator.allocate(0.5)  # device 0 -> 0.5 free
    allocator.allocate(1)  # device 1 taken whole
    allocator.allocate(0.7)  # 0.5 on device 0 does not fit: device 2 -> 0.3 free
    assert list(allocator.allocate(0.3).ids) == ["2"]  # best fit: 0.3 < 0.5
    assert list(allocator.allocate(0.2).ids) == ["0"]


def test_whole_request_skips_partly_used_devices():
    allocator = DeviceAllocator(["0", "1", "2"])
    allocator.allocate(0.1)
    assert list(allocator.allocate(2).ids) == ["1", "2"]
    with pytest.raises(AllocationError, match="1 whole device"):
        allocator.allocate(1)


def test_non_integer_above_one_is_rejected():
    with pytest.raises(AllocationError, match="above 1 must be whole"):
        DeviceAllocator(["0", "1"]).allocate(1.5)


def test_zero_request_takes_nothing():
    allocator = DeviceAllocator(["0"])
    assert allocator.allocate(0) == Grant((), 0)
    assert allocator.free_shares() == {"0": 1.0}


def test_many_small_fractions_do_not_drift():
    allocator = DeviceAllocator(["0"])
    for _ in range(10):
        allocator.allocate(0.1)
    assert allocator.free_shares() == {"0": 0.0}


def test_release_returns_the_share_and_reserve_replays_it():
    allocator = DeviceAllocator(["0", "1"])
    grant = allocator.allocate(0.5)
    allocator.release(grant)
    assert allocator.free_shares() == {"0": 1.0, "1": 1.0}
    allocator.reserve(Grant(("1",), 10_000))
    with pytest.raises(AllocationError, match="already taken"):
        allocator.reserve(Grant(("1",), 5_000))
    with pytest.raises(AllocationError, match="not on this node"):
        allocator.reserve(Grant(("7",), 5_000))
