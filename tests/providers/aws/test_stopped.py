"""cache_stopped_nodes: terminating stops, creating restarts; no node is claimed twice."""

from __future__ import annotations

from providers.base import TAG_LAUNCH_REQUEST, TAG_NODE_TYPE
from tests.providers.aws.conftest import TAGS, Wire, node_config, params_of


def states(provider) -> list[str]:
    return sorted(n.state for n in provider.nodes())


def test_off_by_default_terminate_terminates(provider, ami):
    ids = provider.create_node(node_config(ami), TAGS, 2, "req-1").node_ids
    provider.terminate_nodes(ids)
    assert provider.nodes() == []


def test_stopped_nodes_are_restarted_before_launching(make_provider, ami):
    provider = make_provider(cache_stopped_nodes=True)
    first = provider.create_node(node_config(ami), TAGS, 2, "req-1").node_ids
    assert sorted(provider.terminate_nodes(first)) == sorted(first)
    assert states(provider) == ["stopped", "stopped"]
    wire = Wire(provider)
    again = provider.create_node(node_config(ami), TAGS, 3, "req-2")
    assert set(first) < set(again.node_ids) and len(again.nodes) == 3
    assert wire.sent["StartInstances"] == 1 and wire.sent["RunInstances"] == 1
    assert {n.tags[TAG_LAUNCH_REQUEST] for n in provider.nodes()} == {"req-2"}


def test_stopped_nodes_of_another_node_type_are_left_alone(make_provider, ami):
    provider = make_provider(cache_stopped_nodes=True)
    cpu = provider.create_node(node_config(ami), {TAG_NODE_TYPE: "cpu"}, 1, "req-1").node_ids
    provider.terminate_nodes(cpu)
    gpu = provider.create_node(node_config(ami), TAGS, 1, "req-2").node_ids
    assert not set(cpu) & set(gpu)
    assert provider.node(cpu[0]).state == "stopped"


def test_two_creates_never_restart_the_same_stopped_node(make_provider, ami):
    first = make_provider(cache_stopped_nodes=True)
    second = make_provider(cache_stopped_nodes=True)
    stopped = first.create_node(node_config(ami), TAGS, 1, "req-0").node_ids
    first.terminate_nodes(stopped)
    raced = []

    def the_other_create_wins(request, **_kwargs):
        if params_of(request).get("Action") == "StartInstances" and not raced:
            raced.append(second.create_node(node_config(ami), TAGS, 1, "req-b"))
        return None

    first.ec2.meta.events.register("before-send.ec2", the_other_create_wins)
    mine = first.create_node(node_config(ami), TAGS, 1, "req-a")
    (theirs,) = raced
    assert theirs.node_ids == stopped  # the other create restarted it first...
    assert len(mine.nodes) == 1 and mine.node_ids != stopped  # ...so this one launched anew
    assert first.node(stopped[0]).tags[TAG_LAUNCH_REQUEST] == "req-b"
    assert len(first.nodes()) == 2


def test_spot_nodes_are_terminated_even_when_caching(make_provider, ami):
    provider = make_provider(cache_stopped_nodes=True)
    ids = provider.create_node(node_config(ami, market="spot"), TAGS, 1, "req-1").node_ids
    provider.terminate_nodes(ids)
    assert provider.nodes() == []


def test_gangs_do_not_restart_stopped_nodes(make_provider, ami):
    provider = make_provider(cache_stopped_nodes=True)
    (stopped,) = provider.create_node(node_config(ami), TAGS, 1, "req-1").node_ids
    provider.terminate_node(stopped)
    gang = provider.create_node(node_config(ami), TAGS, 2, "req-2", all_or_nothing=True)
    assert len(gang.nodes) == 2 and stopped not in gang.node_ids
    assert provider.node(stopped).state == "stopped"
