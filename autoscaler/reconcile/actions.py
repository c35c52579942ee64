"""What the sub-reconcilers ask for; ``autoscaler.reconcile.apply`` carries it out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autoscaler.boot_failures import Console
from autoscaler.reconcile.observe import NodeView


@dataclass(frozen=True)
class BootFailure:
    """Evidence that a node never came up: why, how long it waited, its console."""

    cause: str
    stuck_s: float
    console: Console


@dataclass(frozen=True)
class Delete:
    """Delete a node, saying why (drained through Ray first, when ``drain``)."""

    view: NodeView
    reason: str
    drain: bool = False
    boot_failure: BootFailure | None = None


@dataclass(frozen=True)
class Launch:
    """Create ``count`` units of ``node_type`` (one create call) for ``serves``."""

    node_type: str
    count: int
    serves: Any = ()
