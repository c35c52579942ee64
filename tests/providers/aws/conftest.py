"""The AWS plugin against moto: its real HTTP server for integration, in-process for units.

Faults are injected with botocore ``before-send`` hooks on the provider's clients. That only
works over HTTP: under ``mock_aws`` moto answers from a ``before-send`` hook of its own and
every hook runs, so moto would carry out a call whose answer an injected fault replaced.
"""

from __future__ import annotations

import socket
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Callable

import boto3
import pytest
from botocore.awsrequest import AWSResponse

from providers.aws import AwsNodeProvider
from providers.base import TAG_NODE_TYPE

REGION = "us-east-1"
CLUSTER = "alpha"
TAGS = {TAG_NODE_TYPE: "gpu"}


@pytest.fixture(autouse=True)
def aws_credentials(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    for name in ("AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def moto_server():
    from moto.server import ThreadedMotoServer

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def server_url(moto_server) -> str:
    """moto's server with an empty cloud (it keeps one cloud per process)."""
    reset = urllib.request.Request(f"{moto_server}/moto-api/reset", method="POST")
    urllib.request.urlopen(reset).read()
    return moto_server


@pytest.fixture
def make_provider(server_url) -> Callable[..., AwsNodeProvider]:
    def make(cluster: str = CLUSTER, **config) -> AwsNodeProvider:
        return AwsNodeProvider(
            {"type": "aws", "region": REGION, "endpoint_url": server_url, **config}, cluster
        )

    return make


@pytest.fixture
def provider(make_provider) -> AwsNodeProvider:
    return make_provider()


@pytest.fixture
def ec2(server_url):
    """A plain EC2 client on the same cloud: another user of the same account."""
    return boto3.client("ec2", region_name=REGION, endpoint_url=server_url)


@pytest.fixture(scope="session")
def amazon_ami(moto_server) -> str:
    """An AMI moto has in every fresh cloud (describing them all takes a second)."""
    client = boto3.client(
        "ec2",
        region_name=REGION,
        endpoint_url=moto_server,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    return client.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]


@pytest.fixture
def ami(amazon_ami, server_url) -> str:
    return amazon_ami


@pytest.fixture
def subnets(ec2) -> dict[str, str]:
    """moto's default VPC subnets: zone -> subnet id."""
    found = ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])
    return {s["AvailabilityZone"]: s["SubnetId"] for s in found["Subnets"]}


def node_config(ami: str, **extra) -> dict:
    return {"InstanceType": "p4d.24xlarge", "ImageId": ami, **extra}


def params_of(request) -> dict[str, str]:
    """The query parameters of an EC2 request (its body)."""
    body = request.body or b""
    text = body.decode() if isinstance(body, bytes) else body
    return dict(urllib.parse.parse_qsl(text))


class _Body:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_kwargs):
        yield self._body


def ec2_error(request, code: str, status: int = 400) -> AWSResponse:
    """The answer EC2 gives when it refuses a call with ``code``."""
    body = (
        f"<Response><Errors><Error><Code>{code}</Code><Message>injected {code}</Message>"
        f"</Error></Errors><RequestID>r</RequestID></Response>"
    ).encode()
    return AWSResponse(request.url, status, {}, _Body(body))


class Wire:
    """What the provider sends: every attempt's action, and faults answered in the cloud's
    stead by ``rule(action, params) -> error code | None``."""

    def __init__(self, provider: AwsNodeProvider) -> None:
        self.sent: Counter[str] = Counter()
        self.rules: list[Callable[[str, dict[str, str]], str | None]] = []
        provider.ec2.meta.events.register_first("before-send.ec2", self._hook)

    def fail(self, rule: Callable[[str, dict[str, str]], str | None]) -> None:
        self.rules.append(rule)

    def _hook(self, request, **_kwargs):
        params = params_of(request)
        self.sent[params.get("Action", "?")] += 1
        for rule in self.rules:
            code = rule(params.get("Action", ""), params)
            if code:
                return ec2_error(request, code)
        return None


@pytest.fixture
def wire(provider) -> Wire:
    return Wire(provider)
