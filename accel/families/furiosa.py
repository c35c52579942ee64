"""Furiosa accelerators. PLACEHOLDER: being implemented."""

from __future__ import annotations

from accel.families.base import AcceleratorFamily, Device
from accel.probe import HostProbe


class FuriosaNpu(AcceleratorFamily):
    name = "furiosa"
    display_name = "Furiosa"
    resource_name = "FURIOSA"
    visible_env_var = 'FURIOSA_DEVICES'
    allows_fractions = False

    def probe_devices(self, probe: HostProbe) -> list[Device]:
        return []
