"""Intel discrete GPUs (Data Center GPU Max / Flex, Arc), found in the DRM sysfs tree.

Each ``/sys/class/drm/card<N>`` whose PCI function has vendor ``0x8086`` and a display class
is a candidate; connector entries (``card0-DP-1``) and the integrated GPU (always at PCI
``0000:00:02.0``) are skipped. Devices are numbered in PCI address order, the order Level Zero
uses with ``ZE_ENABLE_PCI_ID_DEVICE_ORDER``.

Two variables restrict devices, in layers. ``ZE_AFFINITY_MASK`` (the Level Zero driver) keeps
some devices first and the runtime numbers what is left from 0; ``ONEAPI_DEVICE_SELECTOR``
(the SYCL runtime, syntax ``[!]backend:devices;...``) indexes into that. A term without a
backend (``1,3``, as Ray's documentation writes it) means Level Zero, as Ray reads it. A
selector that cannot be parsed is ignored with a warning, never taken to mean "no GPUs". A
worker gets ``ONEAPI_DEVICE_SELECTOR=level_zero:<ids>`` as Ray sets it; an inherited
``ZE_AFFINITY_MASK`` is left as it is.

Ids are whole cards. A multi-tile card (Max 1550: two stacks) is one device here; its tile
count is in ``details["tiles"]``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from accel.families.base import NO_DEVICE_MARKERS, AcceleratorFamily, Device
from accel.families.sysfs import linked_pci_address, numbered_nodes, read_hex
from accel.families.values import bytes_to_mib, parse_int, pci_address
from accel.family_rules import INTEL_GPU
from accel.user_input import brief

if TYPE_CHECKING:
    from accel.probe import HostProbe

INTEL_VENDOR_ID = 0x8086
DISPLAY_CLASS = 0x03
INTEGRATED_GPU_ADDRESS = "0000:00:02.0"
ONEAPI_DEVICE_SELECTOR = INTEL_GPU.visible_env_var
ZE_AFFINITY_MASK = "ZE_AFFINITY_MASK"
LEVEL_ZERO_BACKENDS = frozenset({"level_zero", "ext_oneapi_level_zero", "*"})
SYCL_BACKENDS = LEVEL_ZERO_BACKENDS | {
    "opencl",
    "cuda",
    "hip",
    "ext_oneapi_cuda",
    "ext_oneapi_hip",
    "native_cpu",
}
_DEVICE_SPEC = re.compile(r"^(?:\*|gpu|cpu|fpga|acc|\d+(?:\.(?:\d+|\*)){0,2})$")
ALL_DEVICES = frozenset({"*", "gpu"})
NO_GPU_SELECTOR = "!*:gpu"
"""Selector for a worker given no GPU: every backend's GPUs excluded."""

# PCI device id -> (canonical type, vendor model string); from Intel's compute-runtime tables.
INTEL_GPU_MODELS: dict[int, tuple[str, str]] = {
    0x0BD5: ("Intel-GPU-Max-1550", "Intel(R) Data Center GPU Max 1550"),
    0x0BD6: ("Intel-GPU-Max-1550", "Intel(R) Data Center GPU Max 1550"),
    0x0BD1: ("Intel-GPU-Max-1450", "Intel(R) Data Center GPU Max 1450"),
    0x0B69: ("Intel-GPU-Max-1450", "Intel(R) Data Center GPU Max 1450"),
    0x0BD7: ("Intel-GPU-Max-1350", "Intel(R) Data Center GPU Max 1350"),
    0x0BD8: ("Intel-GPU-Max-1350", "Intel(R) Data Center GPU Max 1350"),
    0x0BD9: ("Intel-GPU-Max-1100", "Intel(R) Data Center GPU Max 1100"),
    0x0BDA: ("Intel-GPU-Max-1100", "Intel(R) Data Center GPU Max 1100"),
    0x0BDB: ("Intel-GPU-Max-1100", "Intel(R) Data Center GPU Max 1100"),
    0x56C0: ("Intel-GPU-Flex-170", "Intel(R) Data Center GPU Flex 170"),
    0x56C1: ("Intel-GPU-Flex-140", "Intel(R) Data Center GPU Flex 140"),
    0x56A0: ("Intel-GPU-Arc-A770", "Intel(R) Arc(TM) A770 Graphics"),
    0xE20B: ("Intel-GPU-Arc-B580", "Intel(R) Arc(TM) B580 Graphics"),
}


