"""This installation's release: the distribution's name and its installed version."""

from __future__ import annotations

from importlib import metadata

DISTRIBUTION = "accel-autoscaler"


def package_version() -> str:
    """The installed version (``dev`` where the distribution is not installed)."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "dev"
