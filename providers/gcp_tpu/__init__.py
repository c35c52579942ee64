"""GCP TPU VM node provider (Cloud TPU API v2): one node per TPU slice."""

from providers.gcp_tpu.provider import GcpTpuNodeProvider

__all__ = ["GcpTpuNodeProvider"]
