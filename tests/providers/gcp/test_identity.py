"""A GCP node's agent reports as ``zone/name`` (its identity script); the head's report
endpoint files the report under the plugins' node id, the name."""

from __future__ import annotations

import json
import time

from autoscaler.report import NodeReport
from autoscaler.report_channel import sign
from autoscaler.report_server import ReportServer
from autoscaler.state import StateStore
from providers import cloud_for


def test_a_zone_qualified_report_lands_on_the_node(tmp_path):
    gcp = cloud_for("gcp")
    assert gcp.node_id_of("us-central1-a/alpha-1f2e-0") == "alpha-1f2e-0"
    assert cloud_for("aws").node_id_of("i-0abc") == "i-0abc"
    server = ReportServer(tmp_path / "state.db", "s3cret", node_id_of=gcp.node_id_of).start()
    body = json.dumps(
        {
            "node_id": "us-central1-a/alpha-1f2e-0",
            "host": 0,
            "report": NodeReport({"CPU": 4}).to_json(),
        }
    ).encode()
    stamp = str(time.time())
    assert server.accept(stamp, sign("s3cret", stamp, body), body) == 204
    server.stop()
    assert set(StateStore(tmp_path / "state.db").reports()) == {"alpha-1f2e-0"}
