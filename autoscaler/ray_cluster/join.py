"""How a node joins Ray: ``ray start`` advertising what detection found, with the labels
Ray's own detection would set (``ray.io/accelerator-type``, TPU slice and worker labels) and
the variables that tie a Ray node to its cloud instance and node type, as KubeRay sets them.
The head starts without Ray's own autoscaler (``--no-monitor``): we are its autoscaler."""

from __future__ import annotations

import json
from collections.abc import Sequence

from accel.names import RAY_NAMES
from accel.node import NodeInventory, ray_start_args
from autoscaler.ray_cluster.state import instance_key

ACCELERATOR_LABEL = "ray.io/accelerator-type"
HEAD_PORT = 6379


def ray_labels(inventory: NodeInventory) -> dict[str, str]:
    """Detection's labels (TPU pod type, slice, worker id...) and the accelerator type."""
    labels: dict[str, str] = {}
    for detection in inventory.detections:
        labels.update(detection.labels)
        if detection.accelerator_type and ACCELERATOR_LABEL not in labels:
            name = detection.accelerator_type
            labels[ACCELERATOR_LABEL] = RAY_NAMES.get(name, name)
    return labels


def ray_start(
    inventory: NodeInventory,
    address: str | None,
    node_id: str,
    host: int,
    node_type: str,
    extra: Sequence[str] = (),
) -> tuple[list[str], dict[str, str]]:
    """(argv, environment) of ``ray start``: joining ``address``, or a head without one."""
    join = ["--address", address] if address else ["--head", "--no-monitor", f"--port={HEAD_PORT}"]
    env = {
        "RAY_CLOUD_INSTANCE_ID": instance_key(node_id, host),
        "RAY_NODE_TYPE_NAME": node_type,
        "RAY_OVERRIDE_LABELS": json.dumps(ray_labels(inventory), sort_keys=True),
    }
    if not address:
        env["RAY_enable_autoscaler_v2"] = "1"  # `ray status` reads the state we report
    return ["ray", "start", *join, *ray_start_args(inventory), *extra], env
