"""Google API errors (Cloud TPU and Compute Engine) -> the provider taxonomy.

Two shapes arrive. Cloud TPU speaks ``google.rpc``: a status name (``RESOURCE_EXHAUSTED``...)
and structured details (``QuotaFailure``, ``ErrorInfo``). Compute Engine answers calls with an
HTTP code and ``errors[].reason`` (``forbidden``, ``alreadyExists``...), and fails operations
with ``errors[].code`` (``ZONE_RESOURCE_POOL_EXHAUSTED``, ``QUOTA_EXCEEDED`` with a
``quotaInfo`` detail naming the metric and region). Telling a stockout from a quota or a rate
limit needs those details and, where an API sends none, its message: that matching lives here
and nowhere else.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import requests
from google.api_core import exceptions as gexc
from google.protobuf import json_format
from google.rpc import error_details_pb2  # noqa: F401  (registers QuotaFailure, ErrorInfo)

from providers.base import Offering
from providers.errors import (
    AccessDeniedError,
    CapacityError,
    InvalidConfigError,
    NodeNotFoundError,
    ProviderError,
    QuotaError,
    ThrottledError,
)

API_ERRORS = (gexc.GoogleAPICallError, gexc.RetryError, requests.RequestException)
"""What a Google client call may raise (the client library's and the transport's)."""
LOST_ANSWERS = (
    requests.exceptions.ConnectionError,
    requests.exceptions.Timeout,
    gexc.ServiceUnavailable,
    gexc.InternalServerError,
    gexc.GatewayTimeout,
)
"""Failures after which a create may or may not have happened."""

_HTTP_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ALREADY_EXISTS",
    412: "FAILED_PRECONDITION",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_INVALID = frozenset({"INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE"})
_TRANSIENT = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED"})
CAPACITY_CODES = frozenset(
    {
        "ZONE_RESOURCE_POOL_EXHAUSTED",
        "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
        "RESOURCE_POOL_EXHAUSTED",
    }
)
"""Compute Engine operation error codes meaning: no capacity for this offering here."""
_QUOTA_CODES = frozenset({"QUOTA_EXCEEDED", "quotaExceeded"})
_RATE_REASONS = frozenset({"rateLimitExceeded", "userRateLimitExceeded", "RATE_LIMIT_EXCEEDED"})
_QUOTA_NAME = re.compile(r"Quota (?:limit )?'([^']+)'")
_QUOTA_REGION = re.compile(r" in region ([a-z0-9-]+)")
_PERMISSION = re.compile(r"Permission '([\w.]+)'|Required '([\w.]+)' permission")
_UNKNOWN_MEMBER = re.compile(r"[Ss]ervice account \S+ does not exist")
_RATE = re.compile(r"per ?minute|/qps/|requests per", re.IGNORECASE)


@dataclass(frozen=True)
class _Reason:
    """One entry of Compute Engine's ``errors[]``: its code or reason, message and quota."""

    code: str
    message: str
    quota: dict[str, Any]


def status_of(exc: BaseException) -> str:
    """The canonical status name (``RESOURCE_EXHAUSTED``...) of a Google API error."""
    body_status = _error_body(exc).get("status")
    if body_status:
        return str(body_status)
    if any(reason.code == "alreadyExists" for reason in _reasons(exc)):
        return "ALREADY_EXISTS"
    grpc_code = getattr(exc, "grpc_status_code", None)
    if grpc_code is not None:
        return grpc_code.name
    return _HTTP_STATUS.get(getattr(exc, "code", None), "UNKNOWN")


def is_already_exists(exc: BaseException) -> bool:
    return isinstance(exc, gexc.GoogleAPICallError) and status_of(exc) == "ALREADY_EXISTS"


def is_not_found(exc: BaseException) -> bool:
    return isinstance(exc, gexc.GoogleAPICallError) and status_of(exc) == "NOT_FOUND"


def is_policy_conflict(exc: BaseException) -> bool:
    """A ``setIamPolicy`` refused because the policy changed since it was read (stale etag)."""
    return isinstance(exc, gexc.GoogleAPICallError) and status_of(exc) == "ABORTED"


