"""Prices that contradict their own family, found when the bundled prices are built.

Two checks, each over one priced item (an EC2 instance type, a GCE GPU priced per GPU, a
Cloud TPU slice type) in every region a source prices it:

* **far from its family**: an accelerator item's on-demand prices across the regions of one
  source split in two, the cheaper group under 1/:data:`FAR_FACTOR` of the dearer one
  (sorted, the largest step between neighbours is over :data:`FAR_FACTOR` times). Regional
  list prices differ by tens of percent, not by half, so one group is wrong. Each region of
  the cheaper group is flagged when the dearer group has at least
  :data:`MIN_OTHER_REGIONS` regions; a lone dear region is flagged itself. Prices of
  different dates are not compared (a 2025 price cut in one region's newer recording is
  news, not an anomaly). Spot prices are markets that legitimately differ far more between
  regions, so they are held only to the next check.
* **spot above on-demand**: a spot price over the on-demand price of the same row (by more
  than :data:`ROUNDING`), which a spot market never asks.

The planner never trusts a flagged price silently: it plans with the *higher* of the
recorded price and the family's figure (the median of the dearer group; the spot price for
an on-demand price under it), so a doubtful price can never make an offering look cheaper
than its family, and the node type's price carries a note saying so. ``cost_per_hour`` on a
node type overrides it.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

FAR_FACTOR = 2.0
MIN_OTHER_REGIONS = 2
ROUNDING = 1.001
ON_DEMAND = "on_demand"


@dataclass(frozen=True)
class PricedRow:
    """One (item, region) with its merged prices and the source each came from."""

    cloud: str
    kind: str
    """``instance`` (EC2), ``machine``, ``gpu`` or ``tpu`` (GCP)."""
    name: str
    region: str
    on_demand: float | None
    on_demand_source: str | None
    spot: float | None
    spot_source: str | None


@dataclass(frozen=True)
class Anomaly:
    """A flagged price, the figure the planner uses instead, and why."""

    cloud: str
    kind: str
    name: str
    region: str
    market: str
    recorded: float
    planning: float
    reason: str
    source: str | None
    row: str
    """The source row the price came from, as it reads in the recorded file."""

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)

    def describe(self) -> str:
        return (
            f"{self.cloud} {self.name} {self.region} {self.market} ${self.recorded:g}/h: "
            f"{self.reason}; planning with ${self.planning:g}/h (source {self.source}: "
            f"{self.row})"
        )


def find_anomalies(
    rows: Iterable[PricedRow],
    has_accelerator: Callable[[PricedRow], bool],
    source_row: Callable[[PricedRow, str], str],
) -> list[Anomaly]:
    """Every flagged price of ``rows``; ``source_row(row, market)`` gives the recorded line."""
    rows = list(rows)
    found: dict[tuple[str, str, str, str, str], Anomaly] = {}
    groups: dict[tuple[str, str, str, str | None], list[PricedRow]] = defaultdict(list)
    for row in rows:
        groups[(row.cloud, row.kind, row.name, row.on_demand_source)].append(row)
    for members in groups.values():
        if not has_accelerator(members[0]):
            continue
        for anomaly in _far_from_family(members, ON_DEMAND, source_row):
            found[_key(anomaly)] = anomaly
    for row in rows:
        if (
            row.spot is not None
            and row.on_demand is not None
            and row.spot > row.on_demand * ROUNDING
        ):
            earlier = found.get((row.cloud, row.kind, row.name, row.region, ON_DEMAND))
            planning = max(row.spot, earlier.planning if earlier else row.on_demand)
            reason = f"spot ${row.spot:g}/h is above on-demand"
            if earlier is not None:
                reason = f"{earlier.reason}; {reason}"
            anomaly = Anomaly(
                row.cloud,
                row.kind,
                row.name,
                row.region,
                ON_DEMAND,
                row.on_demand,
                planning,
                reason,
                row.on_demand_source,
                source_row(row, ON_DEMAND),
            )
            found[_key(anomaly)] = anomaly
    return sorted(found.values(), key=_key)


def _key(anomaly: Anomaly) -> tuple[str, str, str, str, str]:
    return (anomaly.cloud, anomaly.kind, anomaly.name, anomaly.region, anomaly.market)


def _far_from_family(
    members: list[PricedRow], market: str, source_row: Callable[[PricedRow, str], str]
) -> Iterable[Anomaly]:
    priced = sorted(
        ((getattr(row, market), row) for row in members if getattr(row, market) is not None),
        key=lambda pair: pair[0],
    )
    if len(priced) <= MIN_OTHER_REGIONS or priced[0][0] <= 0:
        return
    step, split = max((priced[i + 1][0] / priced[i][0], i + 1) for i in range(len(priced) - 1))
    if step <= FAR_FACTOR:
        return
    cheap, dear = priced[:split], priced[split:]
    if len(dear) >= MIN_OTHER_REGIONS:
        family = statistics.median(price for price, _ in dear)
        low, high = dear[0][0], dear[-1][0]
        asked = f"${low:g}/h" if low == high else f"${low:g}-${high:g}/h"
        reason = (
            f"under half of the {asked} that {len(dear)} other regions of the source ask "
            f"(median ${family:g}/h)"
        )
        flagged = [(price, row, family, reason) for price, row in cheap]
    else:
        (price, row), rest = dear[0], [p for p, _ in cheap]
        family = statistics.median(rest)
        reason = f"over {FAR_FACTOR:g} times the median ${family:g}/h of the source's other regions"
        flagged = [(price, row, price, reason)]
    for price, row, planning, why in flagged:
        yield Anomaly(
            row.cloud,
            row.kind,
            row.name,
            row.region,
            market,
            price,
            max(price, planning),
            why,
            getattr(row, f"{market}_source"),
            source_row(row, market),
        )
