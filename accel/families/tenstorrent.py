"""Tenstorrent accelerators. PLACEHOLDER: being implemented."""

from __future__ import annotations

from accel.families.base import AcceleratorFamily, Device
from accel.probe import HostProbe


class TenstorrentNpu(AcceleratorFamily):
    name = "tenstorrent"
    display_name = "Tenstorrent"
    resource_name = "TTNPU"
    visible_env_var = 'TT_VISIBLE_DEVICES'
    allows_fractions = False

    def probe_devices(self, probe: HostProbe) -> list[Device]:
        return []
