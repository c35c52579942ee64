"""Apple silicon GPU accelerators. PLACEHOLDER: being implemented."""

from __future__ import annotations

from accel.families.base import AcceleratorFamily, Device
from accel.probe import HostProbe


class AppleGpu(AcceleratorFamily):
    name = "apple"
    display_name = "Apple silicon GPU"
    resource_name = "GPU"
    visible_env_var = None
    allows_fractions = True

    def probe_devices(self, probe: HostProbe) -> list[Device]:
        return []
