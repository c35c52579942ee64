"""Nothing without this cluster's label is ever listed, relabeled or deleted, even by id."""

from __future__ import annotations

import pytest

from providers.base import TAG_CLUSTER, TAG_NODE_STATUS, TAG_NODE_TYPE
from providers.errors import InvalidConfigError
from tests.providers.gcp.conftest import CLUSTER, PROJECT, ZONE


@pytest.fixture
def strangers(cloud) -> list[str]:
    """A node of another cluster and an unlabeled one, in our zone."""
    cloud.put_node(PROJECT, ZONE, "beta-node", "v4-8", {TAG_CLUSTER: "beta"})
    cloud.put_node(PROJECT, ZONE, "hand-made", "v4-8", {})
    cloud.put_node(PROJECT, ZONE, "near-miss", "v4-8", {TAG_CLUSTER: f"{CLUSTER}-2"})
    return ["beta-node", "hand-made", "near-miss"]


def test_foreign_and_unlabeled_nodes_are_never_listed(provider, strangers):
    ours = provider.create_node({"acceleratorType": "v4-8"}, {}, 1, "req-1")

    assert provider.non_terminated_nodes() == list(ours.node_ids)
    for node_id in strangers:
        assert provider.node(node_id) is None
        assert provider.node_tags(node_id) == {}
        assert provider.internal_ip(node_id) is None


def test_foreign_and_unlabeled_nodes_are_never_deleted_even_by_id(provider, cloud, strangers):
    assert provider.terminate_nodes(strangers) == []

    assert "delete" not in cloud.calls
    assert len(cloud.node_names()) == 3


def test_foreign_and_unlabeled_nodes_are_never_relabeled(provider, cloud, strangers):
    provider.set_tags(strangers, {TAG_NODE_STATUS: "up-to-date"})

    assert "patch" not in cloud.calls
    beta = cloud.get(PROJECT, ZONE, "beta-node")
    assert beta["labels"] == {TAG_CLUSTER: "beta"}


def test_only_owned_ids_in_a_mixed_request_are_acted_on(provider, cloud, strangers):
    (node,) = provider.create_node({"acceleratorType": "v4-8"}, {}, 1, "req-1").nodes

    assert provider.terminate_nodes([*strangers, node.id, "no-such-node"]) == [node.id]

    assert cloud.calls["delete"] == 1
    assert len(cloud.node_names()) == 3


def test_nodes_in_another_zone_are_not_listed(provider, cloud):
    cloud.put_node(PROJECT, "us-east5-a", "elsewhere", "v4-8", {TAG_CLUSTER: CLUSTER})

    assert provider.nodes() == []


def test_the_same_cluster_name_in_another_project_is_not_ours(provider, cloud):
    cloud.put_node("other-project", ZONE, "theirs", "v4-8", {TAG_CLUSTER: CLUSTER})

    assert provider.nodes() == []
    assert provider.terminate_nodes(["theirs"]) == []


def test_a_cluster_name_that_cannot_be_a_label_value_is_refused(make_provider):
    with pytest.raises(InvalidConfigError, match="accel-cluster-name"):
        make_provider("My Cluster")
    with pytest.raises(InvalidConfigError):
        make_provider("x" * 64)


def test_a_tag_that_cannot_be_a_label_creates_nothing(provider, cloud):
    with pytest.raises(InvalidConfigError, match=TAG_NODE_TYPE):
        provider.create_node({"acceleratorType": "v4-8"}, {TAG_NODE_TYPE: "TPU Workers"}, 1, "r")

    assert "create" not in cloud.calls
