"""The unavailable-offerings cache: TTLs by fault class, probe budgets, persistence."""

from autoscaler.offerings import CAPACITY_TTL_S, UnavailableOfferings
from autoscaler.state import StateStore
from providers.base import NodeTypeOffering, Offering
from providers.errors import AccessDeniedError, CapacityError, QuotaError, ThrottledError
from tests.fakes.clock import Clock

P4D = Offering("p4d.24xlarge", "us-east-1a", "on-demand")
P4D_IN_A = NodeTypeOffering("p4d.24xlarge", "on-demand", ("us-east-1a",))
P4D_IN_A_OR_B = NodeTypeOffering("p4d.24xlarge", "on-demand", ("us-east-1a", "us-east-1b"))
P4D_ANYWHERE = NodeTypeOffering("p4d.24xlarge", "on-demand")
G5 = NodeTypeOffering("g5.xlarge")


def test_capacity_blocks_for_a_ttl_then_probes_with_a_growing_budget():
    clock = Clock()
    cache = UnavailableOfferings(clock)
    assert cache.budget(P4D_IN_A) is None
    cache.record_failure(
        CapacityError("no capacity", offering=P4D, code="InsufficientInstanceCapacity")
    )
    assert cache.budget(P4D_IN_A) == 0
    clock.advance(CAPACITY_TTL_S + 1)
    assert cache.budget(P4D_IN_A) == 1
    cache.record_success(P4D)
    assert cache.budget(P4D_IN_A) == 2
    cache.record_failure(CapacityError("again", offering=P4D))
    assert cache.budget(P4D_IN_A) == 0
    clock.advance(2 * CAPACITY_TTL_S + 1)  # the second failure blocks twice as long
    assert cache.budget(P4D_IN_A) == 1


def test_one_zone_out_holds_back_only_that_zone():
    cache = UnavailableOfferings(Clock())
    cache.record_failure(CapacityError("no capacity in a", offering=P4D))
    assert cache.budget(P4D_IN_A) == 0
    assert cache.budget(P4D_IN_A_OR_B) is None  # zone b is still clear
    assert cache.budget(P4D_ANYWHERE) is None  # the cloud picks another zone
    assert cache.budget(NodeTypeOffering("p4d.24xlarge", "spot", ("us-east-1a",))) is None


def test_a_type_out_everywhere_is_held_back_in_every_zone():
    cache = UnavailableOfferings(Clock())
    everywhere = Offering("p4d.24xlarge", None, "on-demand")
    cache.record_failure(CapacityError("no capacity in any zone", offering=everywhere))
    assert cache.budget(P4D_IN_A_OR_B) == 0
    assert cache.budget(P4D_ANYWHERE) == 0


def test_quota_and_permission_name_what_to_fix_and_block_longer():
    clock = Clock()
    cache = UnavailableOfferings(clock)
    quota = cache.record_failure(
        QuotaError("limit", quota="Running On-Demand P instances", offering=P4D)
    )
    denied = cache.record_failure(
        AccessDeniedError("denied", action="ec2:RunInstances", offering=Offering("g5.xlarge"))
    )
    assert (quota.kind, quota.detail) == ("quota", "Running On-Demand P instances")
    assert (denied.kind, denied.detail) == ("permission", "ec2:RunInstances")
    clock.advance(CAPACITY_TTL_S + 1)
    assert cache.budget(P4D_IN_A) == 0 and cache.budget(G5) == 0


def test_errors_without_an_offering_or_class_are_not_remembered():
    cache = UnavailableOfferings(Clock())
    assert cache.record_failure(ThrottledError("slow down", offering=P4D)) is None
    assert cache.record_failure(CapacityError("no offering")) is None
    assert cache.active() == []


def test_the_cache_survives_a_restart(tmp_path):
    clock = Clock()
    store = StateStore(tmp_path / "state.db")
    UnavailableOfferings(clock, store.offerings(), store.save_offering).record_failure(
        CapacityError("out", offering=P4D)
    )
    reopened = StateStore(tmp_path / "state.db")
    assert UnavailableOfferings(clock, reopened.offerings()).budget(P4D_IN_A) == 0


def test_a_regional_quota_blocks_the_type_in_every_zone_a_zonal_one_only_its_zone():
    cache = UnavailableOfferings(Clock())
    cache.record_failure(QuotaError("vCPU limit", quota="Running On-Demand P", offering=P4D))
    assert cache.budget(P4D_IN_A_OR_B) == 0  # quotas are regional: zone b is no way out
    zonal = UnavailableOfferings(Clock())
    zonal.record_failure(QuotaError("per zone", quota="TPUPerZone", zonal=True, offering=P4D))
    assert zonal.budget(P4D_IN_A_OR_B) is None
    assert zonal.open_zones(P4D_IN_A_OR_B) == ("us-east-1b",)


def test_a_gpu_quota_blocks_every_type_with_that_gpu_and_no_other():
    cache = UnavailableOfferings(Clock())
    a2 = Offering("a2-highgpu-1g", "us-central1-a")
    cache.record_failure(
        QuotaError(
            "Quota 'NVIDIA_A100_GPUS' exceeded",
            quota="NVIDIA_A100_GPUS",
            accelerator="A100-40G",
            offering=a2,
        )
    )
    forty = {"GPU": 2.0, "accelerator_type:A100": 1.0, "accelerator_type:A100-40G": 1.0}
    eighty = {"GPU": 1.0, "accelerator_type:A100": 1.0, "accelerator_type:A100-80G": 1.0}
    reason = cache.accelerator_block(forty, "on-demand")
    assert reason and "NVIDIA_A100_GPUS" in reason
    assert cache.accelerator_block(eighty, "on-demand") is None


def test_a_permission_error_blocks_every_create_until_it_expires():
    clock = Clock()
    cache = UnavailableOfferings(clock)
    cache.record_failure(AccessDeniedError("denied", action="ec2:RunInstances"))
    assert cache.budget(P4D_IN_A) == 0 and cache.budget(G5) == 0
    assert "ec2:RunInstances" in cache.blocked_reason(G5)
    clock.advance(10 * 3600)
    assert cache.budget(G5) is not None
