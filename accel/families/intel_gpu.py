"""Intel GPU accelerators. PLACEHOLDER: being implemented."""

from __future__ import annotations

from accel.families.base import AcceleratorFamily, Device
from accel.probe import HostProbe


class IntelGpu(AcceleratorFamily):
    name = "intel_gpu"
    display_name = "Intel GPU"
    resource_name = "GPU"
    visible_env_var = 'ONEAPI_DEVICE_SELECTOR'
    allows_fractions = True

    def probe_devices(self, probe: HostProbe) -> list[Device]:
        return []
