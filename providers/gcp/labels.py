"""GCP labels as ownership: the rules both plugins check, and deterministic resource names."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

from providers.base import TAG_CLUSTER
from providers.errors import InvalidConfigError

NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
"""Compute Engine instance names and Cloud TPU node ids (RFC 1035, at most 63)."""
_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")
_LABEL_RULE = "lowercase letters, digits, '_' and '-', at most 63 characters"


def check_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """``labels`` as GCP accepts them, or InvalidConfigError naming the offending one."""
    for key, value in labels.items():
        if not _LABEL_KEY.match(key):
            raise InvalidConfigError(
                f"tag key {key!r} is not a valid GCP label key ({_LABEL_RULE})"
            )
        if not isinstance(value, str) or not _LABEL_VALUE.match(value):
            raise InvalidConfigError(
                f"tag {key}={value!r} is not a valid GCP label value ({_LABEL_RULE})"
            )
    return dict(labels)


def check_cluster_name(cluster_name: str) -> None:
    """The cluster name must fit a label value: it is the ownership label."""
    if not cluster_name or not _LABEL_VALUE.match(cluster_name):
        raise InvalidConfigError(
            f"cluster name {cluster_name!r} cannot own GCP resources: it is stored as label "
            f"{TAG_CLUSTER}, whose value allows only {_LABEL_RULE}"
        )


def owned(labels: Mapping[str, str], cluster_name: str) -> bool:
    return labels.get(TAG_CLUSTER) == cluster_name


def resource_name(cluster_name: str, launch_request_id: str, index: int) -> str:
    """The deterministic name of unit ``index`` of a launch request (VM or TPU node): a
    retried create asks for the same names, so it can never make a second copy."""
    digest = hashlib.sha256(f"{cluster_name}\0{launch_request_id}".encode()).hexdigest()[:12]
    slug = re.sub(r"[^a-z0-9]+", "-", cluster_name.lower()).strip("-")[:30].rstrip("-")
    if not slug or not slug[0].isalpha():
        slug = f"tpu-{slug}".rstrip("-")
    return f"{slug}-{digest}-{index}"
