"""The reconcile loop against EC2 over HTTP (moto's server), with faults injected."""

from __future__ import annotations

import socket
import urllib.request

import pytest
from botocore.awsrequest import AWSResponse

from autoscaler.config import parse_cluster_config
from autoscaler.reconciler import Reconciler
from autoscaler.report import NodeReport, encode
from autoscaler.state import StateStore
from providers import cloud_for
from providers.aws import AwsNodeProvider
from providers.errors import ThrottledError
from tests.fakes.clock import Clock

EC2_VALUE_LIMIT = cloud_for("aws").tag_value_limit

AMI = "ami-1e749f67"


@pytest.fixture
def endpoint(monkeypatch):
    from moto.server import ThreadedMotoServer

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    url = f"http://127.0.0.1:{port}"
    urllib.request.urlopen(urllib.request.Request(f"{url}/moto-api/reset", method="POST")).read()
    yield url
    server.stop()


def make_reconciler(endpoint: str, tmp_path, **provider_settings) -> Reconciler:
    provider_config = {
        "type": "aws",
        "region": "us-east-1",
        "endpoint_url": endpoint,
        **provider_settings,
    }
    config = parse_cluster_config(
        {
            "cluster_name": "ec2",
            "max_workers": 500,
            "idle_timeout_minutes": 1,
            "provider": provider_config,
            "available_node_types": {
                "t4": {
                    "node_config": {"InstanceType": "g4dn.xlarge", "ImageId": AMI},
                    "max_workers": 300,
                },
                "t4x4": {
                    "node_config": {"InstanceType": "g4dn.12xlarge", "ImageId": AMI},
                    "max_workers": 300,
                },
            },
        },
        "test",
    )
    provider = AwsNodeProvider(provider_config, "ec2")
    return Reconciler(config, provider, StateStore(tmp_path / "state.db"), Clock())


@pytest.fixture
def reconciler(endpoint, tmp_path):
    return make_reconciler(endpoint, tmp_path)


def fault(reconciler: Reconciler, code: str, when) -> None:
    class Body:
        def stream(self, **_):
            yield (
                f"<Response><Errors><Error><Code>{code}</Code><Message>injected</Message>"
                "</Error></Errors><RequestID>r</RequestID></Response>"
            ).encode()

    def hook(request, **_):
        body = request.body.decode() if isinstance(request.body, bytes) else request.body or ""
        return AWSResponse(request.url, 400, {}, Body()) if when(body) else None

    reconciler.provider.ec2.meta.events.register_first("before-send.ec2", hook)


def test_capacity_for_a_whole_type_moves_to_the_next_cheapest_type(reconciler):
    reconciler.store.set_demand({"bundles": [{"GPU": 1}]}, 0)
    fault(
        reconciler,
        "InsufficientInstanceCapacity",
        lambda body: "RunInstances" in body and "g4dn.xlarge" in body,
    )
    result = reconciler.tick()
    assert result.launched == {"t4x4": 1}
    assert [r.instance_type for r in reconciler.offerings.active()] == ["g4dn.xlarge"]


def test_a_zone_out_of_capacity_holds_back_only_that_zone(endpoint, tmp_path):
    reconciler = make_reconciler(endpoint, tmp_path, availability_zone="us-east-1a,us-east-1b")
    assert reconciler.types["t4"].offering.zones == ("us-east-1a", "us-east-1b")
    reconciler.store.set_demand({"bundles": [{"GPU": 1}]}, 0)
    fault(
        reconciler,
        "InsufficientInstanceCapacity",
        lambda body: "RunInstances" in body and "us-east-1a" in body,
    )
    assert reconciler.tick().launched == {"t4": 1}  # zone a failed, zone b launched
    (node,) = reconciler.provider.nodes()
    assert node.zone == "us-east-1b"
    assert [r.key for r in reconciler.offerings.active()] == ["g4dn.xlarge/us-east-1a/on-demand"]
    reconciler.store.set_demand({"bundles": [{"resources": {"GPU": 1}, "count": 2}]}, 0)
    # The next round still plans the cheapest type, in the zone that has capacity.
    assert reconciler.current_plan().launch_counts() == {"t4": 1}
    assert reconciler.tick().launched == {"t4": 1}
    assert {n.zone for n in reconciler.provider.nodes()} == {"us-east-1b"}


def test_a_throttling_storm_fails_the_round_then_the_loop_resumes_without_duplicates(reconciler):
    reconciler.store.set_demand({"bundles": [{"GPU": 1}]}, 0)
    storm = [True]
    fault(reconciler, "RequestLimitExceeded", lambda body: storm[0])
    with pytest.raises(ThrottledError):
        reconciler.tick()
    storm[0] = False
    assert reconciler.tick().launched == {"t4": 1}
    assert reconciler.tick().launched == {}
    assert len(reconciler.provider.nodes()) == 1


