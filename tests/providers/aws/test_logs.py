"""`autoscale logs` on EC2 (moto's server): an owned node's console output, one clear error
for an instance of another cluster."""

from __future__ import annotations

from tests.autoscaler.test_cli_logs import logs, write
from tests.providers.aws.conftest import REGION, TAGS
from tests.providers.aws.test_console import MOTO_LAST_LINE


def test_an_owned_nodes_console_and_one_clear_error_for_others(
    tmp_path, make_provider, server_url, ami, monkeypatch
):
    monkeypatch.setenv("AUTOSCALE_STATE_DIR", str(tmp_path / "state"))
    node_config = {"InstanceType": "m5.large", "ImageId": ami}
    settings = {"type": "aws", "region": REGION, "endpoint_url": server_url}
    path = write(tmp_path, settings, {"gpu": {"node_config": node_config}})
    (node_id,) = make_provider("logs").create_node(node_config, TAGS, 1, "r1").node_ids
    (stranger,) = make_provider("other").create_node(node_config, TAGS, 1, "r2").node_ids

    shown = logs(path, node_id, "--tail", "1")
    assert shown.exit_code == 0, shown.output
    assert shown.output == MOTO_LAST_LINE + "\n"
    refused = logs(path, stranger)
    assert refused.exit_code == 1
    assert f"{stranger} is not a node of cluster logs (its nodes: {node_id})" in refused.output
