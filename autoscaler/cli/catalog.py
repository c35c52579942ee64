"""``autoscale catalog``: instance types, their accelerators, resources and prices."""

from __future__ import annotations

from collections import Counter
from datetime import date, datetime, timezone
from typing import TYPE_CHECKING, Any

import click

from accel.user_input import clip
from autoscaler.cli.output import print_json, print_table
from instance_catalog.model import CLOUDS
from instance_catalog.prices import STALE_AFTER_DAYS, refresh_hint

if TYPE_CHECKING:
    from instance_catalog.catalog import Offer
    from instance_catalog.model import InstanceType

CLOUD_CHOICE = click.Choice(CLOUDS)


@click.group()
def catalog() -> None:
    """Instance types on AWS and GCP: accelerators, resources, prices."""


def _price_fields(offer: Offer, region: str | None, today: date) -> dict[str, Any]:
    """Prices in ``region`` (else the cheapest), each with its source and the day it is
    from, and warnings where a price is old, of unknown date or flagged."""
    from instance_catalog.prices import describe_source, price_warnings

    price_region = region or _cheapest_region(offer.instance_type)
    price = offer.instance_type.prices.get(price_region) if price_region else None
    as_of = price.as_of if price else None
    return {
        "price_per_hour": offer.price(region),
        "spot_price_per_hour": offer.price(region, spot=True),
        "price_region": price_region,
        "price_as_of": as_of,
        "price_age_days": (today - date.fromisoformat(as_of)).days if as_of else None,
        "price_source": describe_source(price.source) if price else None,
        "spot_price_as_of": price.spot_as_of if price else None,
        "price_warnings": price_warnings(
            price, offer.instance_type.cloud, today, f"price in {price_region}"
        ),
    }


def _today() -> date:
    return datetime.now(timezone.utc).date()


def _cheapest_region(entry: InstanceType) -> str | None:
    priced = [(p.on_demand, r) for r, p in entry.prices.items() if p.on_demand is not None]
    return min(priced)[1] if priced else None


def offer_dict(offer: Offer, region: str | None, today: date) -> dict[str, Any]:
    entry = offer.instance_type
    accelerator = offer.accelerator
    data: dict[str, Any] = {
        "instance_type": offer.label,
        "cloud": entry.cloud,
        "vcpus": entry.vcpus,
        "memory_mib": entry.memory_mib,
        "architectures": list(entry.architectures),
        "network": entry.network,
        "accelerator": accelerator.to_dict() if accelerator else None,
        "resources": offer.resources(),
        **_price_fields(offer, region, today),
        "regions": list(entry.regions),
        "launchable": offer.unavailable is None,
        "unavailable_reason": offer.unavailable,
    }
    if entry.tpu is not None:
        data.update(
            chips=entry.tpu.chips,
            hosts=entry.tpu.hosts,
            chips_per_host=entry.tpu.chips_per_host,
            topology=entry.tpu.topology,
        )
    return data


def _load():
    from instance_catalog.catalog import load_catalog

    return load_catalog()


