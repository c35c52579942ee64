"""Catalog look-ups for the clouds' node-config parsing, failing as configuration errors."""

from __future__ import annotations

from instance_catalog.catalog import UnknownInstanceTypeError, load_catalog
from instance_catalog.model import InstanceType
from providers.errors import InvalidConfigError


def catalog_entry(name: str, cloud: str, field: str) -> InstanceType:
    """The catalogued instance type ``name`` on ``cloud``; the error names ``field`` and the
    closest names."""
    try:
        return load_catalog().get(name, cloud)
    except UnknownInstanceTypeError as err:
        hint = f"; closest: {', '.join(err.suggestions)}" if err.suggestions else ""
        raise InvalidConfigError(
            f"unknown instance type {name!r} on {cloud}{hint}", field=field
        ) from None
