"""Capacity of one host, with per-device accounting, in integer share units.

Quantities are fixed-point (1/10,000, as Ray and ``accel.allocation`` use) so packing never
drifts. A *bin* is one host: its free scalar resources and, per accelerator resource, the
free share of each device. A fractional request must fit on one device; a whole request takes
fully free devices.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from accel.allocation import SHARE_UNITS

Vector = dict[str, int]


def share_vector(resources: Mapping[str, float]) -> Vector:
    """A resource map in share units (``accel.allocation.to_units`` converts one quantity)."""
    return {name: round(q * SHARE_UNITS) for name, q in resources.items() if q}


@dataclass(frozen=True)
class Part:
    """One bundle, in units: scalar needs and, per device resource, the share per device."""

    needs: tuple[tuple[str, int], ...]
    devices: tuple[tuple[str, int], ...]
    """(resource, units): a multiple of ``SHARE_UNITS`` takes that many whole devices; less
    than one device must fit on a single device."""

    @classmethod
    def of(cls, resources: Mapping[str, float], device_resources: Iterable[str]) -> Part:
        needs = share_vector(resources)
        device_set = set(device_resources)
        return cls(
            tuple(sorted(needs.items())),
            tuple(sorted((r, q) for r, q in needs.items() if r in device_set)),
        )


@dataclass(eq=False)
class Bin:
    """One host of a node (existing, or new in this plan)."""

    node_type: str
    unit: int
    """Which unit (node / slice) it belongs to; hosts of one slice share it."""
    free: Vector
    devices: dict[str, list[int]]
    new: bool
    spread_counts: dict[int, int] = field(default_factory=dict)
    """STRICT_SPREAD gang -> its bundles this bin hosts, of any slot (each from a different
    copy of the gang: at most as many as it has copies)."""

    def copy(self, unit: int) -> Bin:
        return Bin(
            self.node_type,
            unit,
            dict(self.free),
            {r: list(shares) for r, shares in self.devices.items()},
            self.new,
            dict(self.spread_counts),
        )

    # Fitting ----------------------------------------------------------------------------
    def fit_count(self, part: Part, limit: int) -> int:
        """How many copies of ``part`` fit (at most ``limit``)."""
        count = limit
        for name, need in part.needs:
            if need > 0:
                count = min(count, self.free.get(name, 0) // need)
                if count == 0:
                    return 0
        return self.device_fit_count(part, count)

    def device_fit_count(self, part: Part, limit: int) -> int:
        """How many copies of ``part`` the devices hold (at most ``limit``; scalar room not
        checked)."""
        count = limit
        for name, share in part.devices:
            count = min(count, self._device_fit(name, share))
        return max(count, 0)

    def _device_fit(self, name: str, share: int) -> int:
        shares = self.devices.get(name)
        if shares is None:
            return 1 << 30  # a logical resource without devices: scalars decide
        if share >= SHARE_UNITS:
            return shares.count(SHARE_UNITS) // (share // SHARE_UNITS)
        return sum(s // share for s in shares)

    def fits_all(self, parts: Iterable[Part]) -> bool:
        """Whether every part fits together (a STRICT_PACK group), checked by trial."""
        trial = self.copy(self.unit)
        for part in parts:
            if trial.fit_count(part, 1) < 1:
                return False
            trial.place(part, 1)
        return True

    # Changing ---------------------------------------------------------------------------
    def place(self, part: Part, count: int) -> None:
        """Take ``count`` copies (as :meth:`fit_count` counted them)."""
        for name, need in part.needs:
            self.free[name] = self.free.get(name, 0) - need * count
        for name, share in part.devices:
            shares = self.devices.get(name)
            if shares is not None:
                _occupy(shares, share, count)

    def grant(self, part: Part) -> list[tuple[str, int, int]]:
        """Take one copy; returns the device grants it got (resource, device, units)."""
        before = {
            name: list(self.devices[name]) for name, _ in part.devices if name in self.devices
        }
        self.place(part, 1)
        return [
            (name, index, was - now)
            for name, shares in before.items()
            for index, (was, now) in enumerate(zip(shares, self.devices[name], strict=True))
            if was != now
        ]

    def remove(self, part: Part, count: int, grants: Iterable[tuple[str, int, int]]) -> None:
        """Undo taking ``count`` copies given their grants."""
        for name, need in part.needs:
            self.free[name] = self.free.get(name, 0) + need * count
        for name, index, units in grants:
            self.devices[name][index] += units


def _occupy(shares: list[int], share: int, count: int) -> None:
    """Take ``count`` copies of ``share`` from the devices' free ``shares``: whole devices
    lowest index first, or best fit for a fraction.

    Best fit keeps taking from the device it chose until that one has too little left (its
    free share only shrinks below the others'), so copies go to the devices with enough room
    in (free share, index) order, each filled in turn: taking copies one at a time
    (:meth:`Bin.grant`) takes the same."""
    if share >= SHARE_UNITS:
        whole = count * (share // SHARE_UNITS)
        for index, free in enumerate(shares):
            if whole <= 0:
                return
            if free == SHARE_UNITS:
                shares[index] = 0
                whole -= 1
        return
    left = count
    for free, index in sorted((free, i) for i, free in enumerate(shares) if free >= share):
        if left <= 0:
            return
        copies = min(left, free // share)
        shares[index] -= copies * share
        left -= copies
    if left > 0:
        raise ValueError(f"{count} copies of a {share}-unit share do not fit on {shares}")