@catalog.command()
@click.argument("instance_type")
@click.option("--cloud", type=CLOUD_CHOICE, help="Only look on this cloud.")
@click.option("--region", help="Price in this region (default: the cheapest region).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show(instance_type: str, cloud: str | None, region: str | None, as_json: bool) -> None:
    """One instance type: accelerators, the resources its nodes advertise, price."""
    from instance_catalog.catalog import Offer, UnknownInstanceTypeError

    try:
        entry = _load().get(instance_type, cloud)
    except UnknownInstanceTypeError as err:
        raise click.ClickException(str(err)) from err
    if region is not None and region not in entry.regions:
        raise click.ClickException(
            f"{entry.name} is not offered in {clip(region)}; regions: {', '.join(entry.regions)}"
        )
    data = offer_dict(Offer(entry), region, _today())
    if as_json:
        print_json(data)
        return
    rows = [
        (k, ", ".join(v) if k == "architectures" else v)
        for k, v in data.items()
        if k not in ("resources", "accelerator", "regions", "price_warnings")
    ]
    if data["accelerator"]:
        rows += [(f"accelerator.{k}", v) for k, v in data["accelerator"].items()]
    rows += [(f"resources.{k}", v) for k, v in data["resources"].items()]
    rows.append(("regions", ", ".join(data["regions"])))
    print_table(entry.name, ["field", "value"], rows)
    for warning in data["price_warnings"]:
        click.echo(f"warning: {warning}", err=True)
    if offer_unavailable := data["unavailable_reason"]:
        click.echo(f"warning: {entry.name} cannot be launched: {offer_unavailable}", err=True)


@catalog.command(name="list")
@click.option("--cloud", type=CLOUD_CHOICE, help="Only this cloud.")
@click.option("--accelerator", "accelerator_text", help="NAME[:COUNT], e.g. a100-80gb:8.")
@click.option("--region", help="Only types offered here, priced here.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_(cloud: str | None, accelerator_text: str | None, region: str | None, as_json: bool):
    """Instance types sorted by price (cheapest first)."""
    from accel.names import UnknownAcceleratorTypeError
    from instance_catalog.catalog import AcceleratorQuery

    query = None
    if accelerator_text:
        try:
            query = AcceleratorQuery.parse(accelerator_text)
        except (UnknownAcceleratorTypeError, ValueError) as err:
            raise click.UsageError(str(err)) from err
    offers = _load().offers(cloud=cloud, accelerator=query, region=region)
    if as_json:
        today = _today()
        print_json([offer_dict(offer, region, today) for offer in offers])
        return
    if not offers:
        click.echo("No instance types match.")
        return
    today = _today()
    print_table(
        "Instance types by price" + (f" in {region}" if region else " (cheapest region)"),
        [
            "cloud",
            "instance type",
            "accelerator",
            "vCPUs",
            "memory",
            "$/hour",
            "spot $/hour",
            "price as of",
        ],
        [_row(offer, region, today) for offer in offers],
    )
    unlaunchable = Counter(offer.unavailable for offer in offers if offer.unavailable)
    for reason, count in sorted(unlaunchable.items()):
        click.echo(f"warning: {count} of these cannot be launched: {reason}", err=True)
    doubtful = sum(1 for offer in offers if _price_fields(offer, region, today)["price_warnings"])
    if doubtful:
        click.echo(
            f"warning: {doubtful} of these prices are older than {STALE_AFTER_DAYS} days, of "
            "unknown date or flagged as anomalies (`catalog show TYPE` says which); "
            + refresh_hint({offer.instance_type.cloud for offer in offers}),
            err=True,
        )


def _row(offer: Offer, region: str | None, today: date) -> tuple[Any, ...]:
    accelerator = offer.accelerator
    price, spot = offer.price(region), offer.price(region, spot=True)
    fields = _price_fields(offer, region, today)
    as_of = fields["price_as_of"] or ("unknown" if price is not None else None)
    return (
        offer.instance_type.cloud,
        offer.label,
        f"{accelerator.name} x{accelerator.count:g}" if accelerator else None,
        offer.instance_type.vcpus,
        f"{offer.instance_type.memory_mib / 1024:g} GiB",
        f"{price:.4f}" if price is not None else None,
        f"{spot:.4f}" if spot is not None else None,
        f"{as_of}{' (!)' if fields['price_warnings'] else ''}" if as_of else None,
    )


@catalog.command()
@click.option("--cloud", type=CLOUD_CHOICE, required=True, help="Cloud to refresh.")
@click.option("--region", "regions", multiple=True, help="Only these regions (repeatable).")
@click.option("--prices", is_flag=True, help="Refresh on-demand and spot prices, not types.")
@click.option("--endpoint-url", help="Compute API endpoint (VPC endpoint, LocalStack, emulator).")
@click.option("--pricing-endpoint-url", help="Price list API endpoint (with --prices).")
@click.option("--project", help="The project to read the facts of (clouds with projects).")
def refresh(
    cloud: str,
    regions: tuple[str, ...],
    prices: bool,
    endpoint_url: str | None,
    pricing_endpoint_url: str | None,
    project: str | None,
) -> None:
    """Rebuild a cloud's catalog, or its prices, from its live APIs (needs credentials)."""
    from instance_catalog.live_refresh import RefreshRequest
    from instance_catalog.refresh import CatalogRefreshError
    from providers import cloud_for

    request = RefreshRequest(regions, prices, endpoint_url, pricing_endpoint_url, project)
    try:
        report = cloud_for(cloud).refresh_catalog(request)
    except CatalogRefreshError as err:
        raise click.ClickException(str(err)) from err
    for line in report.lines:
        click.echo(line)
    for warning in report.warnings:
        click.echo(f"warning: {warning}", err=True)
