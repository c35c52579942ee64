"""Cloud TPU API errors -> the provider taxonomy, from the status code and structured details.

The status comes from the JSON error body (``error.status``) when the REST transport kept it,
else from the exception class; details are ``google.rpc`` ``QuotaFailure`` / ``ErrorInfo``.
Telling a stockout from a quota or rate limit (all ``RESOURCE_EXHAUSTED``) needs the details
and, where the TPU API sends none, its message: that matching lives here and nowhere else.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
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
_QUOTA_NAME = re.compile(r"Quota (?:limit )?'([^']+)'")
_PERMISSION = re.compile(r"Permission '([\w.]+)'")
_RATE = re.compile(r"per ?minute|/qps/|requests per", re.IGNORECASE)


def status_of(exc: BaseException) -> str:
    """The canonical status name (``RESOURCE_EXHAUSTED``...) of a Google API error."""
    body_status = _error_body(exc).get("status")
    if body_status:
        return str(body_status)
    grpc_code = getattr(exc, "grpc_status_code", None)
    if grpc_code is not None:
        return grpc_code.name
    return _HTTP_STATUS.get(getattr(exc, "code", None), "UNKNOWN")


def is_already_exists(exc: BaseException) -> bool:
    return isinstance(exc, gexc.GoogleAPICallError) and status_of(exc) == "ALREADY_EXISTS"


def is_not_found(exc: BaseException) -> bool:
    return isinstance(exc, gexc.GoogleAPICallError) and status_of(exc) == "NOT_FOUND"


def is_retryable(exc: BaseException) -> bool:
    """Worth retrying: unavailable, deadline, rate limited, or the connection failed."""
    if isinstance(exc, requests.exceptions.ConnectionError | requests.exceptions.Timeout):
        return True
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
            f"the Cloud TPU API did not answer: {exc}", offering=offering, code="UNAVAILABLE"
        )
    if not isinstance(exc, gexc.GoogleAPICallError):
        return ProviderError(str(exc), offering=offering)
    status = status_of(exc)
    message = _error_body(exc).get("message") or exc.message or str(exc)
    common: dict[str, Any] = {"offering": offering, "code": status, "raw_message": message}
    if status == "RESOURCE_EXHAUSTED":
        return _resource_exhausted(exc, message, common)
    if status in ("PERMISSION_DENIED", "UNAUTHENTICATED"):
        permission = _error_info(exc).get("metadata", {}).get("permission")
        found = _PERMISSION.search(message)
        permission = permission or (found.group(1) if found else action)
        return AccessDeniedError(
            f"the credentials lack IAM permission {permission or '(unknown)'}: {message}",
            action=permission,
            **common,
        )
    if status in _INVALID:
        return InvalidConfigError(f"the Cloud TPU API rejected the request: {message}", **common)
    if status == "NOT_FOUND":
        return NodeNotFoundError(message, **common)
    if status in _TRANSIENT:
        return ThrottledError(f"the Cloud TPU API is unavailable: {message}", **common)
    return ProviderError(message, **common)


def _resource_exhausted(
    exc: gexc.GoogleAPICallError, message: str, common: dict[str, Any]
) -> ProviderError:
    """Quota (a named limit), rate limit (requests per minute) or stockout (the rest)."""
    quota = _quota_name(exc, message)
    if _RATE.search(quota or "") or _RATE.search(message):
        return ThrottledError(f"rate limited by the Cloud TPU API: {message}", **common)
    if quota is not None:
        return QuotaError(f"quota {quota} is exhausted: {message}", quota=quota, **common)
    return CapacityError(f"no TPU capacity: {message}", **common)


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
            except (TypeError, json_format.Error):
                continue


def _error_info(exc: gexc.GoogleAPICallError) -> dict[str, Any]:
    for detail in _details(exc):
        if detail.get("@type", "").endswith("google.rpc.ErrorInfo"):
            return detail
    return {}
