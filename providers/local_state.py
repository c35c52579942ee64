"""Where a cluster keeps local state (demand, launch intents, events, emulator records)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

STATE_DIR_ENV_VAR = "AUTOSCALE_STATE_DIR"


def cluster_state_dir(cluster_name: str, env: Mapping[str, str] | None = None) -> Path:
    """``$AUTOSCALE_STATE_DIR/<cluster>``, by default under the user's state directory."""
    env = os.environ if env is None else env
    if env.get(STATE_DIR_ENV_VAR):
        base = Path(env[STATE_DIR_ENV_VAR])
    else:
        from platformdirs import user_state_dir

        base = Path(user_state_dir("accel-autoscaler")) / "clusters"
    return base / re.sub(r"[^A-Za-z0-9_.-]", "_", cluster_name)
