"""What a local-cloud instance booted with, read back from the local cloud's own API as the
instance would see it: its boot script (EC2 ``UserData``, a Compute Engine VM's or a Cloud TPU
node's ``startup-script``) and the metadata service's answers (its id, name, zone, address and
slice worker number) for the cloud's node identity script."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from providers.base import ProviderNode


@dataclass(frozen=True)
class BootData:
    script: str | None
    """None: the instance has no boot script (nothing to run)."""
    metadata: dict[str, str]
    """Metadata path suffix -> answer, for the ``curl`` stand-in."""


def boot_data(settings: Mapping[str, Any], node: ProviderNode, host: int, ip: str) -> BootData:
    """The boot data of host ``host`` of ``node``, from the local cloud at
    ``settings["endpoint_url"]`` (``settings``: the provider section as the plugin gets it)."""
    kind = settings["type"]
    if kind == "aws":
        return _ec2(settings, node, ip)
    if kind == "gcp":
        return _gcp(settings, node, host, ip)
    raise ValueError(f"the local cloud boots no {kind!r} instances")


def _ec2(settings: Mapping[str, Any], node: ProviderNode, ip: str) -> BootData:
    import boto3

    ec2 = boto3.client(
        "ec2",
        endpoint_url=settings["endpoint_url"],
        region_name=settings.get("region") or "us-east-1",
        aws_access_key_id=settings.get("aws_access_key_id", "local"),
        aws_secret_access_key=settings.get("aws_secret_access_key", "local"),
    )
    answer = ec2.describe_instance_attribute(InstanceId=node.id, Attribute="userData")
    encoded = (answer.get("UserData") or {}).get("Value")
    script = base64.b64decode(encoded).decode(errors="replace") if encoded else None
    metadata = {
        "/latest/api/token": "local-cloud-token",
        "/latest/meta-data/instance-id": node.id,
        "/latest/meta-data/instance-type": node.instance_type,
        "/latest/meta-data/local-ipv4": ip,
        "/latest/meta-data/placement/availability-zone": node.zone or "",
    }
    return BootData(script, metadata)


def _gcp(settings: Mapping[str, Any], node: ProviderNode, host: int, ip: str) -> BootData:
    zone = node.zone or node.id.rpartition("/")[0]
    name = node.id.rpartition("/")[2]
    base = f"{str(settings['endpoint_url']).rstrip('/')}"
    project = settings["project_id"]
    vm = _get(f"{base}/compute/v1/projects/{project}/zones/{zone}/instances/{name}")
    if vm is not None:
        items = (vm.get("metadata") or {}).get("items") or []
        attributes = {item["key"]: item.get("value", "") for item in items}
    else:
        tpu = _get(f"{base}/v2/projects/{project}/locations/{zone}/nodes/{name}") or {}
        attributes = {**(tpu.get("metadata") or {}), "instance-id": name}
        attributes["agent-worker-number"] = str(host)
    instance = "/computeMetadata/v1/instance"
    metadata = {
        f"{instance}/name": name,
        f"{instance}/zone": f"projects/0/zones/{zone}",
        f"{instance}/hostname": f"{name}.{zone}.c.{project}.internal",
        f"{instance}/network-interfaces/0/ip": ip,
        **{f"{instance}/attributes/{key}": str(value) for key, value in attributes.items()},
    }
    return BootData(attributes.get("startup-script"), metadata)


def _get(url: str) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return None
        raise
