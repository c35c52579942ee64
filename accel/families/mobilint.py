"""Mobilint NPUs (ARIES cards, REGULUS SoCs), found by the kernel driver's device nodes.

The driver creates ``/dev/aries<N>`` for each ARIES card and ``/dev/regulus-npu<N>`` for each
REGULUS NPU; ``/dev/regulus`` and ``/dev/regulus-usb`` are auxiliary nodes, not NPUs. The qb
Runtime numbers devices by that ``N`` and reads ``QBRUNTIME_VISIBLE_DEVICES`` to decide which
it may open. Neither the driver nor the runtime names the model beyond the family, so the type
is the family (Ray's ``MOBILINT_ARIES`` / ``MOBILINT_REGULUS``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accel.families.base import AcceleratorFamily, Device
from accel.families.sysfs import numbered_nodes
from accel.family_rules import MOBILINT
from accel.names import resolve_type

if TYPE_CHECKING:
    from accel.probe import HostProbe

# Device-node prefix -> family.
DEVICE_NODES: tuple[tuple[str, str], ...] = (("aries", "ARIES"), ("regulus-npu", "REGULUS"))
RAY_NOSET_ENV_VAR = "RAY_EXPERIMENTAL_NOSET_MBLT_RT_VISIBLE_DEVICES"


class MobilintNpu(AcceleratorFamily, rules=MOBILINT):
    @property
    def noset_env_vars(self) -> tuple[str, ...]:
        """Ours, plus the name Ray's Mobilint manager actually reads."""
        return (*super().noset_env_vars, RAY_NOSET_ENV_VAR)

    def probe_devices(self, probe: HostProbe) -> list[Device]:
        """One device per ``/dev/aries<N>`` or ``/dev/regulus-npu<N>`` node."""
        found: dict[int, tuple[str, str]] = {}
        for prefix, family in DEVICE_NODES:
            for number, name in numbered_nodes(probe, "/dev", prefix):
                found.setdefault(number, (family, name))
        devices = []
        for position, number in enumerate(sorted(found)):
            family, node = found[number]
            devices.append(
                Device(
                    index=position,
                    id=str(number),
                    model=f"Mobilint {family}",
                    accelerator_type=resolve_type(family, family="mobilint"),
                    details={"device_node": f"/dev/{node}"},
                )
            )
        return devices
