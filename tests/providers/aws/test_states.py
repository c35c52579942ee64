"""EC2 instance states as the provider contract's, with EC2's own reason."""

from __future__ import annotations

from providers.base import CLOUD_RUNNING, CLOUD_STOPPED
from tests.providers.aws.conftest import TAGS, node_config


def test_a_stopped_instance_carries_ec2s_state_reason(provider, ami):
    (node_id,) = provider.create_node(node_config(ami), TAGS, 1, "req-1").node_ids
    (running,) = provider.nodes()
    assert (running.state, running.cloud_status, running.status_message) == (
        CLOUD_RUNNING,
        "running",
        "",
    )
    provider.ec2.stop_instances(InstanceIds=[node_id])
    (stopped,) = provider.nodes()
    assert stopped.state == CLOUD_STOPPED and stopped.cloud_status == "stopped"
    assert "shutdown" in stopped.status_message.lower()
