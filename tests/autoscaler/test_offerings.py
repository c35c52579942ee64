"""The unavailable-offerings cache: TTLs by fault class, probe budgets, persistence."""

from autoscaler.offerings import CAPACITY_TTL_S, UnavailableOfferings
from autoscaler.state import StateStore
from providers.base import Offering
from providers.errors import AccessDeniedError, CapacityError, QuotaError, ThrottledError
from tests.autoscaler.test_reconciler import Clock

P4D = Offering("p4d.24xlarge", "us-east-1a", "on-demand")
ANY_ZONE = Offering("p4d.24xlarge", None, "on-demand")


def test_capacity_blocks_for_a_ttl_then_probes_with_a_growing_budget():
    clock = Clock()
    cache = UnavailableOfferings(clock)
    assert cache.budget(ANY_ZONE) is None
    cache.record_failure(
        CapacityError("no capacity", offering=P4D, code="InsufficientInstanceCapacity")
    )
    assert cache.budget(ANY_ZONE) == 0  # a node type is held back by any of its zones
    assert cache.budget(Offering("p4d.24xlarge", "us-east-1b", "on-demand")) is None
    clock.advance(CAPACITY_TTL_S + 1)
    assert cache.budget(P4D) == 1
    cache.record_success(P4D)
    assert cache.budget(P4D) == 2
    cache.record_failure(CapacityError("again", offering=P4D))
    assert cache.budget(P4D) == 0
    clock.advance(2 * CAPACITY_TTL_S + 1)  # the second failure blocks twice as long
    assert cache.budget(P4D) == 1


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
    assert cache.budget(P4D) == 0 and cache.budget(Offering("g5.xlarge")) == 0


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
    assert UnavailableOfferings(clock, reopened.offerings()).budget(P4D) == 0
