"""A configured node type as the planner sees it: resources and price filled from the catalog."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from accel.families import ACCELERATOR_RESOURCES
from autoscaler.config.errors import ConfigProblem
from autoscaler.config.offers import INSTANCE_KEY, catalog_offer
from autoscaler.config.schema import NodeTypeConfig, ProviderConfig
from autoscaler.planner.model import NodeType
from instance_catalog.catalog import Offer
from instance_catalog.resources import resources_for


def build_node_type(
    name: str, spec: NodeTypeConfig, provider: ProviderConfig, warnings: list[str]
) -> NodeType:
    """``spec`` filled from the catalog; user-given resources win per key.

    Raises :class:`ConfigProblem`; appends what the user should know to ``warnings``.
    """
    path = f"available_node_types.{name}"
    try:
        offer = catalog_offer(spec.node_config, provider.type, f"{path}.node_config")
    except ConfigProblem as problem:
        if spec.resources is None:
            raise
        warnings.append(f"{problem}; using the given resources")
        offer = None
    if offer is None and spec.resources is None:
        raise ConfigProblem(
            f"{path}.node_config.{INSTANCE_KEY[provider.type]}",
            "missing, so resources cannot be filled from the catalog (give one, or resources)",
        )
    hosts, per_host, head = _catalog_shape(offer)
    resources = {**per_host, **(spec.resources or {})}
    market = spec.market or infer_market(spec.node_config)
    return NodeType(
        name=name,
        resources=resources,
        price=_price(path, spec, offer, provider.price_region(), market, warnings),
        min_workers=spec.min_workers,
        max_workers=spec.max_workers,
        hosts=hosts,
        head_resources=head,
        devices=device_counts(resources),
        market=market,
        priority=spec.priority,
    )


def _catalog_shape(offer: Offer | None) -> tuple[int, dict[str, float], dict[str, float]]:
    """(hosts, per-host resources, host 0's extra resources) of ``offer``."""
    if offer is None:
        return 1, {}, {}
    entry = offer.instance_type
    if entry.tpu is None:
        return 1, offer.resources(), {}
    per_host = resources_for(entry, tpu_worker=1)
    head = {k: v for k, v in resources_for(entry).items() if k not in per_host}
    return entry.tpu.hosts, per_host, head


def _price(
    path: str,
    spec: NodeTypeConfig,
    offer: Offer | None,
    region: str | None,
    market: str,
    warnings: list[str],
) -> float | None:
    if spec.cost_per_hour is not None:
        return spec.cost_per_hour
    price = offer.price(region, spot=market == "spot") if offer else None
    if price is None:
        what = f"no {market} catalog price for {offer.label}" if offer else "price unknown"
        where = f" in {region}" if offer and region else ""
        warnings.append(f"{path}: {what}{where}; set cost_per_hour")
    return price


def device_counts(resources: Mapping[str, float]) -> dict[str, int]:
    """Devices per accelerator resource on one host (one per NeuronCore; a fraction is one)."""
    return {
        name: max(1, math.ceil(quantity))
        for name, quantity in resources.items()
        if name in ACCELERATOR_RESOURCES and quantity > 0
    }


def infer_market(node_config: Mapping[str, Any]) -> str:
    """``spot`` when node_config asks the cloud for spot or preemptible capacity."""

    def section(key: str) -> Mapping[str, Any]:
        value = node_config.get(key)
        return value if isinstance(value, Mapping) else {}

    aws = section("InstanceMarketOptions")
    gce = section("scheduling")
    tpu = section("schedulingConfig")
    spot = (
        str(aws.get("MarketType", "")).lower() == "spot"
        or gce.get("preemptible") is True
        or str(gce.get("provisioningModel", "")).upper() == "SPOT"
        or tpu.get("preemptible") is True
        or tpu.get("spot") is True
    )
    return "spot" if spot else "on-demand"
