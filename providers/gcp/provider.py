"""The GCP node provider: routes each node config to its API's plugin (Cloud TPU for
``acceleratorType``/``acceleratorConfig``, Compute Engine for ``machineType``), so one
cluster may hold TPU slices and GPU VMs.

It learns where the cluster launches from ``provider_config["offerings"]`` (every node
type's instance type and zones, as ``ClusterConfig.provider_settings`` gives them): TPU zones
to watch, and whether Compute Engine is used at all (a TPU-only cluster never calls it).
Without that key (a node's own agent) both plugins are used. Which plugin owns a node id is
remembered from listings and creates; an id not seen yet is looked up in each.

What the cluster needs in the project besides nodes (service accounts, the head's custom role,
firewall rules: :mod:`providers.gcp.account`) is made here, for both plugins, and every launch
gets the service account of its node kind and the cluster's network tag.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from accel.tpu_generations import parse_pod_type
from providers.base import (
    NODE_KIND_WORKER,
    TAG_NODE_KIND,
    AccountResource,
    LaunchResult,
    NodeProvider,
    ProviderNode,
)
from providers.gcp.account import GcpAccount
from providers.gcp.cloud import GcpCloud
from providers.gcp.tpu.slices import tpu_slice_type

_PLUGINS = {
    "tpu": "providers.gcp.tpu.provider:GcpTpuNodeProvider",
    "compute": "providers.gcp.compute.provider:GceNodeProvider",
}


class GcpNodeProvider(NodeProvider):
    """Cloud TPU slices and Compute Engine VMs of one cluster in one project."""

    cloud = GcpCloud()

    def __init__(self, provider_config: Mapping[str, Any], cluster_name: str) -> None:
        super().__init__(provider_config, cluster_name)
        known = provider_config.get("offerings")
        tpu = [o for o in known or () if _is_tpu(o)]
        self.plugins: dict[str, NodeProvider] = {}
        if known is None or tpu:
            zones = [zone for offering in tpu for zone in offering.get("zones", ())]
            self.plugins["tpu"] = _load("tpu")(provider_config, cluster_name, zones=zones)
        if known is None or len(tpu) < len(known):
            self.plugins["compute"] = _load("compute")(provider_config, cluster_name)
        self._owner: dict[str, NodeProvider] = {}
        self._account: GcpAccount | None = None

    @property
    def account(self) -> GcpAccount:
        """The cluster's service accounts, custom role and firewall rules."""
        if self._account is None:
            self._account = GcpAccount(self.provider_config, self.cluster_name)
        return self._account

    def _plugin_for(self, node_config: Mapping[str, Any]) -> NodeProvider:
        kind = "tpu" if tpu_slice_type(node_config) is not None else "compute"
        if kind not in self.plugins:
            self.plugins[kind] = _load(kind)(self.provider_config, self.cluster_name)
        return self.plugins[kind]

    # Listing ------------------------------------------------------------------------------
    def nodes(self, tag_filters: Mapping[str, str] | None = None) -> list[ProviderNode]:
        found = []
        for plugin in self.plugins.values():
            listed = plugin.nodes(tag_filters)
            self._owner.update((node.id, plugin) for node in listed)
            found.extend(listed)
        return sorted(found, key=lambda node: node.id)

    def node(self, node_id: str) -> ProviderNode | None:
        for plugin in self._candidates(node_id):
            found = plugin.node(node_id)
            if found is not None:
                self._owner[node_id] = plugin
                return found
        return None

    # Changing -----------------------------------------------------------------------------
    def create_node(
        self,
        node_config: Mapping[str, Any],
        tags: Mapping[str, str],
        count: int,
        launch_request_id: str,
        all_or_nothing: bool = False,
    ) -> LaunchResult:
        plugin = self._plugin_for(node_config)
        kind = tags.get(TAG_NODE_KIND, NODE_KIND_WORKER)
        node_config = {**self.account.launch_settings(node_config, kind), **node_config}
        result = plugin.create_node(node_config, tags, count, launch_request_id, all_or_nothing)
        self._owner.update((node_id, plugin) for node_id in result.node_ids)
        return result

    def terminate_nodes(self, node_ids: Sequence[str]) -> list[str]:
        acted = []
        for plugin, ids in self._by_plugin(node_ids).items():
            acted.extend(plugin.terminate_nodes(ids))
        return acted

    def set_tags(self, node_ids: Iterable[str], tags: Mapping[str, str]) -> None:
        for plugin, ids in self._by_plugin(list(node_ids)).items():
            plugin.set_tags(ids, tags)

    def console_output(self, node_id: str) -> str | None:
        for plugin, ids in self._by_plugin([node_id]).items():
            return plugin.console_output(ids[0])
        return None

    def preflight(self, node_configs: Mapping[str, Mapping[str, Any]]) -> list[str]:
        grouped: dict[int, tuple[NodeProvider, dict]] = {}
        for name, node_config in node_configs.items():
            plugin = self._plugin_for(node_config)
            grouped.setdefault(id(plugin), (plugin, {}))[1][name] = node_config
        return [
            problem for plugin, configs in grouped.values() for problem in plugin.preflight(configs)
        ]

    def prepare_account(
        self, node_configs: Mapping[str, Mapping[str, Any]], head_type: str | None
    ) -> list[AccountResource]:
        return self.account.prepare(node_configs, head_type)

    def account_resources(self) -> list[AccountResource]:
        return self.account.find()

    def purge_account(self) -> list[AccountResource]:
        return self.account.purge()

    # Routing ------------------------------------------------------------------------------
    def _candidates(self, node_id: str) -> list[NodeProvider]:
        known = self._owner.get(node_id)
        return [known] if known else list(self.plugins.values())

    def _by_plugin(self, node_ids: Sequence[str]) -> dict[NodeProvider, list[str]]:
        """Owned ids by the plugin that owns them (ids owned by none are left out)."""
        grouped: dict[NodeProvider, list[str]] = {}
        for node_id in dict.fromkeys(node_ids):
            if node_id in self._owner or self.node(node_id) is not None:
                grouped.setdefault(self._owner[node_id], []).append(node_id)
        return grouped


def _is_tpu(offering: Mapping[str, Any]) -> bool:
    return parse_pod_type(str(offering.get("instance_type", ""))) is not None


def _load(kind: str) -> type[NodeProvider]:
    module_name, _, name = _PLUGINS[kind].partition(":")
    return getattr(importlib.import_module(module_name), name)
