"""Cluster YAMLs the cluster-command tests share."""

from __future__ import annotations

from pathlib import Path

import yaml

TPU_NODE_CONFIG = {"acceleratorType": "v4-8", "runtimeVersion": "tpu-ubuntu2204-base"}


def gcp_settings(url: str, **extra) -> dict:
    """The provider section of a GCP cluster on the fake Google server at ``url``, with
    short operation polls and retry deadlines so tests run fast."""
    return {
        "type": "gcp",
        "project_id": "p",
        "availability_zone": "us-central2-b",
        "region": "us-central2",
        "endpoint_url": url,
        "operation_timeout_s": 10,
        "operation_wait_s": 0.5,
        "operation_poll_s": 0.02,
        "retry_deadline_s": 2,
        **extra,
    }


def write_cluster(tmp_path: Path, url: str, name: str = "ops", **settings) -> Path:
    """A GCP TPU cluster YAML on the fake TPU server at ``url``: head ``head``, workers
    ``tpu_v4_8`` (min 2, max 6); ``settings`` override top-level keys."""
    data = {
        "cluster_name": name,
        "max_workers": 10,
        "provider": {
            "type": "gcp",
            "project_id": "p",
            "availability_zone": "us-central2-b",
            "endpoint_url": url,
            "operation_timeout_s": 10,
            "operation_poll_s": 0.02,
            "retry_deadline_s": 1,
        },
        "available_node_types": {
            "head": {"node_config": TPU_NODE_CONFIG, "cost_per_hour": 1.5},
            "tpu_v4_8": {
                "node_config": TPU_NODE_CONFIG,
                "cost_per_hour": 12.88,
                "min_workers": 2,
                "max_workers": 6,
            },
        },
        "head_node_type": "head",
        **settings,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path