def is_unknown_member(exc: BaseException) -> bool:
    """A ``setIamPolicy`` refused because a member does not exist (yet: a new service account
    takes a while to be seen by IAM policies)."""
    if not isinstance(exc, gexc.GoogleAPICallError) or status_of(exc) != "INVALID_ARGUMENT":
        return False
    message = _error_body(exc).get("message") or exc.message or ""
    return _UNKNOWN_MEMBER.search(message) is not None


def is_retryable(exc: BaseException) -> bool:
    """Worth retrying a call: 5xx, deadline, rate limited, or the connection failed."""
    if isinstance(exc, requests.exceptions.ConnectionError | requests.exceptions.Timeout):
        return True
    if isinstance(exc, gexc.InternalServerError | gexc.BadGateway):
        return True  # a 500 or 502 answer to a call
    return isinstance(exc, gexc.GoogleAPICallError) and isinstance(classify(exc), ThrottledError)


def classify(
    exc: BaseException, offering: Offering | None = None, action: str | None = None
) -> ProviderError:
    """The taxonomy error for ``exc``; ``action`` is the IAM permission the call needed."""
    if isinstance(exc, gexc.RetryError):
        if exc.cause is None:
            return ThrottledError(f"retries ran out: {exc}", offering=offering)
        exc = exc.cause
    if isinstance(exc, requests.exceptions.ConnectionError | requests.exceptions.Timeout):
        return ThrottledError(
            f"the Google API did not answer: {exc}", offering=offering, code="UNAVAILABLE"
        )
    if not isinstance(exc, gexc.GoogleAPICallError):
        return ProviderError(str(exc), offering=offering)
    reasons = list(_reasons(exc))
    status = status_of(exc)
    message = _error_body(exc).get("message") or exc.message or str(exc)
    common: dict[str, Any] = {"offering": offering, "code": status, "raw_message": message}
    for reason in reasons:
        common = {**common, "code": reason.code, "raw_message": reason.message or message}
        if reason.code in CAPACITY_CODES:
            return CapacityError(f"no capacity: {reason.message}", **common)
        if reason.code in _QUOTA_CODES:
            quota = _compute_quota(reason)
            return QuotaError(
                f"quota {quota} is exhausted: {reason.message}",
                quota=quota,
                accelerator=quota_accelerator(quota),
                **common,
            )
        if reason.code in _RATE_REASONS:
            return ThrottledError(f"rate limited: {reason.message}", **common)
    common = {"offering": offering, "code": status, "raw_message": message}
    if status == "RESOURCE_EXHAUSTED":
        return _resource_exhausted(exc, message, common)
    if status in ("PERMISSION_DENIED", "UNAUTHENTICATED"):
        permission = _error_info(exc).get("metadata", {}).get("permission")
        found = _PERMISSION.search(message)
        permission = permission or (found and (found.group(1) or found.group(2))) or action
        return AccessDeniedError(
            f"the credentials lack IAM permission {permission or '(unknown)'}: {message}",
            action=permission,
            **common,
        )
    if status in _INVALID:
        return InvalidConfigError(f"the API rejected the request: {message}", **common)
    if status == "NOT_FOUND":
        return NodeNotFoundError(message, **common)
    if status in _TRANSIENT:
        return ThrottledError(f"the API is unavailable: {message}", **common)
    return ProviderError(message, **common)


def _resource_exhausted(
    exc: gexc.GoogleAPICallError, message: str, common: dict[str, Any]
) -> ProviderError:
    """Quota (a named limit), rate limit (requests per minute) or stockout (the rest)."""
    quota = _quota_name(exc, message)
    if _RATE.search(quota or "") or _RATE.search(message):
        return ThrottledError(f"rate limited: {message}", **common)
    if quota is not None:
        zonal = "perzone" in (quota or "").lower().replace("_", "")
        return QuotaError(
            f"quota {quota} is exhausted: {message}",
            quota=quota,
            zonal=zonal,
            accelerator=quota_accelerator(quota),
            **common,
        )
    return CapacityError(f"no capacity: {message}", **common)


_GPU_QUOTA = re.compile(r"(?:PREEMPTIBLE_|COMMITTED_)?NVIDIA_([A-Z0-9_]+?)_GPUS", re.IGNORECASE)


