"""Reports over HTTP to the monitor: signed, verified, kept newest-first in the state file;
and when an agent sends them (at once for what scaling acts on, else rate-limited)."""

from __future__ import annotations

import contextlib
import itertools
import json
import urllib.error
import urllib.request

import pytest

from autoscaler.agent import INTO_TAGS, TO_THE_MONITOR, NodeAgent
from autoscaler.report import NodeReport
from autoscaler.report_channel import REPORT_PATH, http_publisher, sign
from autoscaler.report_server import ReportServer
from autoscaler.state import StateStore
from tests.fakes.clock import Clock

SECRET = "s3cret"
IDLE = NodeReport(
    {"CPU": 8, "GPU": 1}, {"GPU": 1}, {"CPU": 8, "GPU": 1}, {"GPU": (1.0,)}, 5.0, reported_at=10.0
)


@pytest.fixture
def server(tmp_path):
    running = ReportServer(tmp_path / "state.db", SECRET, host="127.0.0.1").start()
    yield running
    running.stop()


def test_a_signed_report_is_kept_as_the_hosts_latest(server, tmp_path):
    publish = http_publisher(server.url, SECRET, "i-1", host=1)
    publish(IDLE)
    publish(NodeReport({"CPU": 8}, reported_at=2.0))  # older than what is kept: ignored
    store = StateStore(tmp_path / "state.db")
    assert store.reports() == {"i-1": {1: IDLE}}
    store.forget_nodes(["i-1"])
    assert store.reports() == {}


@pytest.mark.parametrize(
    ("secret", "skew", "code"), [("wrong", 0, 401), (SECRET, 3600, 401), (SECRET, 0, 204)]
)
def test_bad_signatures_and_stale_timestamps_are_refused(server, secret, skew, code):
    body = json.dumps({"node_id": "i-1", "host": 0, "report": IDLE.to_json()}).encode()
    timestamp = f"{server.clock() - skew:.3f}"
    request = urllib.request.Request(
        server.url + REPORT_PATH,
        data=body,
        method="POST",
        headers={
            "X-Accel-Timestamp": timestamp,
            "X-Accel-Signature": sign(secret, timestamp, body),
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            status = response.status
    except urllib.error.HTTPError as err:
        status = err.code
    assert status == code
    assert server.received == (1 if code == 204 else 0)


class _Reports:
    """A scripted report source: what the host looks like at each step."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.idle_since: float | None = clock()
        self.free_gpus = 1.0

    def busy(self) -> None:
        self.idle_since = None

    def idle(self) -> None:
        self.idle_since = self.clock()

    def __call__(self) -> NodeReport:
        return NodeReport(
            {"CPU": 8, "GPU": 1},
            {"GPU": 1},
            {"CPU": 8, "GPU": self.free_gpus},
            {"GPU": (self.free_gpus,)},
            self.idle_since,
            reported_at=self.clock(),
        )


def _agent(tmp_path, publish, policy, clock):
    agent = NodeAgent(publish, None, tmp_path / "state", clock, policy)
    source = _Reports(clock)
    agent.report = source  # the host's state, scripted
    return agent, source


def test_busy_and_idle_go_out_at_once_free_shares_wait(tmp_path):
    clock, sent = Clock(), []
    agent, host = _agent(tmp_path, sent.append, TO_THE_MONITOR, clock)
    assert agent.step() is not None
    clock.advance(3)
    host.busy()
    host.free_gpus = 0.5
    assert agent.step() is not None  # idle -> busy: at once
    clock.advance(3)
    host.free_gpus = 0.25
    assert agent.step() is None  # only free shares changed: waits for min_interval_s
    clock.advance(TO_THE_MONITOR.min_interval_s)
    assert agent.step().free["GPU"] == 0.25
    clock.advance(TO_THE_MONITOR.heartbeat_s - 1)
    assert agent.step() is None
    clock.advance(1)
    assert agent.step() is not None  # heartbeat
    assert len(sent) == 4


def test_a_failed_publish_backs_off_and_never_stops_the_agent(tmp_path):
    clock, attempts = Clock(), []

    def unreachable(report):
        attempts.append(report.reported_at)
        raise OSError("connection refused")

    agent, _ = _agent(tmp_path, unreachable, TO_THE_MONITOR, clock)
    for _ in range(40):
        with contextlib.suppress(OSError):
            agent.step()
        clock.advance(1)
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    assert gaps == sorted(gaps) and gaps[0] == 2 and gaps[-1] >= 8


def test_the_tag_channel_publishes_far_less_often(tmp_path):
    counts = {}
    for policy in (TO_THE_MONITOR, INTO_TAGS):
        clock, sent = Clock(), []
        agent, host = _agent(tmp_path / policy.__repr__()[:20], sent.append, policy, clock)
        for second in range(3600):  # an hour of a busy node whose free shares change often
            host.busy()
            host.free_gpus = (second // 3) % 2 * 0.5
            agent.step()
            clock.advance(1)
        counts[policy] = len(sent)
    limit = 3600 / TO_THE_MONITOR.min_interval_s + 2
    assert counts[INTO_TAGS] * 3 <= counts[TO_THE_MONITOR] <= limit


def test_becoming_idle_goes_out_once_it_has_settled(tmp_path):
    clock, sent = Clock(), []
    agent, host = _agent(tmp_path, sent.append, TO_THE_MONITOR, clock)
    host.busy()
    agent.step()
    clock.advance(5)
    host.idle()
    assert agent.step() is None  # just idle: a short gap between tasks, maybe
    clock.advance(TO_THE_MONITOR.settle_s)
    assert agent.step().idle_since == host.idle_since
    assert len(sent) == 2
