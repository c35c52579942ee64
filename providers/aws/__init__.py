"""The AWS EC2 plugin."""

from providers.aws.provider import AwsNodeProvider

__all__ = ["AwsNodeProvider"]