def test_two_hundred_idle_nodes_are_reclaimed_in_one_round(reconciler):
    reconciler.store.set_demand({"bundles": [{"resources": {"GPU": 1}, "count": 200}]}, 0)
    assert reconciler.tick().launched == {"t4": 200}
    nodes = reconciler.provider.nodes()
    idle = NodeReport(
        {"CPU": 4, "GPU": 1, "accelerator_type:T4": 1},
        {"GPU": 1},
        {"CPU": 4, "GPU": 1},
        {"GPU": (1.0,)},
        idle_since=0.0,
    )
    reconciler.provider.set_tags([n.id for n in nodes], encode(idle, EC2_VALUE_LIMIT))
    reconciler.store.set_demand({"bundles": []}, 0)
    reconciler.clock.advance(120)
    calls = []
    reconciler.provider.ec2.meta.events.register(
        "before-call.ec2.TerminateInstances", lambda **_: calls.append(1)
    )
    result = reconciler.tick()
    assert len(result.terminated) == 200
    assert calls == [1]  # one batched call
    assert reconciler.provider.nodes() == []


MOTO_CONSOLE_LAST_LINE = "Enabling fast FPU save and restore... done."


def test_never_reporting_types_are_held_after_the_limit_with_their_console(reconciler):
    """No instance ever reports (e.g. no instance profile): each type is replaced until the
    limit, then held; the demand moves to the next type, until every fitting type is held
    and nothing is launched any more."""
    from autoscaler.boot_failures import FAILURE_LIMIT

    reconciler.store.set_demand({"bundles": [{"GPU": 1}]}, 0)
    assert reconciler.tick().launched == {"t4": 1}
    reads = []
    reconciler.provider.ec2.meta.events.register(
        "before-call.ec2.GetConsoleOutput", lambda **_: reads.append(1)
    )
    launched = []
    for _ in range(2 * FAILURE_LIMIT):
        reconciler.clock.advance(31 * 60)
        result = reconciler.tick()
        assert len(result.terminated) == 1
        launched.append(result.launched)
    assert launched == [{"t4": 1}] * (FAILURE_LIMIT - 1) + [{"t4x4": 1}] * FAILURE_LIMIT + [{}]
    assert sorted(h.node_type for h in result.held) == ["t4", "t4x4"]
    assert len(reads) == 2 * FAILURE_LIMIT  # one read per stuck node, before terminating it
    ended = [e for e in reconciler.store.events() if e.kind == "terminated"]
    assert all(e.data["console"][-1] == MOTO_CONSOLE_LAST_LINE for e in ended)
    assert all(MOTO_CONSOLE_LAST_LINE in e.message for e in ended)
    held = [e for e in reconciler.store.events() if e.kind == "held"]
    assert [e.node_type for e in held] == ["t4", "t4x4"]
    assert held[0].message.startswith("stopped replacing t4: 3 nodes in a row never reported")
    assert MOTO_CONSOLE_LAST_LINE in held[0].message
    for _ in range(3):
        reconciler.clock.advance(3600)
        assert reconciler.tick().launched == {}
    assert reconciler.provider.nodes() == []
    (infeasible,) = reconciler.current_plan().infeasible
    assert "t4 (held: 3 nodes in a row never reported)" in infeasible.reason


def test_an_instance_stopped_outside_the_autoscaler_is_terminated_at_once_and_replaced(
    reconciler,
):
    reconciler.store.set_demand({"bundles": [{"GPU": 1}]}, 0)
    reconciler.tick()
    (first,) = reconciler.provider.nodes()
    reconciler.provider.ec2.stop_instances(InstanceIds=[first.id])  # e.g. a spot interruption

    result = reconciler.tick()

    assert result.terminated == [first.id]
    assert result.launched == {"t4": 1}
    state = reconciler.provider.ec2.describe_instances(InstanceIds=[first.id])
    assert state["Reservations"][0]["Instances"][0]["State"]["Name"] == "terminated"
    said = [e.message for e in reconciler.store.events() if e.node_id == first.id]
    assert any("the cloud stopped it (stopped" in m for m in said)


def test_a_stopped_node_cached_by_us_is_left_stopped(endpoint, tmp_path):
    reconciler = make_reconciler(endpoint, tmp_path, cache_stopped_nodes=True)
    reconciler.store.set_demand({"bundles": [{"GPU": 1}]}, 0)
    reconciler.tick()
    (node,) = reconciler.provider.nodes()
    reconciler.store.set_demand({"bundles": []}, 0)
    assert reconciler.provider.terminate_nodes([node.id]) == [node.id]  # stops it
    reconciler.tick()
    state = reconciler.provider.ec2.describe_instances(InstanceIds=[node.id])
    assert state["Reservations"][0]["Instances"][0]["State"]["Name"] == "stopped"
