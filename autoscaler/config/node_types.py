"""A configured node type as the planner sees it: resources, price and offering filled from
the catalog through the cloud's own reading of its node_config."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from accel.family_rules import ACCELERATOR_RESOURCES
from autoscaler.config.errors import ConfigProblem
from autoscaler.config.schema import NodeTypeConfig
from autoscaler.planner.model import NodeType
from instance_catalog.catalog import Offer
from instance_catalog.resources import resources_for
from providers.base import ON_DEMAND, SPOT, Cloud
from providers.errors import InvalidConfigError


def build_node_type(
    name: str,
    spec: NodeTypeConfig,
    cloud: Cloud,
    provider_config: Mapping[str, Any],
    warnings: list[str],
) -> NodeType:
    """``spec`` filled from the catalog; user-given resources win per key.

    Raises :class:`ConfigProblem`; appends what the user should know to ``warnings``.
    """
    path = f"available_node_types.{name}"
    node_config = launch_config(spec)
    try:
        with _field_problems(path, spec):
            offer = cloud.catalog_offer(node_config, provider_config)
    except ConfigProblem as problem:
        if spec.resources is None:
            raise
        warnings.append(f"{problem}; using the given resources")
        offer = None
    try:
        with _field_problems(path, spec):
            offering = cloud.offering(node_config, provider_config)
    except ConfigProblem:
        if offer is not None or spec.resources is None:
            raise
        offering = None  # an instance type the catalog does not know: warned above
    if offering is not None:
        warnings.extend(f"{path}.node_config: {note}" for note in offering.notes)
    if offer is None and spec.resources is None:
        raise ConfigProblem(
            f"{path}.node_config.{cloud.instance_type_field}",
            "missing, so resources cannot be filled from the catalog (give one, or resources)",
        )
    hosts, per_host, head = _catalog_shape(offer)
    resources = {**per_host, **(spec.resources or {})}
    market = offering.market if offering else (spec.market or ON_DEMAND)
    region = offering.region if offering else cloud.price_region(provider_config)
    unlaunchable = offer.unavailable if offer else None
    if unlaunchable:
        warnings.append(f"{path}: {offer.label} cannot be launched: {unlaunchable}")
    return NodeType(
        name=name,
        resources=resources,
        available=unlaunchable is None,
        unavailable_reason=unlaunchable,
        price=_price(path, spec, offer, region, market, warnings),
        min_workers=spec.min_workers,
        max_workers=spec.max_workers,
        hosts=hosts,
        head_resources=head,
        devices=device_counts(resources),
        market=market,
        priority=spec.priority,
        offering=offering,
    )


def launch_config(spec: NodeTypeConfig) -> dict[str, Any]:
    """The node_config a launch sends its plugin: the YAML's, with the node type's own
    ``market``, ``region`` and ``availability_zone`` (the cloud reads them over its own)."""
    node_config = dict(spec.node_config)
    for key in NODE_TYPE_LAUNCH_KEYS:
        value = getattr(spec, key)
        if value:
            node_config[key] = value
    return node_config


NODE_TYPE_LAUNCH_KEYS = ("market", "region", "availability_zone")
"""Node-type keys :func:`launch_config` hands the cloud inside its node_config."""


@contextmanager
def _field_problems(path: str, spec: NodeTypeConfig) -> Iterator[None]:
    """A cloud's node_config error as a problem at its field: under the node type ``path``'s
    node_config, at the node type's own key where the YAML set it there (``market``), or in
    the provider section, when the field says so."""
    try:
        yield
    except InvalidConfigError as err:
        if err.field and err.field.startswith("provider."):
            raise ConfigProblem(err.field, err.raw_message) from None
        head = (err.field or "").split(".", 1)[0]
        own = head in NODE_TYPE_LAUNCH_KEYS and head not in spec.node_config
        where = path if own else f"{path}.node_config"
        field = f".{err.field}" if err.field else ""
        raise ConfigProblem(f"{where}{field}", err.raw_message) from None


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
    price = offer.price(region, spot=market == SPOT) if offer else None
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
