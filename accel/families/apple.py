"""The Apple silicon GPU of a Mac (Metal / MPS).

A Mac with an M-series chip has one unified GPU that no variable can hide, so there is no
visible-device variable and the device id is always ``0``. The chip and the unified memory
size come from ``sysctl -n machdep.cpu.brand_string hw.memsize`` (``Apple M2 Max``); an Intel
Mac reports an Intel CPU there and has no Apple GPU. Nothing runs on other systems.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accel.families.base import AcceleratorFamily, Device
from accel.families.tools import run_tool
from accel.families.values import MIB, parse_int
from accel.family_rules import APPLE
from accel.names import resolve_type

if TYPE_CHECKING:
    from accel.probe import HostProbe

SYSCTL = "sysctl"
SYSCTL_DIRS = ("/usr/sbin", "/sbin")
SYSCTL_KEYS = ("machdep.cpu.brand_string", "hw.memsize")


class AppleGpu(AcceleratorFamily, rules=APPLE):
    def probe_devices(self, probe: HostProbe) -> list[Device]:
        if probe.system != "Darwin":
            return []
        output = run_tool(probe, SYSCTL, ("-n", *SYSCTL_KEYS), SYSCTL_DIRS) or ""
        chip, memory = [*(line.strip() for line in output.splitlines()), "", ""][:2]
        if not chip.startswith("Apple"):
            return []
        details: dict[str, int] = {}
        if (memory_bytes := parse_int(memory)) is not None:
            details["unified_memory_mib"] = memory_bytes // MIB
        return [
            Device(
                index=0,
                id="0",
                model=chip,
                accelerator_type=resolve_type(chip, family="apple"),
                details=details,
            )
        ]
