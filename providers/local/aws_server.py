"""The local EC2: moto's server, with two things a local cloud needs that moto fakes:

- private addresses on this machine's loopback network (``127.x.y.z``), so what a node's
  boot data says about another node (the head's report endpoint, Ray's address) reaches it;
- ``GetConsoleOutput`` returns the simulated host's console (its boot log) once it boots;
- every instance type the catalog knows is offered (``aws_types``), as on the real EC2.

Run: ``python -m providers.local.aws_server -H 127.0.0.1 -p 5000 --consoles DIR``.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

from providers.local.aws_types import teach_catalog_types
from providers.local.consoles import read_console


def loopback_ip(cidr: str | None = None, ipv6: bool = False) -> str:
    """A private address on the loopback network (an IPv6 one stays moto's)."""
    if ipv6:
        return f"2001::cafe:{random.getrandbits(16):x}"
    return f"127.{random.randrange(1, 255)}.{random.randrange(255)}.{random.randrange(1, 255)}"


def serve(consoles: Path | None, argv: list[str]) -> None:
    from moto import server
    from moto.core.responses import ActionResult
    from moto.core.utils import utcnow
    from moto.ec2.models import elastic_network_interfaces, instances
    from moto.ec2.responses.general import SAMPLE_CONSOLE_OUTPUT, General
    from moto.ec2.utils import Base64EncodedString

    elastic_network_interfaces.random_private_ip = loopback_ip
    instances.random_private_ip = loopback_ip

    def get_console_output(self: General) -> ActionResult:
        instance = self.ec2_backend.get_instance(self._get_param("InstanceId"))
        text = read_console(consoles, instance.id) or SAMPLE_CONSOLE_OUTPUT
        output = Base64EncodedString.from_raw_string(text)
        return ActionResult({"InstanceId": instance.id, "Timestamp": utcnow(), "Output": output})

    General.get_console_output = get_console_output
    teach_catalog_types()
    server.main(argv)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--consoles", type=Path)
    known, rest = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    serve(known.consoles, rest)


if __name__ == "__main__":
    main()
