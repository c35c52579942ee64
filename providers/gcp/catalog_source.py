"""Google's own answers for the GCP catalog refresh, through the plugins' clients:
``machineTypes`` and ``acceleratorTypes`` aggregatedList, and the TPU API's accelerator
types in every location it serves."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.protobuf import json_format

from instance_catalog.gcp_refresh import build_snapshot
from providers.gcp.api import cloud_call
from providers.gcp_compute.client import ComputeApi
from providers.gcp_tpu.client import TpuApi


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
