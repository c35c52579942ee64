"""Per-device accounting for one accelerator resource on one node.

Shares are fixed-point (1/10,000 of a device, as Ray does) so repeated fractions never drift.
An integer request takes whole free devices, lowest index first. A fraction below one goes
best-fit: to the device with the least remaining share that still fits, so one device is
packed before the next is touched. A non-integer above one is rejected.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

SHARE_UNITS = 10_000
"""One whole device."""


class AllocationError(ValueError):
    """The request is malformed, or does not fit the devices' remaining shares."""


def to_units(quantity: float) -> int:
    """A quantity of devices in share units (0.25 -> 2500)."""
    return round(quantity * SHARE_UNITS)


def from_units(units: int) -> float:
    return units / SHARE_UNITS


@dataclass(frozen=True)
class Grant:
    """Devices given to one request: their ids and the share taken from each."""

    ids: tuple[str, ...]
    units_per_device: int

    @property
    def fraction(self) -> float:
        """Share of each granted device (1.0 for whole devices)."""
        return from_units(self.units_per_device)


class DeviceAllocator:
    """Free shares of a fixed list of devices, in index order."""

    def __init__(self, device_ids: Sequence[str]) -> None:
        if len(set(device_ids)) != len(device_ids):
            raise ValueError(f"duplicate device ids: {list(device_ids)}")
        self._order = tuple(device_ids)
        self._free = dict.fromkeys(device_ids, SHARE_UNITS)

    @property
    def device_ids(self) -> tuple[str, ...]:
        return self._order

    def free_shares(self) -> dict[str, float]:
        """Remaining share per device id."""
        return {device_id: from_units(self._free[device_id]) for device_id in self._order}

    def allocate(self, quantity: float) -> Grant:
        """Take ``quantity`` devices; raises :class:`AllocationError` if it cannot fit."""
        units = to_units(quantity)
        if units < 0:
            raise AllocationError(f"cannot request a negative quantity ({quantity:g})")
        if units == 0:
            return Grant((), 0)
        if units % SHARE_UNITS == 0:
            return self._take_whole(units // SHARE_UNITS)
        if units < SHARE_UNITS:
            return self._take_fraction(units)
        raise AllocationError(
            f"{quantity:g} devices cannot be granted: quantities above 1 must be whole numbers"
        )

    def _take_whole(self, count: int) -> Grant:
        whole = [d for d in self._order if self._free[d] == SHARE_UNITS]
        if len(whole) < count:
            raise AllocationError(
                f"{count} whole device(s) requested, {len(whole)} fully free of {len(self._order)}"
            )
        chosen = tuple(whole[:count])
        for device_id in chosen:
            self._free[device_id] = 0
        return Grant(chosen, SHARE_UNITS)

    def _take_fraction(self, units: int) -> Grant:
        fitting = [
            (self._free[d], position, d)
            for position, d in enumerate(self._order)
            if self._free[d] >= units
        ]
        if not fitting:
            largest = max(self._free.values(), default=0)
            raise AllocationError(
                f"a {from_units(units):g} share does not fit on any one device "
                f"(largest free share {from_units(largest):g})"
            )
        _, _, device_id = min(fitting)
        self._free[device_id] -= units
        return Grant((device_id,), units)

    def reserve(self, grant: Grant) -> None:
        """Re-apply a grant made earlier (e.g. replaying a ledger); must still fit."""
        for device_id in grant.ids:
            if device_id not in self._free:
                raise AllocationError(f"device {device_id!r} is not on this node")
            if self._free[device_id] < grant.units_per_device:
                raise AllocationError(f"device {device_id!r} is already taken")
        for device_id in grant.ids:
            self._free[device_id] -= grant.units_per_device

    def release(self, grant: Grant) -> None:
        for device_id in grant.ids:
            self._free[device_id] = min(SHARE_UNITS, self._free[device_id] + grant.units_per_device)


def allocators_for(pools: Mapping[str, Sequence[str]]) -> dict[str, DeviceAllocator]:
    """One allocator per resource from ``{resource: device ids}``."""
    return {resource: DeviceAllocator(ids) for resource, ids in pools.items()}
