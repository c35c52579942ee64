"""TPU capacity through queued resources, spot slices, and preempted slices, over HTTP."""

from __future__ import annotations

from providers.base import CLOUD_PENDING, CLOUD_RUNNING, CLOUD_STOPPED, SPOT, TAG_NODE_TYPE
from providers.local.gcp.tpu import Fault
from tests.providers.gcp.conftest import PROJECT, ZONE

QUEUED = {"acceleratorType": "v4-8", "queuedResource": {"validUntilDuration": "3600s"}}
TAGS = {TAG_NODE_TYPE: "tpu"}


def test_a_queued_request_is_a_pending_node_until_it_becomes_active(provider, cloud):
    cloud.hold("provision")

    (node,) = provider.create_node(QUEUED, TAGS, 1, "req-1").nodes

    assert node.state == CLOUD_PENDING
    assert provider.nodes() == [node]  # counted as pending capacity: no second launch
    cloud.release("provision")
    (running,) = provider.nodes()
    assert running.id == node.id and running.state == CLOUD_RUNNING
    assert running.hosts and running.tags[TAG_NODE_TYPE] == "tpu"


def test_deleting_a_waiting_request_removes_it(provider, cloud):
    cloud.hold("provision")
    (node,) = provider.create_node(QUEUED, TAGS, 1, "req-1").nodes

    assert provider.terminate_nodes([node.id]) == [node.id]
    cloud.release("provision")
    assert provider.nodes() == []
    assert cloud.node_names() == []


def test_a_failed_request_is_listed_stopped_so_it_is_deleted_and_replaced(provider, cloud):
    cloud.inject(Fault("queued_failed", method="provision"))

    (node,) = provider.create_node(QUEUED, TAGS, 1, "req-1").nodes

    (listed,) = provider.nodes()
    assert listed.state == CLOUD_STOPPED
    assert provider.terminate_nodes([node.id]) == [node.id]
    assert provider.nodes() == []


def test_a_spot_queued_request_makes_a_spot_slice(provider, cloud):
    (node,) = provider.create_node({**QUEUED, "market": SPOT}, TAGS, 1, "req-1").nodes

    assert node.market == SPOT
    assert provider.api.get_node(ZONE, node.id).scheduling_config.spot


def test_a_preempted_spot_slice_is_listed_until_deleted(provider, cloud):
    (node,) = provider.create_node({"acceleratorType": "v4-8", "market": SPOT}, TAGS, 1, "r").nodes
    cloud.preempt(PROJECT, ZONE, node.id)

    (listed,) = provider.nodes()
    assert listed.state == CLOUD_STOPPED and listed.market == SPOT
    provider.terminate_nodes([node.id])
    assert provider.nodes() == []
