"""Ray's GCP TPU node_config shape, our ``market`` key, and how slices map back."""

from __future__ import annotations

import pytest

from providers.base import ON_DEMAND, SPOT
from providers.errors import InvalidConfigError
from providers.gcp.tpu.launch import RUNTIME_VERSIONS


def _created(provider, node_config: dict):
    """The ProviderNode and the node as the API stores it."""
    (node,) = provider.create_node(node_config, {}, 1, "req-1").nodes
    return node, provider.api.get_node(node.zone, node.id)


@pytest.mark.parametrize(
    ("accelerator_type", "zone", "runtime"),
    [
        ("v4-8", "us-central2-b", "tpu-ubuntu2204-base"),
        ("v5litepod-8", "us-central1-a", "v2-alpha-tpuv5-lite"),
        ("v5e-4", "us-west4-a", "v2-alpha-tpuv5-lite"),
        ("v5p-8", "us-east5-a", "v2-alpha-tpuv5"),
        ("v6e-8", "us-east5-b", "v2-alpha-tpuv6e"),
    ],
)
def test_default_runtime_version_per_generation(provider, accelerator_type, zone, runtime):
    node, stored = _created(
        provider, {"acceleratorType": accelerator_type, "availability_zone": [zone]}
    )

    assert node.zone == zone
    assert stored.runtime_version == runtime


def test_an_explicit_runtime_version_is_kept(provider):
    _, stored = _created(provider, {"acceleratorType": "v4-8", "runtimeVersion": "tpu-vm-base"})

    assert stored.runtime_version == "tpu-vm-base"


def test_v7x_is_refused_because_the_tpu_api_does_not_offer_it(provider):
    assert "v7x" not in RUNTIME_VERSIONS
    with pytest.raises(InvalidConfigError, match="runtimeVersion"):
        provider.create_node({"acceleratorType": "tpu7x-8"}, {}, 1, "req-1")


def test_market_spot_requests_a_spot_slice(provider):
    node, stored = _created(provider, {"acceleratorType": "v4-8", "market": SPOT})

    assert stored.scheduling_config.spot
    assert node.market == SPOT


@pytest.mark.parametrize("scheduling", [{"preemptible": True}, {"spot": True}])
def test_scheduling_config_is_passed_and_mapped_to_spot(provider, scheduling):
    result = provider.create_node(
        {"acceleratorType": "v4-8", "schedulingConfig": scheduling}, {}, 1, "req-1"
    )

    assert result.nodes[0].market == SPOT
    assert result.offering.market == SPOT


def test_default_market_is_on_demand(provider):
    node, stored = _created(provider, {"acceleratorType": "v4-8"})

    assert node.market == ON_DEMAND
    assert not stored.scheduling_config.spot and not stored.scheduling_config.preemptible


def test_accelerator_config_with_topology(provider):
    node, stored = _created(provider, {"acceleratorConfig": {"type": "V4", "topology": "2x2x2"}})

    assert node.instance_type == "v4-16"
    assert len(node.hosts) == 2
    assert stored.accelerator_config.topology == "2x2x2"


def test_network_config_and_startup_script_reach_the_api(provider):
    node, stored = _created(
        provider,
        {
            "acceleratorType": "v4-16",
            "networkConfig": {"enableExternalIps": True},
            "metadata": {"startup-script": "echo hi"},
            "labels": {"team": "research"},
        },
    )

    assert all(host.external_ip for host in node.hosts)
    assert node.external_ip == node.hosts[0].external_ip
    assert stored.metadata["startup-script"] == "echo hi"
    assert node.tags["team"] == "research"


def test_an_unknown_node_config_key_is_invalid_config(provider, cloud):
    with pytest.raises(InvalidConfigError, match="acceleratorTyp"):
        provider.create_node({"acceleratorTyp": "v4-8", "runtimeVersion": "x"}, {}, 1, "req-1")

    assert "create" not in cloud.calls


def test_a_bad_market_is_invalid_config(provider):
    with pytest.raises(InvalidConfigError, match="market"):
        provider.create_node({"acceleratorType": "v4-8", "market": "reserved"}, {}, 1, "req-1")
