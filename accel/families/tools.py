"""Running a vendor tool through a :class:`HostProbe`, failing soft."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from accel.probe import HostProbe


def run_tool(
    probe: HostProbe, name: str, args: Sequence[str], dirs: Sequence[str] = ()
) -> str | None:
    """What ``name args`` printed, the tool found in ``dirs`` or on ``PATH``.

    ``None`` when the tool is missing, cannot start, hangs or exits non-zero.
    """
    exe = probe.which(name, dirs)
    result = probe.run([exe, *args]) if exe else None
    if result is None or result.returncode != 0:
        return None
    return result.stdout


def run_json(
    probe: HostProbe, name: str, args: Sequence[str], dirs: Sequence[str] = ()
) -> Any | None:
    """:func:`run_tool`'s output parsed as JSON; ``None`` also when it is not JSON."""
    output = run_tool(probe, name, args, dirs)
    try:
        return json.loads(output) if output is not None else None
    except (ValueError, RecursionError):  # not JSON, or nested past Python's limit
        return None
