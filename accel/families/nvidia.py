"""NVIDIA GPU accelerators. PLACEHOLDER: being implemented."""

from __future__ import annotations

from accel.families.base import AcceleratorFamily, Device
from accel.probe import HostProbe


class NvidiaGpu(AcceleratorFamily):
    name = "nvidia"
    display_name = "NVIDIA GPU"
    resource_name = "GPU"
    visible_env_var = 'CUDA_VISIBLE_DEVICES'
    allows_fractions = True

    def probe_devices(self, probe: HostProbe) -> list[Device]:
        return []
