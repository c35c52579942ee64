"""Mobilint accelerators. PLACEHOLDER: being implemented."""

from __future__ import annotations

from accel.families.base import AcceleratorFamily, Device
from accel.probe import HostProbe


class MobilintNpu(AcceleratorFamily):
    name = "mobilint"
    display_name = "Mobilint"
    resource_name = "MBLT"
    visible_env_var = 'QBRUNTIME_VISIBLE_DEVICES'
    allows_fractions = False

    def probe_devices(self, probe: HostProbe) -> list[Device]:
        return []
