"""Intel Gaudi accelerators. PLACEHOLDER: being implemented."""

from __future__ import annotations

from accel.families.base import AcceleratorFamily, Device
from accel.probe import HostProbe


class IntelGaudi(AcceleratorFamily):
    name = "gaudi"
    display_name = "Intel Gaudi"
    resource_name = "HPU"
    visible_env_var = 'HABANA_VISIBLE_MODULES'
    allows_fractions = False

    def probe_devices(self, probe: HostProbe) -> list[Device]:
        return []
