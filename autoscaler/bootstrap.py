"""How a launched node starts its agent: AWS user data (cloud-init) and the GCP startup script.

The script installs this package on the node, finds the node's own id from the cloud's
metadata service, and starts ``autoscale node agent`` for the cluster. A node type's
``bootstrap_before`` and ``bootstrap_after`` commands run around it.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

AWS_NODE_ID = (
    "TOKEN=$(curl -fsS -X PUT http://169.254.169.254/latest/api/token "
    '-H "X-aws-ec2-metadata-token-ttl-seconds: 300")\n'
    'NODE_ID=$(curl -fsS -H "X-aws-ec2-metadata-token: $TOKEN" '
    "http://169.254.169.254/latest/meta-data/instance-id)\n"
    "HOST=0\n"
)
GCP_NODE_ID = (
    'MD="http://metadata.google.internal/computeMetadata/v1/instance/attributes"\n'
    'NODE_ID=$(curl -fsS -H "Metadata-Flavor: Google" "$MD/instance-id")\n'
    'HOST=$(curl -fsS -H "Metadata-Flavor: Google" "$MD/agent-worker-number" || echo 0)\n'
)


def agent_script(
    cluster_name: str,
    provider_config: Mapping[str, Any],
    package: str,
    before: Sequence[str] = (),
    after: Sequence[str] = (),
    ray_start: bool = False,
) -> str:
    """The bash script a node runs at first boot."""
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
    if ray_start:
        agent.append("--ray-start")
    lines = [
        "#!/bin/bash",
        "set -euo pipefail",
        *before,
        f"python3 -m pip install --quiet {shlex.quote(package)}",
        GCP_NODE_ID.rstrip() if provider_config.get("type") == "gcp" else AWS_NODE_ID.rstrip(),
        f'nohup {shlex.join(agent)} --node-id "$NODE_ID" --host "$HOST" '
        ">>/var/log/accel-autoscaler-agent.log 2>&1 &",
        *after,
    ]
    return "\n".join(lines) + "\n"


def with_agent(node_config: Mapping[str, Any], cloud: str, script: str) -> dict[str, Any]:
    """``node_config`` with the script as its boot script, unless the user set their own."""
    config = dict(node_config)
    if cloud == "aws":
        config.setdefault("UserData", script)
    else:
        metadata = dict(config.get("metadata") or {})
        metadata.setdefault("startup-script", script)
        config["metadata"] = metadata
    return config
