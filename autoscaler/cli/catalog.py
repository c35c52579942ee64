"""``autoscale catalog``: instance types, their accelerators, resources and prices."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from autoscaler.cli.output import print_json, print_table

if TYPE_CHECKING:
    from instance_catalog.catalog import Offer
    from instance_catalog.model import InstanceType

CLOUD_CHOICE = click.Choice(["aws", "gcp"])


@click.group()
def catalog() -> None:
    """Instance types on AWS and GCP: accelerators, resources, prices."""


def _price_fields(offer: Offer, region: str | None) -> dict[str, Any]:
    return {
        "price_per_hour": offer.price(region),
        "spot_price_per_hour": offer.price(region, spot=True),
        "price_region": region or _cheapest_region(offer.instance_type),
    }


def _cheapest_region(entry: InstanceType) -> str | None:
    priced = [(p.on_demand, r) for r, p in entry.prices.items() if p.on_demand is not None]
    return min(priced)[1] if priced else None


def offer_dict(offer: Offer, region: str | None) -> dict[str, Any]:
    entry = offer.instance_type
    accelerator = offer.accelerator
    data: dict[str, Any] = {
        "instance_type": offer.label,
        "cloud": entry.cloud,
        "vcpus": entry.vcpus,
        "memory_mib": entry.memory_mib,
        "accelerator": accelerator.to_dict() if accelerator else None,
        "resources": offer.resources(),
        **_price_fields(offer, region),
        "regions": list(entry.regions),
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
            f"{entry.name} is not offered in {region}; regions: {', '.join(entry.regions)}"
        )
    data = offer_dict(Offer(entry), region)
    if as_json:
        print_json(data)
        return
    rows = [(k, v) for k, v in data.items() if k not in ("resources", "accelerator", "regions")]
    if data["accelerator"]:
        rows += [(f"accelerator.{k}", v) for k, v in data["accelerator"].items()]
    rows += [(f"resources.{k}", v) for k, v in data["resources"].items()]
    rows.append(("regions", ", ".join(data["regions"])))
    print_table(entry.name, ["field", "value"], rows)


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
        print_json([offer_dict(offer, region) for offer in offers])
        return
    if not offers:
        click.echo("No instance types match.")
        return
    print_table(
        "Instance types by price" + (f" in {region}" if region else " (cheapest region)"),
        ["cloud", "instance type", "accelerator", "vCPUs", "memory", "$/hour", "spot $/hour"],
        [_row(offer, region) for offer in offers],
    )


def _row(offer: Offer, region: str | None) -> tuple[Any, ...]:
    accelerator = offer.accelerator
    price, spot = offer.price(region), offer.price(region, spot=True)
    return (
        offer.instance_type.cloud,
        offer.label,
        f"{accelerator.name} x{accelerator.count:g}" if accelerator else None,
        offer.instance_type.vcpus,
        f"{offer.instance_type.memory_mib / 1024:g} GiB",
        f"{price:.4f}" if price is not None else None,
        f"{spot:.4f}" if spot is not None else None,
    )


@catalog.command()
@click.option("--cloud", type=CLOUD_CHOICE, required=True, help="Cloud to refresh.")
@click.option("--region", "regions", multiple=True, help="Only these regions (repeatable).")
@click.option("--endpoint-url", help="API endpoint (VPC endpoint, LocalStack, emulator).")
@click.option("--project", help="GCP project to read the facts of (--cloud gcp).")
def refresh(
    cloud: str, regions: tuple[str, ...], endpoint_url: str | None, project: str | None
) -> None:
    """Rebuild the EC2 or GCP catalog from the clouds' live APIs (needs credentials)."""
    if cloud == "gcp":
        _refresh_gcp(project, endpoint_url)
        return
    import boto3

    from instance_catalog.aws import DATA_FILE, unresolved_accelerators
    from instance_catalog.refresh import (
        CatalogRefreshError,
        snapshot_from_ec2,
        user_catalog_dir,
        write_snapshot,
    )

    session = boto3.session.Session()
    if session.get_credentials() is None:
        raise click.ClickException(
            "no AWS credentials found: set AWS_PROFILE or AWS_ACCESS_KEY_ID/"
            "AWS_SECRET_ACCESS_KEY (the bundled catalog keeps working without them)"
        )
    try:
        snapshot = snapshot_from_ec2(session, regions or None, endpoint_url=endpoint_url)
    except CatalogRefreshError as err:
        raise click.ClickException(str(err)) from err
    path = user_catalog_dir() / DATA_FILE
    write_snapshot(snapshot, path)
    click.echo(f"{len(snapshot['instance_types'])} instance types written to {path}")
    for name, cloud_name in unresolved_accelerators(snapshot["instance_types"]):
        click.echo(
            f"warning: {name}: accelerator {cloud_name!r} has no canonical name; "
            "add an entry to the override file",
            err=True,
        )


def _refresh_gcp(project: str | None, endpoint_url: str | None) -> None:
    from instance_catalog.gcp_refresh import SNAPSHOT_FILE
    from instance_catalog.refresh import user_catalog_dir, write_snapshot
    from providers.errors import ProviderError
    from providers.gcp.catalog_source import gcp_snapshot

    if not project:
        raise click.UsageError("--project is required with --cloud gcp")
    try:
        snapshot = gcp_snapshot({"project_id": project, "endpoint_url": endpoint_url})
    except ProviderError as err:
        raise click.ClickException(str(err)) from err
    path = user_catalog_dir() / SNAPSHOT_FILE
    write_snapshot(snapshot, path)
    click.echo(
        f"{len(snapshot['machine_types'])} machine types, "
        f"{len(snapshot['accelerator_types'])} accelerator types, "
        f"{len(snapshot['tpu_accelerator_types'])} TPU types written to {path}"
    )
