"""Node providers: one small contract (``providers.base``) and a plugin per cloud.

A cloud is one package here with two faces: a :class:`~providers.base.Cloud` (what the
autoscaler knows offline: node_config keys, boot script, tag limits, emulator) and a
:class:`~providers.base.NodeProvider` (the cloud's API). Adding a cloud is adding a package
and one line to :data:`CLOUDS`.

``get_provider`` picks the plugin from ``provider.type``. With ``emulator: true`` the
local cloud (``providers.local``) is started (or reused) first and the same plugin talks to
it over HTTP, so nothing in a cloud's code path branches on the emulator. On the local
cloud's simulated hosts, ``$AUTOSCALE_LOCAL_CLOUD_URL`` names it.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from functools import cache
from typing import Any

from providers.base import Cloud, NodeProvider

CLOUDS = {
    "aws": "providers.aws.cloud:AwsCloud",
    "gcp": "providers.gcp.cloud:GcpCloud",
}
"""``provider.type`` -> the cloud's offline surface."""


LOCAL_CLOUD_URL_ENV = "AUTOSCALE_LOCAL_CLOUD_URL"
"""Set on the local cloud's simulated hosts: the local cloud's API, which processes on the
host (the agent, the head's monitor) call as a VM's processes call their cloud's."""


class UnknownProviderError(ValueError):
    pass


@cache
def cloud_for(kind: str) -> Cloud:
    """The offline surface of cloud ``kind`` (no cloud SDK is imported)."""
    if kind not in CLOUDS:
        raise UnknownProviderError(
            f"provider.type {str(kind)[:40]!r} is not supported; "
            f"known types: {', '.join(sorted(CLOUDS))}"
        )
    return _load(CLOUDS[kind])()


def get_provider(provider_config: Mapping[str, Any], cluster_name: str) -> NodeProvider:
    """The plugin for ``provider_config["type"]``, bound to ``cluster_name``."""
    kind = provider_config.get("type")
    cloud = cloud_for(kind)
    config = dict(provider_config)
    local = os.environ.get(LOCAL_CLOUD_URL_ENV)
    if config.get("emulator") or local:
        if not local:
            from providers.local.servers import ensure_emulator

            local = ensure_emulator(kind, cluster_name)
        config["endpoint_url"] = local
        for key, value in cloud.emulator_settings().items():
            config.setdefault(key, value)
    return _load(cloud.provider_class)(config, cluster_name)


def _load(path: str) -> Any:
    module_name, _, name = path.partition(":")
    return getattr(importlib.import_module(module_name), name)