def quota_accelerator(quota: str | None) -> str | None:
    """The accelerator (canonical name) a Compute Engine GPU quota counts, e.g.
    ``NVIDIA_A100_GPUS`` -> ``A100-40G`` (``nvidia-tesla-a100``), ``NVIDIA_A100_80GB_GPUS`` ->
    ``A100-80G``: every machine type with those GPUs draws on it."""
    found = _GPU_QUOTA.search(quota or "")
    if found is None:
        return None
    from instance_catalog.gcp import canonical_gpu_name, gcp_data

    key = found.group(1).lower()
    names = list(gcp_data()["gpus"])
    bases = {g: g.removeprefix("nvidia-").removeprefix("tesla-") for g in names}
    exact = [g for g, base in bases.items() if base.replace("-", "_") == key]
    sized = [
        g for g, base in bases.items() if re.sub(r"-\d+gb$", "", base).replace("-", "_") == key
    ]
    match = (exact or sized or [None])[0]
    return canonical_gpu_name(match) if match else None


def _compute_quota(reason: _Reason) -> str:
    """``METRIC in region R`` from a ``quotaInfo`` detail, else from the message."""
    info = reason.quota
    metric = info.get("metricName") or info.get("metric_name")
    found = _QUOTA_NAME.search(reason.message)
    metric = metric or (found.group(1) if found else "(unknown)")
    region = (info.get("dimensions") or {}).get("region")
    found_region = _QUOTA_REGION.search(reason.message)
    region = region or (found_region.group(1) if found_region else None)
    return f"{metric} in region {region}" if region else metric


def _quota_name(exc: gexc.GoogleAPICallError, message: str) -> str | None:
    for detail in _details(exc):
        if detail.get("@type", "").endswith("google.rpc.QuotaFailure"):
            for violation in detail.get("violations", []):
                name = violation.get("quotaId") or violation.get("quotaMetric")
                found = _QUOTA_NAME.search(violation.get("description", ""))
                name = name or (found.group(1) if found else violation.get("description"))
                if name:
                    return name
    metadata = _error_info(exc).get("metadata", {})
    name = metadata.get("quota_limit") or metadata.get("quota_metric")
    if name:
        return f"{metadata.get('quota_metric', '')} {name}".strip()
    found = _QUOTA_NAME.search(message)
    return found.group(1) if found else None


def _reasons(exc: BaseException) -> Iterator[_Reason]:
    """Compute Engine's ``errors[]``: from an operation's error or an HTTP error body."""
    for error in getattr(exc, "errors", None) or ():
        if isinstance(error, dict):
            code = error.get("code") or error.get("reason")
            if code:
                yield _Reason(str(code), str(error.get("message", "")), _quota_info(error))
        elif isinstance(getattr(error, "code", None), str):
            as_dict = json_format.MessageToDict(type(error).pb(error))
            yield _Reason(error.code, error.message, _quota_info(as_dict))
    for error in _error_body(exc).get("errors") or ():
        if isinstance(error, dict) and error.get("reason"):
            yield _Reason(str(error["reason"]), str(error.get("message", "")), {})


def _quota_info(error: dict[str, Any]) -> dict[str, Any]:
    for detail in error.get("errorDetails") or ():
        if isinstance(detail, dict) and "quotaInfo" in detail:
            return detail["quotaInfo"]
    return {}


def _error_body(exc: BaseException) -> dict[str, Any]:
    response = getattr(exc, "response", None)
    if not isinstance(response, requests.Response):
        return {}
    try:
        error = response.json().get("error", {})
    except ValueError:
        return {}
    return error if isinstance(error, dict) else {}


def _details(exc: gexc.GoogleAPICallError) -> Iterator[dict[str, Any]]:
    """Structured details as JSON dicts, from an HTTP body or an operation's Status."""
    for detail in exc.details or ():
        if isinstance(detail, dict):
            yield detail
    for error in exc.errors or ():
        for any_detail in getattr(error, "details", ()):
            try:
                yield json_format.MessageToDict(any_detail)
            except (TypeError, json_format.Error, AttributeError):
                continue


def _error_info(exc: gexc.GoogleAPICallError) -> dict[str, Any]:
    for detail in _details(exc):
        if detail.get("@type", "").endswith("google.rpc.ErrorInfo"):
            return detail
    return {}
