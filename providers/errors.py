"""The small taxonomy of cloud faults. The reconciler decides from the class, never the text.

Every error carries the offering it concerns (instance type, zone, market) and the cloud's raw
code and message, so the autoscaler can remember "this offering has no capacity" and the user
can see exactly what the cloud said.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from providers.base import Offering


class ProviderError(Exception):
    """A cloud call failed."""

    kind = "error"

    def __init__(
        self,
        message: str,
        offering: Offering | None = None,
        code: str | None = None,
        raw_message: str | None = None,
    ) -> None:
        super().__init__(message)
        self.offering = offering
        self.code = code
        self.raw_message = raw_message if raw_message is not None else message

    def __str__(self) -> str:
        where = f" [{self.offering}]" if self.offering else ""
        code = f" ({self.code})" if self.code else ""
        return f"{self.kind}{where}{code}: {super().__str__()}"


class CapacityError(ProviderError):
    """The offering has no capacity now (stockout, unsupported in this zone)."""

    kind = "capacity"


class QuotaError(ProviderError):
    """An account limit was hit; ``quota`` names which one to raise."""

    kind = "quota"

    def __init__(self, message: str, quota: str | None = None, **kwargs) -> None:
        super().__init__(message, **kwargs)
        self.quota = quota


class ThrottledError(ProviderError):
    """Still rate limited after the SDK's own retries."""

    kind = "throttled"


class AccessDeniedError(ProviderError):
    """The credentials lack a permission; ``action`` names it (e.g. ``ec2:RunInstances``)."""

    kind = "permission"

    def __init__(self, message: str, action: str | None = None, **kwargs) -> None:
        super().__init__(message, **kwargs)
        self.action = action


class InvalidConfigError(ProviderError):
    """The request itself is wrong: bad image, subnet, instance type or parameter."""

    kind = "invalid-config"

    def __init__(self, *args, field: str | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.field = field
        """The node_config key at fault (dotted, e.g. ``guestAccelerators[0].acceleratorType``);
        one starting ``provider.`` names the cluster's provider section instead."""


class NodeNotFoundError(ProviderError):
    """The resource does not exist (or no longer does)."""

    kind = "not-found"


def launch_failure(errors: list[ProviderError]) -> ProviderError:
    """The error of a create that launched nothing. No capacity in any zone tried is a
    capacity error for the instance type in every zone (``offering.zone`` None), so the next
    plan moves on to another node type."""
    last = errors[-1]
    if len(errors) == 1 or not all(isinstance(e, CapacityError) for e in errors):
        return last
    zones = ", ".join(str(e.offering.zone) for e in errors if e.offering)
    offering = last.offering and dataclasses.replace(last.offering, zone=None)
    return CapacityError(
        f"no capacity in any of {zones}: {last.raw_message}",
        offering=offering,
        code=last.code,
        raw_message=last.raw_message,
    )


ERROR_CLASSES: tuple[type[ProviderError], ...] = (
    CapacityError,
    QuotaError,
    ThrottledError,
    AccessDeniedError,
    InvalidConfigError,
    NodeNotFoundError,
)
