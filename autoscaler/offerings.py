"""Remembered launch failures per offering (instance type, zone, market), with a clock.

A block covers what the cloud's error covers, and no create is sent into it until it ends:

* Capacity (a zonal stockout): that offering in that zone, for a time-to-live; after it,
  launches probe it with a small budget of units that doubles after each success and falls
  back to one after a failure (so a flapping offering is not flooded). No capacity in any
  zone tried blocks the instance type in every zone.
* Quota: the instance type in every zone (quotas are regional or account-wide), unless the
  cloud says the quota is per zone; skipped longer; the entry names the quota to raise.
* Permission: every create of the cluster, until the entry expires; it names the IAM action.

Each repeat of a failure doubles the block (up to 8 times its time-to-live).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone

from providers.base import NodeTypeOffering, Offering
from providers.errors import AccessDeniedError, CapacityError, ProviderError, QuotaError

CAPACITY_TTL_S = 300.0
QUOTA_TTL_S = 1800.0
PERMISSION_TTL_S = 3600.0
MAX_PROBE_BUDGET = 64
EVERY = "*"
"""An instance type or market that a block covers in full (a permission error)."""
ACCELERATOR = "accelerator_type:"
"""A block's instance type starting so covers every type with that accelerator (a GPU
quota)."""


@dataclass(frozen=True)
class OfferingRecord:
    instance_type: str
    zone: str | None
    market: str
    kind: str
    """``capacity``, ``quota`` or ``permission``."""
    until: float
    code: str | None
    message: str
    failures: int = 1
    probe_budget: int = 1
    detail: str = ""
    """The quota to raise or the IAM action to grant."""

    @property
    def key(self) -> str:
        return offering_key(Offering(self.instance_type, self.zone, self.market))


def offering_key(offering: Offering) -> str:
    return f"{offering.instance_type}/{offering.zone or '*'}/{offering.market}"


class UnavailableOfferings:
    """The cache, persisted through ``save(key, record dict or None to delete)``."""

    def __init__(
        self,
        clock: Callable[[], float],
        records: dict[str, dict] | None = None,
        save: Callable[[str, dict | None], None] | None = None,
    ) -> None:
        self._clock = clock
        self._save = save or (lambda key, body: None)
        self._records = {key: OfferingRecord(**body) for key, body in (records or {}).items()}

    def record_failure(self, error: ProviderError) -> OfferingRecord | None:
        """Remember a failed launch as the block its error covers; None for errors that say
        nothing about availability."""
        ttl, kind, detail = self._classify(error)
        if kind is None or (error.offering is None and kind != "permission"):
            return None
        covered = _covered(error, kind)
        key = offering_key(covered)
        previous = self._records.get(key)
        now = self._clock()
        record = OfferingRecord(
            instance_type=covered.instance_type,
            zone=covered.zone,
            market=covered.market,
            kind=kind,
            until=now + ttl * min(2 ** (previous.failures if previous else 0), 8),
            code=error.code,
            message=error.raw_message,
            failures=(previous.failures + 1) if previous else 1,
            probe_budget=1,
            detail=detail,
        )
        self._store(record)
        return record

    def record_success(self, offering: Offering) -> None:
        """A launch worked: a probed offering earns a bigger budget next time."""
        record = self._records.get(offering_key(offering))
        if record is None or self._clock() < record.until:
            return
        if record.probe_budget * 2 > MAX_PROBE_BUDGET:
            del self._records[record.key]  # trusted again: no budget at all
            self._delete(record.key)
        else:
            self._store(replace(record, probe_budget=record.probe_budget * 2))

    def budget(self, offering: NodeTypeOffering) -> int | None:
        """Units of a node type that may be launched now: None (unlimited) while any of its
        zones is clear, else the largest probe budget among its zones (0 while every one is
        blocked). A record without a zone (the whole type failed everywhere) blocks every
        zone; a record for one zone blocks only that zone."""
        budgets = [self._zone_budget(unit) for unit in offering.offerings()]
        if any(budget is None for budget in budgets):
            return None
        return max(budgets)

    def open_zones(self, offering: NodeTypeOffering) -> tuple[str, ...]:
        """The node type's zones no block covers now, in its order (empty when it names
        none: the cloud picks)."""
        return tuple(
            unit.zone for unit in offering.offerings() if unit.zone and self._zone_budget(unit) != 0
        )

    def blocked_reason(self, offering: NodeTypeOffering) -> str:
        """Why every offering of the node type is blocked, in the cloud's words."""
        now = self._clock()
        covering = {
            r.key: r for unit in offering.offerings() for r in self._covering(unit) if now < r.until
        }
        return (
            "; ".join(
                f"{r.kind} blocked in {r.zone or 'every zone'} until {utc(r.until)}"
                + (f" (needs {r.detail})" if r.detail else "")
                + f": {r.message}"
                for r in sorted(covering.values(), key=lambda r: r.until)
            )
            or "no capacity in any of its offerings now"
        )

    def accelerator_block(self, resources: Mapping[str, float], market: str) -> str | None:
        """Why a node type with ``resources`` is blocked by a quota on its accelerator, if it
        is (every instance type with that accelerator draws on the quota)."""
        now = self._clock()
        for r in self.active():
            if (
                r.instance_type.startswith(ACCELERATOR)
                and r.instance_type in resources
                and r.market in (market, EVERY)
                and now < r.until
            ):
                needs = f" (needs {r.detail})" if r.detail else ""
                return (
                    f"quota blocked for {r.instance_type} until {utc(r.until)}{needs}: {r.message}"
                )
        return None

    def _covering(self, offering: Offering) -> list[OfferingRecord]:
        return [
            r
            for r in self._records.values()
            if r.instance_type in (offering.instance_type, EVERY)
            and r.market in (offering.market, EVERY)
            and r.zone in (None, offering.zone)
        ]

    def _zone_budget(self, offering: Offering) -> int | None:
        records = self._covering(offering)
        if not records:
            return None
        now = self._clock()
        return min(0 if now < r.until else r.probe_budget for r in records)

    def active(self) -> list[OfferingRecord]:
        """Entries still blocking, soonest to expire first."""
        now = self._clock()
        return sorted((r for r in self._records.values() if r.until > now), key=lambda r: r.until)

    def _store(self, record: OfferingRecord) -> None:
        self._records[record.key] = record
        self._save(record.key, asdict(record))

    def _delete(self, key: str) -> None:
        self._save(key, None)

    @staticmethod
    def _classify(error: ProviderError) -> tuple[float, str | None, str]:
        if isinstance(error, CapacityError):
            return CAPACITY_TTL_S, "capacity", ""
        if isinstance(error, QuotaError):
            return QUOTA_TTL_S, "quota", error.quota or ""
        if isinstance(error, AccessDeniedError):
            return PERMISSION_TTL_S, "permission", error.action or ""
        return 0.0, None, ""


def _covered(error: ProviderError, kind: str) -> Offering:
    """What a failure blocks: a permission error every create, a quota the instance type in
    every zone (unless the quota is per zone), a stockout the offering as the error names it."""
    if kind == "permission":
        return Offering(EVERY, None, EVERY)
    offering = error.offering
    if kind == "quota" and not getattr(error, "zonal", False):
        accelerator = getattr(error, "accelerator", None)
        what = f"{ACCELERATOR}{accelerator}" if accelerator else offering.instance_type
        return Offering(what, None, offering.market)
    return offering


def utc(at: float) -> str:
    """``at`` (seconds since the epoch) as a UTC date and time."""
    return datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
