"""A Ray task naming one of ``ray.util.accelerators``' constants finds nodes advertising it."""

from __future__ import annotations

import pytest

from accel.names import all_names, lookup, tokens_for

accelerators = pytest.importorskip("ray.util.accelerators")

RAY_CONSTANTS = sorted(
    {v for k, v in vars(accelerators).items() if k.isupper() and isinstance(v, str)}
)


@pytest.mark.parametrize("ray_name", RAY_CONSTANTS)
def test_every_ray_constant_is_an_advertised_token(ray_name):
    advertised = {token for name in all_names() for token in tokens_for(name)}
    assert ray_name in advertised


def test_ray_names_resolve_to_our_canonical_types():
    assert lookup("MXC500").name == "MetaX-C500"
    assert lookup("M2-Max").name == "Apple-M2-Max"
    assert tokens_for("Mobilint-ARIES") == ("MOBILINT_ARIES", "Mobilint-ARIES")
