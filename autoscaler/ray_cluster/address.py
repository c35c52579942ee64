"""A Ray cluster's address as we take it: the GCS's ``host:port``."""

from __future__ import annotations


def check_address(address: str) -> str:
    """``address`` if it is ``host:port``; else ValueError with one line saying what is."""
    host, _, port = address.strip().rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536 or "/" in host:
        raise ValueError(
            f"Ray address {address[:80]!r} is not host:port (the Ray head's GCS address, "
            "e.g. 10.0.0.5:6379)"
        )
    return address.strip()
