"""The EC2 client: botocore's standard retries, errors classified into the taxonomy.

The client retries throttling and transient faults itself, a few times, then the error
surfaces. ``RunInstances`` is the exception for a lost answer (a timeout, a closed
connection): the SDK does not send it again, the launcher does, after looking for what the
lost call launched (see :mod:`providers.aws.launch`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, ConnectionError, HTTPClientError

from providers.aws.errors import classify
from providers.base import Offering
from providers.errors import ProviderError

DEFAULT_RETRIES = 2
"""Retries after the first attempt (botocore's standard mode makes 3 attempts in all)."""
PAGE_SIZE = 1000
"""DescribeInstances results per page (the API's maximum)."""
IDS_PER_CALL = 1000
"""Instance ids per TerminateInstances / StopInstances / CreateTags call."""
LOST_ANSWERS = (HTTPClientError, ConnectionError)
"""Transport faults: the request may or may not have been carried out."""


def make_client(config: Mapping[str, Any], service: str = "ec2") -> Any:
    """A ``service`` client (EC2 by default) for ``config`` (``region``, ``endpoint_url``,
    ``max_attempts``...)."""
    session = boto3.session.Session(
        region_name=config.get("region") or "us-east-1",
        aws_access_key_id=config.get("aws_access_key_id"),
        aws_secret_access_key=config.get("aws_secret_access_key"),
    )
    retries = int(config.get("max_attempts", DEFAULT_RETRIES))
    client = session.client(
        service,
        endpoint_url=config.get("endpoint_url"),
        config=Config(retries={"mode": "standard", "max_attempts": retries}),
    )
    # More specific than the SDK's own retry handler ("needs-retry.ec2"), so it runs first.
    client.meta.events.register("needs-retry.ec2.RunInstances", _launcher_resends)
    return client


def _launcher_resends(caught_exception: BaseException | None = None, **_: Any) -> None:
    if isinstance(caught_exception, LOST_ANSWERS):
        raise caught_exception


def retries_of(client: Any) -> int:
    """How many times the client sends a call again (its attempts less the first)."""
    return int(client.meta.config.retries.get("total_max_attempts", DEFAULT_RETRIES + 1)) - 1


def call(client: Any, method: str, offering: Offering | None = None, **params: Any) -> Any:
    """``client.<method>(**params)``; failures raise the taxonomy's errors."""
    with errors_classified(offering, client.meta.service_model.service_name):
        return getattr(client, method)(**params)


def pages(client: Any, method: str, **params: Any) -> Iterator[dict[str, Any]]:
    """Every page of a paginated ``method``, to the end."""
    with errors_classified(None):
        paginator = client.get_paginator(method)
        yield from paginator.paginate(**params, PaginationConfig={"PageSize": PAGE_SIZE})


def create_tags(client: Any, ids: Sequence[str], tags: Mapping[str, str]) -> None:
    """Every tag on every id: one CreateTags call per batch of ids."""
    tag_list = [{"Key": key, "Value": value} for key, value in sorted(tags.items())]
    for batch in batches(ids):
        call(client, "create_tags", Resources=batch, Tags=tag_list)


def batches(ids: Sequence[str]) -> Iterator[list[str]]:
    """``ids`` in lists of at most :data:`IDS_PER_CALL`."""
    for start in range(0, len(ids), IDS_PER_CALL):
        yield list(ids[start : start + IDS_PER_CALL])


@contextmanager
def errors_classified(offering: Offering | None, service: str = "ec2") -> Iterator[None]:
    """Turn botocore's exceptions into the taxonomy's (the cause kept as ``__cause__``)."""
    try:
        yield
    except ClientError as error:
        raise classify(error, offering, service) from error
    except BotoCoreError as error:
        raise ProviderError(f"{service} call failed: {error}", offering=offering) from error
