"""The one place that talks to Ray: read the cluster resource state, drain a node, report
our autoscaling state, through Ray's autoscaler SDK and GCS client (as KubeRay's autoscaler
does). Ray is an optional extra; every failure is one line."""

from __future__ import annotations

import socket
import time
from typing import Any

from autoscaler.ray_cluster.report import ScalingReport, autoscaling_state
from autoscaler.ray_cluster.state import RayState, from_resource_state

MIN_RAY_VERSION = "2.10"
EXTRA = "pip install 'accel-autoscaler[ray]'"
RPC_TIMEOUT_S = 10
CONNECT_TIMEOUT_S = 3.0
IDLE_TERMINATION = "DRAIN_NODE_REASON_IDLE_TERMINATION"


class RaySetupError(Exception):
    """Ray is not installed, or too old for the SDK calls we need."""


class RayUnavailableError(Exception):
    """Ray could not be asked this round (unreachable, or its GCS restarting)."""


def _ray_modules() -> tuple[Any, Any, Any]:
    """(GcsClient, get_cluster_resource_state, autoscaler_pb2), or a one-line error."""
    try:
        import ray
    except ImportError:
        raise RaySetupError(f"Ray is not installed; {EXTRA}") from None
    try:
        from ray._raylet import GcsClient
        from ray.autoscaler.v2.sdk import get_cluster_resource_state
        from ray.core.generated import autoscaler_pb2

        autoscaler_pb2.AutoscalingState.DESCRIPTOR.fields_by_name["failed_instance_requests"]
    except (ImportError, AttributeError, KeyError):
        raise RaySetupError(
            f"Ray {ray.__version__} is too old: the autoscaler SDK needs Ray >= "
            f"{MIN_RAY_VERSION}; {EXTRA}"
        ) from None
    return GcsClient, get_cluster_resource_state, autoscaler_pb2


class RayCluster:
    """A Ray cluster's GCS at ``address`` (``host:port``). The connection is made on first
    use and again after a failure, so a restarted GCS is picked up on a later round."""

    def __init__(self, address: str, timeout_s: float = RPC_TIMEOUT_S) -> None:
        self.address = address
        self.timeout_s = timeout_s
        self._client_class, self._get_state, self._messages = _ray_modules()
        self._client: Any = None
        self._seen_version = 0
        self._version = time.time_ns() // 1_000_000
        """Our autoscaler_state_version: milliseconds, so a restarted monitor goes on rising."""

    def read(self) -> RayState:
        """Pending demand and every live node, now."""
        state = self._call("read the cluster state", self._get_state, _Timed(self._gcs(), self))
        self._seen_version = state.cluster_resource_state_version
        return from_resource_state(state)

    def drain(self, node_id: str, message: str) -> tuple[bool, str]:
        """Ask Ray to drain an idle node before it is terminated: (accepted, Ray's reason)."""
        reason = self._messages.DrainNodeReason.Value(IDLE_TERMINATION)
        accepted, rejection = self._call(
            "drain a node", self._gcs().drain_node, node_id, reason, message, 0
        )
        return bool(accepted), rejection or ""

    def report(self, report: ScalingReport) -> None:
        """Tell Ray what we are doing (``ray status`` shows it)."""
        self._version += 1
        state = autoscaling_state(report, self._messages, self._seen_version, self._version)
        self._call(
            "report autoscaling state",
            self._gcs().report_autoscaling_state,
            state.SerializeToString(),
            timeout_s=self.timeout_s,
        )

    def autoscaler_v2(self) -> bool | None:
        """Whether the head keeps autoscaler v2 state (``RAY_enable_autoscaler_v2``), which
        ``request_resources()`` needs; None when Ray cannot say."""
        try:
            from ray.autoscaler.v2.utils import is_autoscaler_v2
        except ImportError:
            return None
        try:
            return bool(
                self._call("read its autoscaler version", is_autoscaler_v2, True, self._gcs())
            )
        except RayUnavailableError:
            return None

    def _gcs(self) -> Any:
        if self._client is None:
            host, _, port = self.address.rpartition(":")
            try:
                socket.create_connection((host, int(port)), CONNECT_TIMEOUT_S).close()
            except (OSError, ValueError) as err:
                raise RayUnavailableError(
                    f"Ray at {self.address} is unreachable: {err.strerror or err}"
                ) from None
            self._client = self._call("connect", self._client_class, address=self.address)
        return self._client

    def _call(self, what: str, function: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except Exception as err:  # Ray raises its own RpcError and friends
            self._client = None
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise RayUnavailableError(f"Ray at {self.address}: could not {what}: {first}") from None


class _Timed:
    """The GCS client as the SDK's ``get_cluster_resource_state`` uses it, with our timeout
    (the SDK's call would otherwise wait without end on a GCS that does not answer)."""

    def __init__(self, client: Any, cluster: RayCluster) -> None:
        self._client = client
        self._timeout_s = cluster.timeout_s

    def get_cluster_resource_state(self) -> bytes:
        return self._client.get_cluster_resource_state(timeout_s=self._timeout_s)
