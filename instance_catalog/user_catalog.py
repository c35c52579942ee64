"""The user's catalog folder: refreshed data that takes precedence over the bundled snapshot."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

USER_CATALOG_ENV_VAR = "AUTOSCALE_CATALOG_DIR"


def user_catalog_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where refreshed data lives: ``AUTOSCALE_CATALOG_DIR`` or a per-user data folder."""
    env = os.environ if env is None else env
    if env.get(USER_CATALOG_ENV_VAR):
        return Path(env[USER_CATALOG_ENV_VAR])
    from platformdirs import user_data_dir

    return Path(user_data_dir("accel-autoscaler")) / "catalog"


def write_json(document: Mapping[str, Any], path: Path) -> None:
    """Write compact JSON atomically, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(document, separators=(",", ":")) + "\n")
    tmp.replace(path)
