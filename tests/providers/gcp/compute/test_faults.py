"""Compute Engine faults arrive as the real client's exceptions and leave as the taxonomy;
ownership holds whatever ids the caller passes."""

from __future__ import annotations

import pytest

from providers.base import TAG_CLUSTER, TAG_NODE_TYPE
from providers.errors import AccessDeniedError, InvalidConfigError, QuotaError, ThrottledError
from providers.local.gcp.compute import Fault
from tests.providers.gcp.compute.conftest import L4, PROJECT, T4, ZONES

TAGS = {TAG_NODE_TYPE: "l4"}


def test_quota_fails_fast_naming_the_metric_and_region(provider, cloud):
    cloud.quotas["us-central1/NVIDIA_T4_GPUS"] = 0

    with pytest.raises(QuotaError) as caught:
        provider.create_node(T4, TAGS, 1, "req-1")

    assert caught.value.quota == "compute.googleapis.com/nvidia_t4_gpus in region us-central1"
    assert caught.value.code == "QUOTA_EXCEEDED"
    assert cloud.calls["bulkInsert"] == 1  # no other zone of the region is tried


def test_permission_denied_names_the_iam_permission(provider, cloud):
    cloud.inject(Fault("permission", method="bulkInsert"))

    with pytest.raises(AccessDeniedError) as caught:
        provider.create_node(L4, TAGS, 1, "req-1")

    assert caught.value.action == "compute.instances.create"


def test_listing_is_retried_through_unavailability(provider, cloud):
    cloud.inject(Fault("unavailable", method="list", times=2))

    assert provider.nodes() == []
    assert cloud.calls["list"] == 3


def test_a_rate_limit_past_the_retry_deadline_is_throttled(make_provider, cloud):
    cloud.inject(Fault("rate_limit", method="list"))

    with pytest.raises(ThrottledError):
        make_provider(retry_deadline_s=0.3).nodes()


def test_an_unknown_machine_type_in_the_zone_is_invalid_config(provider):
    with pytest.raises(InvalidConfigError, match="g2-standard-8"):
        provider.create_node({**L4, "availability_zone": ["us-west3-a"]}, TAGS, 1, "req-1")


def test_another_clusters_vm_is_never_listed_labelled_or_deleted(provider, cloud):
    cloud.put_instance(PROJECT, ZONES[0], "theirs", {TAG_CLUSTER: "beta"})

    assert provider.nodes() == []
    assert provider.node("theirs") is None
    assert provider.terminate_nodes(["theirs", f"{ZONES[0]}/theirs"]) == []
    provider.set_tags(["theirs"], {"accel-node-status": "mine"})
    assert cloud.instance_names() == [f"{ZONES[0]}/theirs"]
    assert "delete" not in cloud.calls and "setLabels" not in cloud.calls


def test_a_cluster_name_that_is_not_a_label_value_is_refused(make_provider):
    with pytest.raises(InvalidConfigError, match="label"):
        make_provider(cluster="Not.A.Label")
