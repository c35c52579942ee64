"""Rebellions accelerators. PLACEHOLDER: being implemented."""

from __future__ import annotations

from accel.families.base import AcceleratorFamily, Device
from accel.probe import HostProbe


class RebellionsNpu(AcceleratorFamily):
    name = "rebellions"
    display_name = "Rebellions"
    resource_name = "RBLN"
    visible_env_var = 'RBLN_DEVICES'
    allows_fractions = False

    def probe_devices(self, probe: HostProbe) -> list[Device]:
        return []
