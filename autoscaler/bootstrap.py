"""How a launched node starts its agent: the script every cloud runs at first boot (each
cloud's plugin says how it is delivered and how a node learns its own id).

The script installs this package on the node, finds the node's own id from the cloud's
metadata service, and starts ``autoscale node agent`` for the cluster. A node type's
``bootstrap_before`` and ``bootstrap_after`` commands run around it.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from typing import Any


def agent_script(
    cluster_name: str,
    provider_config: Mapping[str, Any],
    node_identity_script: str,
    package: str,
    before: Sequence[str] = (),
    after: Sequence[str] = (),
    ray_start: bool = False,
) -> str:
    """The bash script a node runs at first boot; ``node_identity_script`` (the cloud's) sets
    ``NODE_ID`` and ``HOST``."""
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
        node_identity_script.rstrip(),
        f'nohup {shlex.join(agent)} --node-id "$NODE_ID" --host "$HOST" '
        ">>/var/log/accel-autoscaler-agent.log 2>&1 &",
        *after,
    ]
    return "\n".join(lines) + "\n"
