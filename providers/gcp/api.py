"""What both GCP plugins' clients share: where they connect, how calls retry, how long they
wait for a long-running operation.

Google's REST clients retry nothing by default here, so every call carries a
``google.api_core.retry.Retry`` with a deadline that retries only transient failures
(``errors.is_retryable``: 429, 5xx, a dropped connection). Operations are polled until a
deadline, never longer.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import contextmanager
from typing import Any

from google.api_core import retry as retries
from google.api_core.client_options import ClientOptions
from google.api_core.future import polling as polling_future
from google.auth.credentials import AnonymousCredentials

from providers.base import Offering
from providers.errors import InvalidConfigError
from providers.gcp.errors import API_ERRORS, classify, is_retryable

DEFAULT_RETRY_DEADLINE_S = 60.0
DEFAULT_REQUEST_TIMEOUT_S = 60.0
DEFAULT_OPERATION_POLL_S = 2.0
DEFAULT_OPERATION_TIMEOUT_S = 900.0
DEFAULT_OPERATION_WAIT_S = 2.0
"""How long a create or delete waits on its operation within one reconcile round; one not
finished by then is left running and looked at again in later rounds."""


class CallSettings:
    """Retry, request timeout and operation polling from the provider config."""

    def __init__(self, provider_config: Mapping[str, Any]) -> None:
        deadline = float(provider_config.get("retry_deadline_s", DEFAULT_RETRY_DEADLINE_S))
        self.retry = retries.Retry(
            predicate=is_retryable,
            initial=min(1.0, deadline / 20),
            maximum=min(30.0, deadline / 2),
            multiplier=2.0,
            timeout=deadline,
        )
        self.timeout_s = float(provider_config.get("request_timeout_s", DEFAULT_REQUEST_TIMEOUT_S))
        self.poll_s = float(provider_config.get("operation_poll_s", DEFAULT_OPERATION_POLL_S))
        self.operation_timeout_s = float(
            provider_config.get("operation_timeout_s", DEFAULT_OPERATION_TIMEOUT_S)
        )
        self.operation_wait_s = min(
            self.operation_timeout_s,
            float(provider_config.get("operation_wait_s", DEFAULT_OPERATION_WAIT_S)),
        )

    def wait(self, operation: Any, timeout_s: float) -> Any:
        """The operation's result (a TPU ``Operation`` or a Compute ``ExtendedOperation``);
        raises its error, or ``concurrent.futures.TimeoutError`` after ``timeout_s``."""
        polling = polling_future.DEFAULT_POLLING.with_delay(
            initial=self.poll_s, maximum=max(self.poll_s, 10.0), multiplier=1.5
        )
        return operation.result(timeout=max(timeout_s, 0.0), retry=self.retry, polling=polling)


def project_of(provider_config: Mapping[str, Any]) -> str:
    """``provider.project_id``, which every GCP API call needs."""
    project = provider_config.get("project_id")
    if not project:
        raise InvalidConfigError("provider.project_id is required", field="project_id")
    return str(project)


def client_kwargs(provider_config: Mapping[str, Any]) -> dict[str, Any]:
    """REST transport, on ``endpoint_url`` if given, with Application Default Credentials.

    A plain ``http://`` endpoint (a local fake) gets anonymous credentials: a real token is
    never sent in clear text. The REST transport keeps an explicit scheme, so
    ``http://127.0.0.1:PORT`` works as the ``api_endpoint``.
    """
    endpoint = provider_config.get("endpoint_url")
    if not endpoint:
        return {"transport": "rest"}
    endpoint = str(endpoint).rstrip("/")
    credentials = AnonymousCredentials() if endpoint.startswith("http://") else None
    return {
        "transport": "rest",
        "credentials": credentials,
        "client_options": ClientOptions(api_endpoint=endpoint),
    }


@contextmanager
def cloud_call(offering: Offering | None = None, action: str | None = None):
    """Turn a client-library failure into the taxonomy."""
    try:
        yield
    except API_ERRORS as exc:
        raise classify(exc, offering, action) from exc