class IntelGpu(AcceleratorFamily, rules=INTEL_GPU):
    def probe_devices(self, probe: HostProbe) -> list[Device]:
        """Discrete Intel GPUs, after ``ZE_AFFINITY_MASK`` and ``!`` selector exclusions."""
        from accel.probe import natural_key  # loaded with the probe (the planner needs neither)

        devices = sorted(
            (
                device
                for _, card in numbered_nodes(probe, "/sys/class/drm", "card")
                if (device := _card_device(probe, card)) is not None
            ),
            key=lambda d: natural_key(d.details["pci_bus_id"]),
        )
        mask = probe.env.get(ZE_AFFINITY_MASK, "").strip()
        if mask:
            wanted = _root_ids(mask.split(","))
            devices = [devices[int(i)] for i in wanted if int(i) < len(devices)]
        devices = [replace(d, index=i, id=str(i)) for i, d in enumerate(devices)]
        excluded = _excluded_ids(_selector_terms(probe.env))
        if excluded is None:
            return []
        return [d for d in devices if d.id not in excluded]

    def visible_ids(self, env: Mapping[str, str]) -> list[str] | None:
        """Level Zero ids the selector keeps; ``None`` when unset or selecting every GPU."""
        if ONEAPI_DEVICE_SELECTOR not in env:
            return None
        if env[ONEAPI_DEVICE_SELECTOR].strip() in NO_DEVICE_MARKERS:
            return []
        return _selected_ids(_selector_terms(env))

    def visible_env_warnings(self, env: Mapping[str, str]) -> tuple[str, ...]:
        value = env.get(ONEAPI_DEVICE_SELECTOR, "").strip()
        if value in NO_DEVICE_MARKERS:
            return ()
        try:
            parse_selector(value)
        except ValueError as err:
            return (
                f"{ONEAPI_DEVICE_SELECTOR}={brief(value)} is ignored: {err} (expected e.g. "
                "level_zero:0,1 or 0,1); every Intel GPU stays visible",
            )
        return ()

    def visible_devices_env(
        self, ids: Sequence[str], node_device_count: int
    ) -> dict[str, str | None]:
        if not ids:
            return {ONEAPI_DEVICE_SELECTOR: NO_GPU_SELECTOR}
        return {ONEAPI_DEVICE_SELECTOR: "level_zero:" + ",".join(ids)}


def _card_device(probe: HostProbe, card: str) -> Device | None:
    base = f"/sys/class/drm/{card}"
    if read_hex(probe, f"{base}/device/vendor") != INTEL_VENDOR_ID:
        return None
    pci_class = read_hex(probe, f"{base}/device/class")
    if pci_class is not None and pci_class >> 16 != DISPLAY_CLASS:
        return None
    bus_id = _bus_id(probe, f"{base}/device")
    if bus_id is None or bus_id == INTEGRATED_GPU_ADDRESS:
        return None
    device_id = read_hex(probe, f"{base}/device/device")
    accelerator_type, model = INTEL_GPU_MODELS.get(device_id or -1, (None, None))
    details: dict[str, Any] = {"pci_bus_id": bus_id, "drm_card": card}
    if device_id is not None:
        details["pci_device_id"] = f"0x{device_id:04x}"
    tiles = len(probe.glob(f"{base}/gt/gt*")) or len(probe.glob(f"{base}/device/tile*"))
    if tiles:
        details["tiles"] = tiles
    return Device(
        index=0,
        id="",
        model=model or f"Intel GPU [8086:{device_id or 0:04x}]",
        accelerator_type=accelerator_type,
        memory_mib=_memory_mib(probe, base),
        details=details,
    )


