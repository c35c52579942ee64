"""Cloud TPU faults arrive as the real client's exceptions and leave as the taxonomy."""

from __future__ import annotations

import pytest

from providers.base import SPOT, TAG_CLUSTER, TAG_LAUNCH_REQUEST, Offering
from providers.errors import (
    AccessDeniedError,
    CapacityError,
    InvalidConfigError,
    ProviderError,
    QuotaError,
    ThrottledError,
)
from providers.gcp.tpu.provider import node_id_for
from providers.local.gcp.tpu import Fault
from tests.providers.gcp.conftest import CLUSTER, PROJECT, ZONE

V4_16 = {"acceleratorType": "v4-16"}


def test_stockout_in_the_operation_is_a_capacity_error_for_the_offering(provider, cloud):
    cloud.inject(Fault("stockout", zone=ZONE, accelerator_type="v4-16"))

    with pytest.raises(CapacityError) as caught:
        provider.create_node(V4_16, {}, 1, "req-1")

    assert caught.value.offering == Offering("v4-16", ZONE, "on-demand")
    assert caught.value.code == "RESOURCE_EXHAUSTED"
    assert "no more capacity" in caught.value.raw_message
    assert cloud.node_names() == []


def test_stockout_of_the_call_is_a_capacity_error_too(provider, cloud):
    cloud.inject(Fault("stockout_call"))

    with pytest.raises(CapacityError) as caught:
        provider.create_node({**V4_16, "market": SPOT}, {}, 1, "req-1")

    assert caught.value.offering == Offering("v4-16", ZONE, SPOT)


def test_a_stockout_of_another_type_does_not_hit_this_one(provider, cloud):
    cloud.inject(Fault("stockout", accelerator_type="v5p-8"))

    assert provider.create_node(V4_16, {}, 1, "req-1").nodes


def test_quota_is_a_quota_error_naming_the_quota(provider, cloud):
    cloud.inject(Fault("quota"))

    with pytest.raises(QuotaError) as caught:
        provider.create_node(V4_16, {}, 1, "req-1")

    assert caught.value.quota == "TPUV4PodPerProjectPerZoneForTPUAPI"
    assert caught.value.offering.instance_type == "v4-16"
    assert cloud.calls["create"] == 1  # a quota does not come back within a retry deadline


def test_permission_denied_names_the_iam_permission(provider, cloud):
    cloud.inject(Fault("permission", method="create"))

    with pytest.raises(AccessDeniedError) as caught:
        provider.create_node(V4_16, {}, 1, "req-1")

    assert caught.value.action == "tpu.nodes.create"
    assert caught.value.code == "PERMISSION_DENIED"


def test_permission_denied_on_listing(provider, cloud):
    cloud.inject(Fault("permission", method="list"))

    with pytest.raises(AccessDeniedError) as caught:
        provider.nodes()

    assert caught.value.action == "tpu.nodes.list"


def test_unknown_slice_size_is_rejected_before_any_call_naming_the_field(provider, cloud):
    with pytest.raises(InvalidConfigError, match="closest: v4-") as caught:
        provider.create_node({"acceleratorType": "v4-12"}, {}, 1, "req-1")

    assert caught.value.field == "acceleratorType"
    assert "create" not in cloud.calls


def test_unknown_generation_without_runtime_is_rejected_before_any_call(provider, cloud):
    with pytest.raises(InvalidConfigError, match="runtimeVersion"):
        provider.create_node({"acceleratorType": "v9-8"}, {}, 1, "req-1")

    assert "create" not in cloud.calls


def test_transient_unavailability_is_retried(provider, cloud):
    cloud.inject(Fault("unavailable", times=2))

    result = provider.create_node(V4_16, {}, 1, "req-1")

    assert result.nodes
    assert cloud.calls["create"] == 3


def test_listing_is_retried_through_transient_errors(provider, cloud):
    provider.create_node(V4_16, {}, 1, "req-1")
    cloud.inject(Fault("unavailable", method="list", times=2))

    assert len(provider.nodes()) == 1
    assert cloud.calls["list"] == 3


def test_unavailability_past_the_retry_deadline_is_throttled(make_provider, cloud):
    provider = make_provider(retry_deadline_s=0.5)
    cloud.inject(Fault("unavailable", method="list"))

    with pytest.raises(ThrottledError) as caught:
        provider.nodes()

    assert caught.value.code == "UNAVAILABLE"
    assert cloud.calls["list"] > 1


def test_rate_limit_is_retried_then_throttled(make_provider, cloud):
    provider = make_provider(retry_deadline_s=0.5)
    cloud.inject(Fault("rate_limit", method="create", times=1))
    assert provider.create_node(V4_16, {}, 1, "req-1").nodes

    cloud.inject(Fault("rate_limit", method="create"))
    with pytest.raises(ThrottledError):
        provider.create_node(V4_16, {}, 1, "req-2")


def test_a_failed_operation_is_classified_like_a_failed_call(provider, cloud):
    cloud.inject(Fault("operation_error", code=9, message="Runtime version is not supported."))

    with pytest.raises(InvalidConfigError) as caught:
        provider.create_node(V4_16, {}, 1, "req-1")

    assert caught.value.code == "FAILED_PRECONDITION"
    assert caught.value.raw_message == "Runtime version is not supported."


def test_an_internal_operation_error_is_a_plain_provider_error(provider, cloud):
    cloud.inject(Fault("operation_error", method="create", code=13, message="boom"))

    with pytest.raises(ProviderError) as caught:
        provider.create_node(V4_16, {}, 1, "req-1")

    assert type(caught.value) is ProviderError and caught.value.code == "INTERNAL"


def test_a_partial_fill_is_reported_not_silent(provider, cloud):
    cloud.inject(Fault("stockout", times=1))

    result = provider.create_node(V4_16, {}, 2, "req-1")

    assert result.partial and len(result.nodes) == 1
    assert [type(error) for error in result.errors] == [CapacityError]
    assert cloud.node_names() == [f"projects/{PROJECT}/locations/{ZONE}/nodes/{result.node_ids[0]}"]


def test_all_or_nothing_rolls_back_a_partial_fill(provider, cloud):
    cloud.inject(Fault("stockout", times=1))

    with pytest.raises(CapacityError):
        provider.create_node(V4_16, {}, 2, "req-1", all_or_nothing=True)

    assert provider.non_terminated_nodes() == []


def test_an_existing_node_of_another_cluster_with_our_id_is_never_adopted(provider, cloud):
    node_id = node_id_for(CLUSTER, "req-1", 0)
    cloud.put_node(PROJECT, ZONE, node_id, "v4-8", {TAG_CLUSTER: "beta", TAG_LAUNCH_REQUEST: "x"})

    with pytest.raises(InvalidConfigError, match="not this cluster"):
        provider.create_node({"acceleratorType": "v4-8"}, {}, 1, "req-1")

    assert provider.nodes() == []
    assert "delete" not in cloud.calls


def test_transient_errors_while_polling_an_operation_are_retried(provider, cloud):
    cloud.inject(Fault("unavailable", method="operation", times=2))

    (node,) = provider.create_node(V4_16, {}, 1, "req-1").nodes

    assert node.state == "running"
    assert cloud.calls["operation"] >= 3
