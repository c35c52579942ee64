"""The AWS EC2 plugin."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    # Lazy, so the offline surface (``providers.aws.cloud``) loads without boto3.
    if name == "AwsNodeProvider":
        from providers.aws.provider import AwsNodeProvider

        return AwsNodeProvider
    raise AttributeError(name)


__all__ = ["AwsNodeProvider"]
