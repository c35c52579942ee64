"""Google TPU accelerators. PLACEHOLDER: being implemented."""

from __future__ import annotations

from accel.families.base import AcceleratorFamily, Device
from accel.probe import HostProbe


class GoogleTpu(AcceleratorFamily):
    name = "tpu"
    display_name = "Google TPU"
    resource_name = "TPU"
    visible_env_var = 'TPU_VISIBLE_CHIPS'
    allows_fractions = False

    def probe_devices(self, probe: HostProbe) -> list[Device]:
        return []
