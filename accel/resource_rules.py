"""What a resource name and quantity may be, and which resources one request may combine.

Shared by node overrides, ``autoscale node run`` requests and cluster demand, so a bad
name or number is refused the same way everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from accel.user_input import brief

MAX_RESOURCE_QUANTITY = 100e12
"""Ray's ceiling on any one resource quantity (``ray_constants.MAX_RESOURCE_QUANTITY``)."""

MAX_RESOURCE_NAME = 256
"""Longest resource name accepted (Ray sets none; ours keeps messages and tables sane)."""

EXCLUSIVE_RESOURCES = ("GPU", "neuron_cores")
"""Ray's rule: one task or actor may not ask for both GPUs and AWS Neuron cores."""


def name_error(name: str) -> str | None:
    """Why ``name`` is not a resource name (empty, or longer than the limit)."""
    if not name.strip():
        return "a resource name must not be empty"
    if len(name) > MAX_RESOURCE_NAME:
        return f"resource name {brief(name)} is longer than {MAX_RESOURCE_NAME} characters"
    return None


def quantity_error(quantity: object) -> str | None:
    """Why ``quantity`` is not a resource quantity (a finite number, 0 to Ray's ceiling)."""
    if isinstance(quantity, bool) or not isinstance(quantity, (int, float)):
        return f"must be a number, got {brief(quantity)}"
    if isinstance(quantity, float) and not math.isfinite(quantity):
        return f"must be a finite number, got {quantity}"
    if quantity < 0:
        return f"must not be negative, got {brief(quantity)}"
    if quantity > MAX_RESOURCE_QUANTITY:
        return f"must be at most {MAX_RESOURCE_QUANTITY:g}, got {brief(quantity)}"
    return None


def exclusive_conflict(request: Mapping[str, float]) -> str | None:
    """A message when ``request`` asks for more than one of :data:`EXCLUSIVE_RESOURCES`."""
    asked = [name for name in EXCLUSIVE_RESOURCES if request.get(name, 0) > 0]
    if len(asked) < 2:
        return None
    return (
        f"{' and '.join(asked)} cannot be requested together (a task uses GPUs or AWS "
        "Neuron cores, not both); split it into separate requests"
    )
