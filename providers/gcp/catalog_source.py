"""Google's own answers for the GCP catalog refresh, through the plugins' clients:
``machineTypes`` and ``acceleratorTypes`` aggregatedList, and the TPU API's accelerator
types in every location it serves."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.protobuf import json_format

from instance_catalog.gcp_refresh import build_snapshot
from instance_catalog.live_refresh import RefreshReport, RefreshRequest
from providers.gcp.api import cloud_call
from providers.gcp.compute.client import ComputeApi
from providers.gcp.tpu.client import TpuApi


def gcp_snapshot(provider_config: Mapping[str, Any]) -> dict[str, Any]:
    """The snapshot of ``project_id`` (``endpoint_url`` for a fake); raises the taxonomy's
    errors (a missing permission names it)."""
    compute, tpu = ComputeApi(provider_config), TpuApi(provider_config)

    def as_dict(message: Any) -> dict[str, Any]:
        return json_format.MessageToDict(type(message).pb(message))

    with cloud_call(action="compute.machineTypes.list"):
        machines = [(zone, as_dict(m)) for zone, m in compute.machine_types()]
    with cloud_call(action="compute.acceleratorTypes.list"):
        gpus = [(zone, as_dict(a)) for zone, a in compute.accelerator_types()]
    with cloud_call(action="tpu.acceleratorTypes.list"):
        tpus = [(zone, t.type_) for zone in tpu.zones() for t in tpu.accelerator_types(zone)]
    source = f"Compute Engine and Cloud TPU APIs, project {compute.project}"
    return build_snapshot(machines, gpus, tpus, source)


def refresh_gcp(request: RefreshRequest) -> RefreshReport:
    """``autoscale catalog refresh --cloud gcp``: the snapshot of ``request.project`` into
    the user's catalog folder."""
    from instance_catalog.gcp_refresh import SNAPSHOT_FILE
    from instance_catalog.refresh import CatalogRefreshError
    from instance_catalog.user_catalog import user_catalog_dir, write_json
    from providers.errors import ProviderError

    if not request.project:
        raise CatalogRefreshError("--project is required with --cloud gcp")
    if request.prices:
        raise CatalogRefreshError("--prices is not available for gcp yet")
    try:
        snapshot = gcp_snapshot(
            {"project_id": request.project, "endpoint_url": request.endpoint_url}
        )
    except ProviderError as err:
        raise CatalogRefreshError(str(err)) from err
    path = user_catalog_dir() / SNAPSHOT_FILE
    write_json(snapshot, path)
    return RefreshReport(
        [
            f"{len(snapshot['machine_types'])} machine types, "
            f"{len(snapshot['accelerator_types'])} accelerator types, "
            f"{len(snapshot['tpu_accelerator_types'])} TPU types written to {path}"
        ]
    )
