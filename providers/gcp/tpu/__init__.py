"""GCP TPU VM node provider (Cloud TPU API v2): one node per TPU slice."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    # Lazy, so the offline surface (``providers.gcp.cloud``) can read ``slices`` without
    # importing the client library.
    if name == "GcpTpuNodeProvider":
        from providers.gcp.tpu.provider import GcpTpuNodeProvider

        return GcpTpuNodeProvider
    raise AttributeError(name)


__all__ = ["GcpTpuNodeProvider"]
