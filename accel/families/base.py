"""The interface every accelerator family implements, and the records detection returns.

A family is a small class: a resource name, a visible-device variable, whether fractions
are allowed, and one method that lists the physical devices through a :class:`HostProbe`.
Filtering by the visible-device variable, type tokens and quantity validation are shared.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar

from accel.families.values import parse_int
from accel.family_rules import FamilyRules
from accel.names import common_tokens, type_for_tokens

if TYPE_CHECKING:
    from accel.probe import HostProbe

NO_DEVICE_MARKERS = frozenset({"", "NoDevFiles"})


@dataclass(frozen=True)
class Device:
    """One physical accelerator (or, for Neuron, one NeuronCore) on this node."""

    index: int
    """Position among this node's usable devices of the family, from 0."""
    id: str
    """The id a worker gets in the family's visible-device variable."""
    model: str
    """The vendor's own model string, e.g. ``NVIDIA A100-SXM4-80GB``."""
    accelerator_type: str | None
    """Canonical type name from :mod:`accel.names`, ``None`` if unknown."""
    uuid: str | None = None
    memory_mib: int | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    share: float = 1.0
    """The part of one physical device this is: 1, or a fraction for a partition a cloud
    sells as one GPU (AWS g6f: 0.125). The family's resource counts these shares."""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["details"] = dict(self.details)
        return data


@dataclass(frozen=True)
class FamilyDetection:
    """What one family found on this node."""

    family: str
    resource: str
    devices: tuple[Device, ...]
    accelerator_type: str | None
    """The node's canonical type: the most specific token every device shares."""
    tokens: tuple[str, ...]
    """Every ``accelerator_type:<T>`` token the node truthfully advertises."""
    extra_resources: Mapping[str, float] = field(default_factory=dict)
    """Family extras, e.g. ``TPU-v4-16-head`` on TPU worker 0 and the slice-name resource."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Facts worth reporting that are not resources (TPU pod type, worker id, ...)."""
    warnings: tuple[str, ...] = ()

    @property
    def count(self) -> int:
        return len(self.devices)

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "resource": self.resource,
            "count": self.count,
            "accelerator_type": self.accelerator_type,
            "tokens": list(self.tokens),
            "extra_resources": dict(self.extra_resources),
            "labels": dict(self.labels),
            "warnings": list(self.warnings),
            "devices": [device.to_dict() for device in self.devices],
        }


