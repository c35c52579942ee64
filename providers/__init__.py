"""Node providers: one small contract (``providers.base``) and a plugin per cloud.

``get_provider`` picks the plugin from ``provider.type``. With ``emulator: true`` the
embedded local cloud is started (or reused) first and the same plugin talks to it over HTTP,
so nothing in a cloud's code path branches on the emulator.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from providers.base import NodeProvider

PLUGINS = {
    "aws": "providers.aws:AwsNodeProvider",
    "gcp": "providers.gcp_tpu:GcpTpuNodeProvider",
}


class UnknownProviderError(ValueError):
    pass


def get_provider(provider_config: Mapping[str, Any], cluster_name: str) -> NodeProvider:
    """The plugin for ``provider_config["type"]``, bound to ``cluster_name``."""
    kind = provider_config.get("type")
    if kind not in PLUGINS:
        raise UnknownProviderError(
            f"provider.type {kind!r} is not supported; known types: {', '.join(sorted(PLUGINS))}"
        )
    config = dict(provider_config)
    if config.get("emulator"):
        from providers.emulator import ensure_emulator

        config["endpoint_url"] = ensure_emulator(kind, cluster_name)
        # The local cloud accepts any credentials; a machine without an account has none.
        if kind == "aws":
            config.setdefault("aws_access_key_id", "emulator")
            config.setdefault("aws_secret_access_key", "emulator")
    module_name, _, class_name = PLUGINS[kind].partition(":")
    plugin = getattr(importlib.import_module(module_name), class_name)
    return plugin(config, cluster_name)
