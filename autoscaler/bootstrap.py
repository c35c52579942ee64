"""How a launched node starts its agent: the script every cloud runs at first boot (each
cloud's plugin says how it is delivered and how a node learns its own id).

The script installs this package on the node, finds the node's own id from the cloud's
metadata service, and starts ``autoscale node agent`` for the cluster. A node type's
``bootstrap_before`` and ``bootstrap_after`` commands run around it. With ``ray_start`` a
worker joins the Ray cluster, and the head starts it and runs ``autoscale monitor`` on it.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from autoscaler.ray_cluster.join import HEAD_PORT

CONFIG_DIR = "/etc/accel-autoscaler"
HEREDOC = "ACCEL_AUTOSCALER_CLUSTER_YAML"


def agent_script(
    cluster_name: str,
    provider_config: Mapping[str, Any],
    node_identity_script: str,
    package: str,
    before: Sequence[str] = (),
    after: Sequence[str] = (),
    ray_start: bool = False,
    node_type: str = "",
    ray_address: str | None = None,
    head_config: str | None = None,
) -> str:
    """The bash script a node runs at first boot; ``node_identity_script`` (the cloud's) sets
    ``NODE_ID`` and ``HOST``. With ``ray_start`` the agent runs ``ray start`` as
    ``node_type``, joining ``ray_address``; a head (``head_config``: its cluster YAML) starts
    the Ray head instead, and ``autoscale monitor`` against it."""
    config = {k: v for k, v in provider_config.items() if v is not None and k != "emulator"}
    agent = [
        "autoscale",
        "node",
        "agent",
        "--cluster",
        cluster_name,
        "--provider-config",
        json.dumps(config, sort_keys=True),
    ]
    ray_env = []
    if ray_start:
        agent.append("--ray-start")
        ray_env.append(f"export RAY_NODE_TYPE_NAME={shlex.quote(node_type)}")
        if ray_address and head_config is None:
            ray_env.append(f"export RAY_ADDRESS={shlex.quote(ray_address)}")
    lines = [
        "#!/bin/bash",
        "set -euo pipefail",
        *before,
        f"python3 -m pip install --quiet {shlex.quote(package)}",
        node_identity_script.rstrip(),
        *ray_env,
        f'nohup {shlex.join(agent)} --node-id "$NODE_ID" --host "$HOST" '
        ">>/var/log/accel-autoscaler-agent.log 2>&1 &",
        *(_head_monitor(head_config) if head_config is not None and ray_start else []),
        *after,
    ]
    return "\n".join(lines) + "\n"


def _head_monitor(cluster_yaml: str) -> list[str]:
    """Write the cluster YAML on the head and run the monitor against the local Ray head."""
    return [
        f"mkdir -p {CONFIG_DIR}",
        f"cat > {CONFIG_DIR}/cluster.yaml <<'{HEREDOC}'",
        cluster_yaml.rstrip(),
        HEREDOC,
        "HEAD_IP=$(hostname -I | awk '{print $1}')",
        f"nohup autoscale monitor {CONFIG_DIR}/cluster.yaml "
        f'--ray-address "$HEAD_IP:{HEAD_PORT}" >>/var/log/accel-autoscaler-monitor.log 2>&1 &',
    ]