class AcceleratorFamily(ABC):
    """One vendor's accelerators: detection, visible-device variable and request rules.

    A subclass names its rules (``class NvidiaGpu(AcceleratorFamily, rules=NVIDIA)``); their
    fields are its class attributes."""

    rules: ClassVar[FamilyRules]
    name: ClassVar[str]
    display_name: ClassVar[str]
    resource_name: ClassVar[str]
    visible_env_var: ClassVar[str | None]
    allows_fractions: ClassVar[bool]

    def __init_subclass__(cls, rules: FamilyRules, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.rules = rules
        cls.name = rules.name
        cls.display_name = rules.display_name
        cls.resource_name = rules.resource_name
        cls.visible_env_var = rules.visible_env_var
        cls.allows_fractions = rules.allows_fractions

    # Detection ------------------------------------------------------------------------
    @abstractmethod
    def probe_devices(self, probe: HostProbe) -> list[Device]:
        """Every physical device of this family on the host, ids as the vendor numbers them.

        Must fail soft: any missing library, file or command means "none found".
        """

    def visible_ids(self, env: Mapping[str, str]) -> list[str] | None:
        """Ids the visible-device variable restricts us to; ``None`` when it is unset."""
        if self.visible_env_var is None or self.visible_env_var not in env:
            return None
        return parse_id_list(env[self.visible_env_var])

    def visible_env_warnings(self, env: Mapping[str, str]) -> tuple[str, ...]:
        """Problems with the visible-device variables (e.g. a value that cannot be parsed)."""
        return ()

    def extra_resources(
        self, probe: HostProbe, devices: Sequence[Device]
    ) -> tuple[dict[str, float], dict[str, str]]:
        """Family-specific extra resources and labels (TPU slice head, ...)."""
        return {}, {}

    def detect(self, probe: HostProbe) -> FamilyDetection | None:
        """Devices usable on this node after the visible-device filter, with type tokens."""
        devices = self.probe_devices(probe)
        visible = self.visible_ids(probe.env)
        if visible is not None:
            devices = _filter_visible(devices, visible)
        if not devices:
            return None
        devices = [replace(device, index=position) for position, device in enumerate(devices)]
        tokens = common_tokens([d.accelerator_type for d in devices])
        warnings = self.visible_env_warnings(probe.env)
        if len({d.accelerator_type for d in devices}) > 1:
            warnings += (
                f"{self.display_name}: mixed models on one node "
                f"({', '.join(sorted({d.model for d in devices}))}); "
                f"advertising only the tokens they share: {list(tokens) or 'none'}",
            )
        extras, labels = self.extra_resources(probe, devices)
        return FamilyDetection(
            family=self.name,
            resource=self.resource_name,
            devices=tuple(devices),
            accelerator_type=type_for_tokens(tokens),
            tokens=tokens,
            extra_resources=extras,
            labels=labels,
            warnings=warnings,
        )

    # Requests and workers --------------------------------------------------------------
    def validate_quantity(self, quantity: float) -> str | None:
        """An error message if ``quantity`` of this resource cannot be requested, else None."""
        return self.rules.validate_quantity(quantity)

    @property
    def noset_env_vars(self) -> tuple[str, ...]:
        """Variables that, when set to a non-empty value, stop us setting the visible ids.

        ``AUTOSCALE_NOSET_<VAR>`` is ours; Ray's ``RAY_EXPERIMENTAL_NOSET_<VAR>`` is honoured
        too so existing deployments keep working.
        """
        if self.visible_env_var is None:
            return ()
        return (
            f"AUTOSCALE_NOSET_{self.visible_env_var}",
            f"RAY_EXPERIMENTAL_NOSET_{self.visible_env_var}",
        )

    def visible_devices_env(
        self, ids: Sequence[str], node_device_count: int
    ) -> dict[str, str | None]:
        """Variables that restrict a worker to ``ids`` (``None`` means: unset it)."""
        if self.visible_env_var is None:
            return {}
        return {self.visible_env_var: ",".join(ids)}

    def worker_env(
        self, ids: Sequence[str], node_device_count: int, env: Mapping[str, str]
    ) -> dict[str, str | None]:
        """:meth:`visible_devices_env` unless the user opted out with a NOSET variable."""
        if any(env.get(var) for var in self.noset_env_vars):
            return {}
        return self.visible_devices_env(ids, node_device_count)


def parse_id_list(value: str) -> list[str]:
    """Parse ``"1,3"`` into ``["1", "3"]``; empty and ``NoDevFiles`` mean no devices."""
    value = value.strip()
    if value in NO_DEVICE_MARKERS:
        return []
    return [part.strip() for part in value.split(",") if part.strip()]


def parse_id_ranges(value: str) -> list[str]:
    """Parse ids with ranges, e.g. ``"0-3,6"`` into ``["0", "1", "2", "3", "6"]``."""
    ids: list[str] = []
    for part in parse_id_list(value):
        low, sep, high = part.partition("-")
        first, last = parse_int(low), parse_int(high)
        if sep and first is not None and last is not None:
            ids.extend(str(i) for i in range(first, last + 1))
        else:
            ids.append(part)
    return ids


def _filter_visible(devices: Sequence[Device], visible: Sequence[str]) -> list[Device]:
    """Devices named by the visible-device variable, in its order.

    A token may be the vendor index or the device UUID (``CUDA_VISIBLE_DEVICES=GPU-8f3e...``);
    the device keeps the token as its id so a worker gets ids in the form the user used.
    """
    by_token: dict[str, Device] = {}
    for device in devices:
        by_token.setdefault(device.id, device)
        if device.uuid:
            by_token.setdefault(device.uuid, device)
    chosen: list[Device] = []
    for token in visible:
        device = by_token.get(token)
        if device is not None and all(d.index != device.index for d in chosen):
            chosen.append(replace(device, id=token))
    return chosen
