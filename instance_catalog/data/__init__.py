"""The bundled catalog data files (see each one's header), and how a YAML one is read."""

from __future__ import annotations

from importlib import resources
from typing import Any


def load_bundled_yaml(filename: str) -> Any:
    """The bundled YAML file ``filename``, parsed safely (by libyaml where it is installed)."""
    import yaml

    text = resources.files(__name__).joinpath(filename).read_text()
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
