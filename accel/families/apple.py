"""The Apple silicon GPU of a Mac (Metal / MPS).

A Mac with an M-series chip has one unified GPU that no variable can hide, so there is no
visible-device variable and the device id is always ``0``. The chip and the unified memory
size come from ``sysctl -n machdep.cpu.brand_string hw.memsize`` (``Apple M2 Max``); an Intel
Mac reports an Intel CPU there and has no Apple GPU. Nothing runs on other systems.
"""

from __future__ import annotations

from accel.families.base import AcceleratorFamily, Device
from accel.names import resolve_model
from accel.probe import HostProbe

SYSCTL = "sysctl"
SYSCTL_DIRS = ("/usr/sbin", "/sbin")
SYSCTL_KEYS = ("machdep.cpu.brand_string", "hw.memsize")


class AppleGpu(AcceleratorFamily):
    name = "apple"
    display_name = "Apple silicon GPU"
    resource_name = "GPU"
    visible_env_var = None
    allows_fractions = True

    def probe_devices(self, probe: HostProbe) -> list[Device]:
        if probe.system != "Darwin":
            return []
        chip, memory = [*_sysctl(probe), "", ""][:2]
        if not chip.startswith("Apple"):
            return []
        found = resolve_model(chip, family="apple")
        details: dict[str, int] = {}
        if memory.isdigit():
            details["unified_memory_mib"] = int(memory) // (1024 * 1024)
        return [
            Device(
                index=0,
                id="0",
                model=chip,
                accelerator_type=found.name if found else None,
                details=details,
            )
        ]


def _sysctl(probe: HostProbe) -> list[str]:
    """Chip name and memory size (one value a line); empty if ``sysctl`` is missing or fails."""
    exe = probe.which(SYSCTL, SYSCTL_DIRS)
    result = probe.run([exe, "-n", *SYSCTL_KEYS]) if exe else None
    if result is None or result.returncode != 0:
        return []
    return [line.strip() for line in result.stdout.splitlines()]
