"""The AWS plugin against moto: in-process, and moto's real HTTP server for integration."""

from __future__ import annotations

import socket
import urllib.request

import boto3
import pytest
from botocore.awsrequest import AWSResponse

from providers.aws import AwsNodeProvider

REGION = "us-east-1"


@pytest.fixture(autouse=True)
def aws_credentials(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)


@pytest.fixture
def server_url():
    from moto.server import ThreadedMotoServer

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    url = f"http://127.0.0.1:{port}"
    # moto keeps one cloud per process: start every test from an empty one.
    urllib.request.urlopen(urllib.request.Request(f"{url}/moto-api/reset", method="POST")).read()
    yield url
    server.stop()


@pytest.fixture
def make_provider(server_url):
    """Providers talking to moto's server over HTTP: a before-send hook that answers a call
    keeps it from reaching the cloud at all, as a real fault would."""

    def make(cluster: str = "alpha", **config) -> AwsNodeProvider:
        return AwsNodeProvider(
            {"type": "aws", "region": REGION, "endpoint_url": server_url, **config}, cluster
        )

    return make


@pytest.fixture
def provider(make_provider) -> AwsNodeProvider:
    return make_provider()


@pytest.fixture
def ec2(server_url):
    """A plain EC2 client on the same cloud (for instances the cluster does not own)."""
    return boto3.client("ec2", region_name=REGION, endpoint_url=server_url)


@pytest.fixture
def ami(ec2) -> str:
    return ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]


def action(request) -> str:
    body = request.body or b""
    text = body.decode() if isinstance(body, bytes) else body
    return text.partition("Action=")[2].split("&")[0]


class _Body:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_kwargs):
        yield self._body


def ec2_error(request, code: str, status: int = 400) -> AWSResponse:
    body = (
        f"<Response><Errors><Error><Code>{code}</Code><Message>injected {code}</Message>"
        f"</Error></Errors><RequestID>r</RequestID></Response>"
    ).encode()
    return AWSResponse(request.url, status, {}, _Body(body))


def inject(provider: AwsNodeProvider, rule) -> list[str]:
    """Answer EC2 calls with ``rule(action, body) -> error code | None``; returns the actions
    seen (the fault injection of the issue: a botocore before-send hook)."""
    seen: list[str] = []

    def hook(request, **_kwargs):
        name = action(request)
        seen.append(name)
        body = request.body.decode() if isinstance(request.body, bytes) else request.body or ""
        code = rule(name, body)
        return ec2_error(request, code) if code else None

    provider.ec2.meta.events.register_first("before-send.ec2", hook)
    return seen
