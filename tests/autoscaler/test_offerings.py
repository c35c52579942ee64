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