def _bus_id(probe: HostProbe, device_dir: str) -> str | None:
    """The PCI address a ``device`` link points at, from its ``uevent`` ``PCI_SLOT_NAME``."""
    for line in (probe.read_text(f"{device_dir}/uevent") or "").splitlines():
        key, _, value = line.partition("=")
        if key == "PCI_SLOT_NAME" and value:
            return pci_address(value)
    return linked_pci_address(probe, device_dir)


def _memory_mib(probe: HostProbe, card_dir: str) -> int | None:
    """Local memory: i915 ``lmem_total_bytes``, else the xe driver's per-tile VRAM sizes."""
    total = parse_int(probe.read_text(f"{card_dir}/lmem_total_bytes"))
    if not total:
        sizes = probe.glob(f"{card_dir}/device/tile*/physical_vram_size_bytes")
        total = sum(parse_int(probe.read_text(path)) or 0 for path in sizes)
    return bytes_to_mib(total)


@dataclass(frozen=True)
class SelectorTerm:
    """One ``[!]backend:devices`` term of ``ONEAPI_DEVICE_SELECTOR``."""

    negative: bool
    level_zero: bool
    specs: tuple[str, ...]


def parse_selector(value: str) -> list[SelectorTerm]:
    """The selector's terms; raises ``ValueError`` naming the first one it cannot read."""
    terms: list[SelectorTerm] = []
    for raw in value.split(";"):
        text = raw.strip()
        if not text:
            continue
        body = text.removeprefix("!")
        backend, sep, devices = body.partition(":")
        if not sep:
            backend, devices = "level_zero", body
        backend = backend.strip().lower()
        if backend not in SYCL_BACKENDS:
            raise ValueError(f"unknown backend {brief(backend)}")
        specs = tuple(spec.strip().lower() for spec in devices.split(","))
        for spec in specs:
            if not _DEVICE_SPEC.match(spec):
                raise ValueError(f"cannot read device {brief(spec)}")
        terms.append(SelectorTerm(text.startswith("!"), backend in LEVEL_ZERO_BACKENDS, specs))
    return terms


def _selector_terms(env: Mapping[str, str]) -> list[SelectorTerm]:
    """Terms of the selector in ``env``; none when unset or unreadable (see the warning)."""
    try:
        return parse_selector(env.get(ONEAPI_DEVICE_SELECTOR, ""))
    except ValueError:
        return []


def _selected_ids(terms: Sequence[SelectorTerm]) -> list[str] | None:
    """Ids the positive terms select, in selector order; ``None`` for "every GPU"."""
    positive = [term for term in terms if not term.negative]
    if not positive:
        return None  # only exclusions: every other device stays (applied at probe time)
    ids: list[str] = []
    for term in positive:
        if not term.level_zero:
            continue
        if ALL_DEVICES.intersection(term.specs):
            return None
        ids.extend(_root_ids(term.specs))
    return list(dict.fromkeys(ids))


def _excluded_ids(terms: Sequence[SelectorTerm]) -> set[str] | None:
    """Ids the ``!`` terms exclude; ``None`` when they exclude every GPU."""
    ids: set[str] = set()
    for term in terms:
        if not (term.negative and term.level_zero):
            continue
        if ALL_DEVICES.intersection(term.specs):
            return None
        ids.update(_root_ids(term.specs))
    return ids


def _root_ids(specs: Sequence[str]) -> list[str]:
    """Card ids of ``N``, ``N.M`` and ``N.*`` specs (a sub-device keeps its card)."""
    roots = [spec.strip().partition(".")[0] for spec in specs]
    return [root for root in dict.fromkeys(roots) if parse_int(root) is not None]
