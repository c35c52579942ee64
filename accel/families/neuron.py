"""AWS Neuron accelerators. PLACEHOLDER: being implemented."""

from __future__ import annotations

from accel.families.base import AcceleratorFamily, Device
from accel.probe import HostProbe


class AwsNeuron(AcceleratorFamily):
    name = "neuron"
    display_name = "AWS Neuron"
    resource_name = "neuron_cores"
    visible_env_var = 'NEURON_RT_VISIBLE_CORES'
    allows_fractions = False

    def probe_devices(self, probe: HostProbe) -> list[Device]:
        return []
