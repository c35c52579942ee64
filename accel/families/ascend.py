"""Huawei Ascend accelerators. PLACEHOLDER: being implemented."""

from __future__ import annotations

from accel.families.base import AcceleratorFamily, Device
from accel.probe import HostProbe


class HuaweiAscend(AcceleratorFamily):
    name = "ascend"
    display_name = "Huawei Ascend"
    resource_name = "NPU"
    visible_env_var = 'ASCEND_RT_VISIBLE_DEVICES'
    allows_fractions = True

    def probe_devices(self, probe: HostProbe) -> list[Device]:
        return []
