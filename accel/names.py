"""One name for one accelerator: canonical type names, aliases and vendor-name parsing.

Detection (``accel.families``) and the instance catalog both resolve vendor strings here, so a
node advertises exactly the ``accelerator_type:<T>`` tokens the catalog promised.

A type may have a *generic* parent: an A100 80GB is ``A100-80G`` whose generic is ``A100``, and
a node with one advertises both tokens. Names follow Ray's ``ray.util.accelerators`` constants
where Ray has one, so existing ``accelerator_type=`` values keep working.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache

from accel.user_input import MATCH_LIMIT, brief


@dataclass(frozen=True)
class AcceleratorType:
    """A canonical accelerator type."""

    name: str
    family: str
    generic: str | None = None
    """The parent type this one is a variant of (``A100`` for ``A100-80G``)."""
    memory_gib: float | None = None
    """Device memory that distinguishes this variant from its siblings; on a type sold in
    partitions (L4, L40S), the whole device's, which a partition's share is measured by."""
    patterns: tuple[str, ...] = ()
    """Regexes matched against a normalised vendor model string (upper case, words split)."""
    aliases: tuple[str, ...] = ()
    """Other spellings users type; matched case-insensitively."""
    partitioned: bool = False
    """A fraction of a physical device sold as one (AWS g6f/gr6f); never a whole device."""


def _t(name: str, family: str, *patterns: str, **kwargs) -> AcceleratorType:
    return AcceleratorType(name, family, patterns=tuple(patterns), **kwargs)


def _v(
    name: str, generic: str, family: str, memory_gib: float | None = None, *patterns: str, **kwargs
) -> AcceleratorType:
    return AcceleratorType(
        name, family, generic=generic, memory_gib=memory_gib, patterns=tuple(patterns), **kwargs
    )


# Order inside a family does not matter: the longest matching pattern wins, ties go to the
# earlier entry. Patterns see the model string upper-cased with "_" turned into spaces.
ACCELERATOR_TYPES: tuple[AcceleratorType, ...] = (
    # NVIDIA ---------------------------------------------------------------------------
    _t("K80", "nvidia", r"\bK80\b"),
    _t("M60", "nvidia", r"\bM60\b"),
    _t("P4", "nvidia", r"\bP4\b"),
    _t("P40", "nvidia", r"\bP40\b"),
    _t("P100", "nvidia", r"\bP100\b"),
    _t("V100", "nvidia", r"\bV100\b"),
    _v("V100-16G", "V100", "nvidia", 16, r"\bV100\b.*\b16GB\b", aliases=("V100-16GB",)),
    _v("V100-32G", "V100", "nvidia", 32, r"\bV100\b.*\b32GB\b", aliases=("V100-32GB",)),
    _t("T4", "nvidia", r"\bT4\b"),
    _v("T4G", "T4", "nvidia", None, r"\bT4G\b", aliases=("T4-G",)),
    _t("A2", "nvidia", r"\bA2\b"),
    _t("A10", "nvidia", r"\bA10\b"),
    _t("A10G", "nvidia", r"\bA10G\b"),
    _t("A16", "nvidia", r"\bA16\b"),
    _t("A30", "nvidia", r"\bA30\b"),
    _t("A40", "nvidia", r"\bA40\b"),
    _t("A100", "nvidia", r"\bA100\b"),
    _v(
        "A100-40G",
        "A100",
        "nvidia",
        40,
        r"\bA100\b.*\b40GB\b",
        aliases=("A100-40GB", "A100-SXM4-40GB", "A100-PCIE-40GB"),
    ),
    _v(
        "A100-80G",
        "A100",
        "nvidia",
        80,
        r"\bA100\b.*\b80GB\b",
        aliases=("A100-80GB", "A100-SXM4-80GB", "A100-PCIE-80GB"),
    ),
    _t("L4", "nvidia", r"\bL4\b", memory_gib=24),
    _t("L40", "nvidia", r"\bL40\b"),
    _t("L40S", "nvidia", r"\bL40S\b", memory_gib=48),
    _t("H100", "nvidia", r"\bH100\b"),
    _v(
        "H100-80G",
        "H100",
        "nvidia",
        80,
        r"\bH100\b.*\b80GB\b",
        r"\bH100\b.*\bPCIE\b",
        aliases=("H100-80GB", "H100-SXM", "H100-SXM5", "H100-PCIE", "H100-MEGA"),
    ),
    _v("H100-NVL", "H100", "nvidia", 94, r"\bH100\b.*\bNVL\b", aliases=("H100-94G",)),
    _t("H200", "nvidia", r"\bH200\b"),
    _t("H20", "nvidia", r"\bH20\b"),
    _t("GH200", "nvidia", r"\bGH200\b"),
    _t("B200", "nvidia", r"\bB200\b"),
    _t("B300", "nvidia", r"\bB300\b"),
    _t("GB200", "nvidia", r"\bGB200\b"),
    _t("GB300", "nvidia", r"\bGB300\b"),
    _t(
        "RTX-PRO-6000",
        "nvidia",
        r"\bRTX PRO 6000\b",
        r"\bRTX PRO SERVER 6000\b",  # as EC2 names the g7e GPU
        aliases=("RTX-PRO-6000-BLACKWELL", "RTXPRO6000", "RTX-PRO-SERVER-6000"),
    ),
    _t("RTX-PRO-4500", "nvidia", r"\bRTX PRO 4500\b", aliases=("RTXPRO4500",)),
    _t("RTX-6000-Ada", "nvidia", r"\bRTX 6000 ADA\b", aliases=("RTX6000-ADA",)),
    _t("RTX-A6000", "nvidia", r"\bRTX A6000\b", aliases=("A6000",)),
    _t("RTX-6000", "nvidia", r"\bQUADRO RTX 6000\b", aliases=("QUADRO-RTX-6000",)),
    _t("RTX-4090", "nvidia", r"\bRTX 4090\b", aliases=("GEFORCE-RTX-4090", "4090")),
    _t("RTX-3090", "nvidia", r"\bRTX 3090\b", aliases=("GEFORCE-RTX-3090", "3090")),
    # AWS sells fractions of an L4 / L40S as g6f / gr6f "GPUs". They have no generic parent on
    # purpose: a request for whole L4 GPUs must never land on a fraction of one.
    _t("L4-PARTITIONED", "nvidia", aliases=("L4-FRACTIONAL",), partitioned=True),
    _t("L40S-PARTITIONED", "nvidia", aliases=("L40S-FRACTIONAL",), partitioned=True),
    # AMD --------------------------------------------------------------------------------
    _t("AMD-Instinct-MI50", "amd", r"\bMI50\b", aliases=("MI50",)),
    _t("AMD-Instinct-MI100", "amd", r"\bMI100\b", aliases=("MI100",)),
    _t("AMD-Instinct-MI210", "amd", r"\bMI210\b", aliases=("MI210",)),
    _t("AMD-Instinct-MI250X", "amd", r"\bMI250X\b", aliases=("MI250X",)),
    _t("AMD-Instinct-MI250X-MI250", "amd", r"\bMI250\b", aliases=("MI250",)),
    _t("AMD-Instinct-MI300A", "amd", r"\bMI300A\b", aliases=("MI300A",)),
    _t("AMD-Instinct-MI300X", "amd", r"\bMI300X\b", aliases=("MI300X",)),
    _v("AMD-Instinct-MI300X-OAM", "AMD-Instinct-MI300X", "amd", None, r"\bMI300X\b.*\bOAM\b"),
    _v("AMD-Instinct-MI300X-HF", "AMD-Instinct-MI300X", "amd", None, r"\bMI300X\b.*\bHF\b"),
    _t("AMD-Instinct-MI308X", "amd", r"\bMI308X\b", aliases=("MI308X",)),
    _v("AMD-Instinct-MI308X-OAM", "AMD-Instinct-MI308X", "amd", None, r"\bMI308X\b.*\bOAM\b"),
    _t("AMD-Instinct-MI325X", "amd", r"\bMI325X\b", aliases=("MI325X",)),
    _v("AMD-Instinct-MI325X-OAM", "AMD-Instinct-MI325X", "amd", None, r"\bMI325X\b.*\bOAM\b"),
    _t("AMD-Instinct-MI350X", "amd", r"\bMI350X\b", aliases=("MI350X",)),
    _v("AMD-Instinct-MI350X-OAM", "AMD-Instinct-MI350X", "amd", None, r"\bMI350X\b.*\bOAM\b"),
    _t("AMD-Instinct-MI355X", "amd", r"\bMI355X\b", aliases=("MI355X",)),
    _v("AMD-Instinct-MI355X-OAM", "AMD-Instinct-MI355X", "amd", None, r"\bMI355X\b.*\bOAM\b"),
    _t("AMD-Radeon-Pro-V520", "amd", r"\bV520\b", aliases=("RADEON-PRO-V520", "V520")),
    _t("AMD-Radeon-Pro-V710", "amd", r"\bV710\b", aliases=("RADEON-PRO-V710", "V710")),
    _t("AMD-Radeon-R9-200-HD-7900", "amd", r"\bR9 200\b"),
    _t("AMD-Radeon-HD-7900", "amd", r"\bHD 7900\b"),
    # Intel GPU --------------------------------------------------------------------------
    _t("Intel-GPU-Max-1550", "intel_gpu", r"\bMAX 1550\b", aliases=("MAX-1550", "PVC-1550")),
    _t("Intel-GPU-Max-1100", "intel_gpu", r"\bMAX 1100\b", aliases=("MAX-1100", "PVC-1100")),
    _t("Intel-GPU-Max-1350", "intel_gpu", r"\bMAX 1350\b", aliases=("MAX-1350",)),
    _t("Intel-GPU-Max-1450", "intel_gpu", r"\bMAX 1450\b", aliases=("MAX-1450",)),
    _t("Intel-GPU-Flex-170", "intel_gpu", r"\bFLEX 170\b", aliases=("FLEX-170",)),
    _t("Intel-GPU-Flex-140", "intel_gpu", r"\bFLEX 140\b", aliases=("FLEX-140",)),
    _t("Intel-GPU-Arc-A770", "intel_gpu", r"\bARC\b.*\bA770\b", aliases=("ARC-A770",)),
    _t("Intel-GPU-Arc-B580", "intel_gpu", r"\bARC\b.*\bB580\b", aliases=("ARC-B580",)),
    # MetaX ------------------------------------------------------------------------------
    _t("MetaX-C500", "metax", r"\bC500\b", aliases=("C500",)),
    _t("MetaX-C550", "metax", r"\bC550\b", aliases=("C550",)),
    _t("MetaX-N260", "metax", r"\bN260\b", aliases=("N260",)),
    # Apple silicon ----------------------------------------------------------------------
    *(
        entry
        for chip in ("M1", "M2", "M3", "M4", "M5")
        for entry in (
            _t(f"Apple-{chip}", "apple", rf"\b{chip}\b", aliases=(chip,)),
            *(
                _v(
                    f"Apple-{chip}-{tier}",
                    f"Apple-{chip}",
                    "apple",
                    None,
                    rf"\b{chip} {tier.upper()}\b",
                    aliases=(f"{chip}-{tier}",),  # Ray's Apple type, e.g. M2-Max
                )
                for tier in ("Pro", "Max", "Ultra")
            ),
        )
    ),
    # Google TPU -------------------------------------------------------------------------
    _t("TPU-V2", "tpu", r"\bV2\b", aliases=("V2", "TPU-V2", "TPUV2")),
    _t("TPU-V3", "tpu", r"\bV3\b", aliases=("V3", "TPUV3")),
    _t("TPU-V4", "tpu", r"\bV4\b", aliases=("V4", "TPUV4")),
    _t("TPU-V5P", "tpu", r"\bV5P\b", aliases=("V5P", "TPUV5P")),
    _t(
        "TPU-V5LITEPOD",
        "tpu",
        r"\bV5LITEPOD\b",
        r"\bV5E\b",
        r"\bV5 LITE\b",
        aliases=("V5E", "TPU-V5E", "V5LITEPOD", "V5LITE", "TPU-V5-LITE"),
    ),
    _t("TPU-V6E", "tpu", r"\bV6E\b", aliases=("V6E", "TRILLIUM", "TPU-TRILLIUM")),
    _t("TPU-V7X", "tpu", r"\bV7X?\b", aliases=("V7X", "V7", "TPU-V7", "IRONWOOD", "TPU7X")),
    # AWS Neuron -------------------------------------------------------------------------
    _t("aws-neuron-core", "neuron", aliases=("NEURON", "NEURON-CORE", "NEURONCORE")),
    _v(
        "Inferentia",
        "aws-neuron-core",
        "neuron",
        None,
        r"\bINFERENTIA1?\b",
        r"\bINF1\b",
        aliases=("INFERENTIA1", "INF1"),
    ),
    _v(
        "Inferentia2",
        "aws-neuron-core",
        "neuron",
        None,
        r"\bINFERENTIA2\b",
        r"\bINF2\b",
        aliases=("INF2",),
    ),
    _v(
        "Trainium",
        "aws-neuron-core",
        "neuron",
        None,
        r"\bTRAINIUM1?\b",
        r"\bTRN1N?\b",
        aliases=("TRAINIUM1", "TRN1"),
    ),
    _v(
        "Trainium2",
        "aws-neuron-core",
        "neuron",
        None,
        r"\bTRAINIUM2\b",
        r"\bTRN2\b",
        aliases=("TRN2",),
    ),
    _v(
        "Trainium3",
        "aws-neuron-core",
        "neuron",
        None,
        r"\bTRAINIUM3\b",
        r"\bTRN3\b",
        aliases=("TRN3",),
    ),
    # Intel Gaudi ------------------------------------------------------------------------
    # Product names: HL-205 (Gaudi), HL-225 / HL-288 (Gaudi2 OAM / PCIe), HL-325L / HL-338
    # (Gaudi3 OAM / PCIe). The generic "HL-<digit>" match is kept short so any variant wins.
    _t("Intel-GAUDI", "gaudi", r"\bGAUDI\b", r"\bHL-?\d", aliases=("GAUDI", "HPU")),
    _v(
        "Intel-GAUDI1",
        "Intel-GAUDI",
        "gaudi",
        None,
        r"\bGAUDI ?1\b",
        r"\bHL-?205\b",
        aliases=("GAUDI1", "DL1"),
    ),
    _v(
        "Intel-GAUDI2",
        "Intel-GAUDI",
        "gaudi",
        None,
        r"\bGAUDI ?2\b",
        r"\bHL-?2(25|88)\w*\b",
        aliases=("GAUDI2",),
    ),
    _v(
        "Intel-GAUDI3",
        "Intel-GAUDI",
        "gaudi",
        None,
        r"\bGAUDI ?3\b",
        r"\bHL-?3(2[0-9]|38)\w*\b",
        aliases=("GAUDI3",),
    ),
    # Huawei Ascend ----------------------------------------------------------------------
    _t("Ascend910A", "ascend", r"\b910A?\b", r"\b910PRO[AB]?\b", aliases=("910A",)),
    _t("Ascend910B", "ascend", r"\b910B\b", aliases=("910B",)),
    *(
        _v(f"Ascend910B{n}", "Ascend910B", "ascend", None, rf"\b910B{n}\b", aliases=(f"910B{n}",))
        for n in (1, 2, 3, 4)
    ),
    _t("Ascend910C", "ascend", r"\b910C\b", aliases=("910C",)),
    _t("Ascend310P", "ascend", r"\b310P\b", aliases=("310P",)),
    # Ray's Ascend detection advertises the SoC name as CANN reports it (Ascend310P3).
    *(
        _v(f"Ascend310P{n}", "Ascend310P", "ascend", None, rf"\b310P{n}\b", aliases=(f"310P{n}",))
        for n in (1, 3)
    ),
    _t("Ascend310", "ascend", r"\b310\b", aliases=("310",)),
    # Rebellions -------------------------------------------------------------------------
    # Dies report the card code (RBLN-CA22); each code is a variant of its chip. Variants come
    # first: their patterns tie in length with the generic RBLN-CA<n> / RBLN-CR<n> ones.
    _v("RBLN-CA02", "RBLN-ATOM", "rebellions", None, r"\bRBLN-CA02\b", aliases=("CA02",)),
    _v("RBLN-CA12", "RBLN-ATOM", "rebellions", None, r"\bRBLN-CA12\b", aliases=("CA12",)),
    _v("RBLN-CA22", "RBLN-ATOM", "rebellions", None, r"\bRBLN-CA22\b", aliases=("CA22",)),
    _v(
        "RBLN-CA25", "RBLN-ATOM", "rebellions", None, r"\bRBLN-CA25\b", aliases=("CA25", "ATOM-MAX")
    ),
    _v(
        "RBLN-CR13",
        "RBLN-REBEL",
        "rebellions",
        None,
        r"\bRBLN-CR13\b",
        aliases=("CR13", "REBEL100"),
    ),
    _t("RBLN-ATOM", "rebellions", r"\bATOM\b", r"\bRBLN-CA\d+\b", aliases=("ATOM",)),
    _t("RBLN-REBEL", "rebellions", r"\bREBEL\d*\b", r"\bRBLN-CR\d+\b", aliases=("REBEL",)),
    # Furiosa ----------------------------------------------------------------------------
    _t("Furiosa-WARBOY", "furiosa", r"\bWARBOY\b", aliases=("WARBOY",)),
    _t("Furiosa-RNGD", "furiosa", r"\bRNGD\b", r"\bRENEGADE\b", aliases=("RNGD", "RENEGADE")),
    # Other SKUs of furiosa-smi's Arch enum; separate types, not variants: a request for an
    # RNGD must not land on a smaller or different part. Aliases are Ray's FURIOSA_<ARCH>.
    _t("Furiosa-RNGD-S", "furiosa", r"\bRNGD-?S\b", aliases=("RNGDS", "FURIOSA_RNGDS")),
    _t("Furiosa-RNGD-Max", "furiosa", r"\bRNGD-?MAX\b", aliases=("RNGDMAX", "FURIOSA_RNGDMAX")),
    _t(
        "Furiosa-RNGD-Plus",
        "furiosa",
        r"\bRNGD(\+|-?PLUS\b)",
        aliases=("RNGD+", "RNGDPLUS", "FURIOSA_RNGDPLUS"),
    ),
    # Mobilint ---------------------------------------------------------------------------
    _t("Mobilint-ARIES", "mobilint", r"\bARIES\b", aliases=("ARIES",)),
    _t("Mobilint-REGULUS", "mobilint", r"\bREGULUS\b", aliases=("REGULUS",)),
    # Tenstorrent ------------------------------------------------------------------------
    _t(
        "Tenstorrent-Grayskull",
        "tenstorrent",
        r"\bGRAYSKULL\b",
        r"\bE(75|150)\b",
        aliases=("GRAYSKULL",),
    ),
    _t(
        "Tenstorrent-Wormhole",
        "tenstorrent",
        r"\bWORMHOLE\b",
        r"\bN(150|300)\w?\b",
        aliases=("WORMHOLE",),
    ),
    _t(
        "Tenstorrent-Blackhole",
        "tenstorrent",
        r"\bBLACKHOLE\b",
        r"\bP[13][0-9]0\w?\b",
        aliases=("BLACKHOLE",),
    ),
    # Other AWS accelerators (catalog only: no node-side family) ---------------------------
    _t("Qualcomm-AI100", "qualcomm", r"\bAI ?100\b", aliases=("AI100", "QUALCOMM-AI-100", "DL2Q")),
    _t("Xilinx-U30", "xilinx", r"\bU30\b", aliases=("U30",)),
    _t("Xilinx-VU47P", "xilinx", r"\bVU47P\b", aliases=("VU47P",)),
    _t("Xilinx-VU9P", "xilinx", r"\bVU9P\b", aliases=("VU9P",)),
)


RAY_NAMES: dict[str, str] = {
    # Ray 2.60's NVIDIA detection parses the NVML name: a mixed-case product line falls back
    # to the hyphen-joined name ("NVIDIA GeForce RTX 4090" -> "GeForce-RTX-4090"), and
    # "NVIDIA RTX 6000 Ada Generation" parses to "RTX-6000" (as "Quadro RTX 6000" does).
    "RTX-4090": "GeForce-RTX-4090",
    "RTX-3090": "GeForce-RTX-3090",
    "RTX-6000-Ada": "RTX-6000",
    # Ray's Furiosa detection: "FURIOSA_" + the device's architecture, upper case, "+" as PLUS.
    "Furiosa-WARBOY": "FURIOSA_WARBOY",
    "Furiosa-RNGD": "FURIOSA_RNGD",
    "Furiosa-RNGD-S": "FURIOSA_RNGDS",
    "Furiosa-RNGD-Max": "FURIOSA_RNGDMAX",
    "Furiosa-RNGD-Plus": "FURIOSA_RNGDPLUS",
    "MetaX-C500": "MXC500",
    "MetaX-C550": "MXC550",
    "Mobilint-ARIES": "MOBILINT_ARIES",
    "Mobilint-REGULUS": "MOBILINT_REGULUS",
    **{f"Apple-{chip}": chip for chip in ("M1", "M2", "M3", "M4", "M5")},
    **{
        f"Apple-{chip}-{tier}": f"{chip}-{tier}"
        for chip in ("M1", "M2", "M3", "M4", "M5")
        for tier in ("Pro", "Max", "Ultra")
    },
}
"""Ray's ``ray.util.accelerators`` name of a type where it differs from ours: a device of
the type advertises it too, so a Ray task naming Ray's constant lands on it."""
RAY_FAMILY_TOKENS: dict[str, str] = {"apple": "Apple-Silicon"}
"""Ray's name for every device of a family (advertised by each of its generic types)."""


class UnknownAcceleratorTypeError(ValueError):
    """A user typed an accelerator name we do not know; carries the closest matches."""

    def __init__(self, text: str, suggestions: Sequence[str]) -> None:
        self.text = text
        self.suggestions = tuple(suggestions)
        hint = f"; closest: {', '.join(self.suggestions)}" if self.suggestions else ""
        super().__init__(f"unknown accelerator type {brief(text)}{hint}")


def _key(text: str) -> str:
    """Lookup key: upper case, separators unified, so ``a100_80gb`` equals ``A100-80GB``."""
    return re.sub(r"[\s_]+", "-", text.strip()).upper()


@cache
def _by_name() -> dict[str, AcceleratorType]:
    return {entry.name: entry for entry in ACCELERATOR_TYPES}


@cache
def _by_key() -> dict[str, AcceleratorType]:
    """Canonical names first, so another type's alias or Ray name never shadows one."""
    index: dict[str, AcceleratorType] = {_key(entry.name): entry for entry in ACCELERATOR_TYPES}
    for entry in ACCELERATOR_TYPES:
        for spelling in (*entry.aliases, *_ray_name(entry.name)):
            index.setdefault(_key(spelling), entry)
    return index


@cache
def _compiled(
    family: str | None,
) -> tuple[tuple[int, AcceleratorType, tuple[re.Pattern[str], ...]], ...]:
    """(position in the table, type, its patterns compiled) of ``family``'s types (None:
    every family's), compiled when a family is first resolved."""
    return tuple(
        (position, entry, tuple(re.compile(p) for p in entry.patterns))
        for position, entry in enumerate(ACCELERATOR_TYPES)
        if family is None or entry.family == family
    )


def get(name: str) -> AcceleratorType | None:
    """The type with exactly this canonical name."""
    return _by_name().get(name)


def all_names() -> list[str]:
    return [entry.name for entry in ACCELERATOR_TYPES]


def lookup(text: str) -> AcceleratorType:
    """Resolve what a user typed (any case, alias or ``accelerator_type:`` prefix).

    Raises :class:`UnknownAcceleratorTypeError` with the closest known names.
    """
    bare = text.split(":", 1)[1] if text.lower().startswith("accelerator_type:") else text
    found = _by_key().get(_key(bare))
    if found is None:
        raise UnknownAcceleratorTypeError(text, closest(bare))
    return found


def closest(text: str, limit: int = 3) -> list[str]:
    """Canonical names closest to ``text``, best first (none for text no name is near)."""
    if len(text) > MATCH_LIMIT:
        return []
    keys = _by_key()
    matches = difflib.get_close_matches(_key(text), list(keys), n=limit * 3, cutoff=0.5)
    names: list[str] = []
    for match in matches:
        name = keys[match].name
        if name not in names:
            names.append(name)
    return names[:limit]


def tokens_for(name: str | None) -> tuple[str, ...]:
    """Every token a device of type ``name`` advertises: its generic parent's, Ray's name
    for it (where Ray's differs), then itself (the most specific, last)."""
    if name is None:
        return ()
    entry = get(name)
    if entry is None:
        return (name,)
    if entry.generic:
        parent = tokens_for(entry.generic)
    else:
        parent = tuple(t for t in [RAY_FAMILY_TOKENS.get(entry.family)] if t)
    return (*parent, *_ray_name(name), name)


def _ray_name(name: str) -> tuple[str, ...]:
    return (RAY_NAMES[name],) if name in RAY_NAMES else ()


def common_tokens(types: Iterable[str | None]) -> tuple[str, ...]:
    """Tokens every device on a node shares (a mixed node advertises only what is common)."""
    per_device = [tokens_for(t) for t in types]
    if not per_device:
        return ()
    shared = set(per_device[0]).intersection(*per_device[1:])
    return tuple(token for token in per_device[0] if token in shared)


def type_for_tokens(tokens: Sequence[str]) -> str | None:
    """The most specific type among a node's tokens (the last one)."""
    return tokens[-1] if tokens else None


def _normalise_model(model: str) -> str:
    return " ".join(re.sub(r"[_,()/]+", " ", model).upper().split())


def resolve_model(
    model: str, family: str | None = None, memory_mib: float | None = None
) -> AcceleratorType | None:
    """Canonical type of a vendor model string such as ``NVIDIA A100-SXM4-80GB``.

    The most specific pattern wins (longest match). When the match is a generic type with
    memory variants and ``memory_mib`` is known, the variant nearest in memory is chosen,
    so ``A100`` with 40960 MiB becomes ``A100-40G`` (NVML reports slightly less than the
    marketing size, hence nearest rather than equal).
    """
    text = _normalise_model(model)
    best: tuple[int, int, AcceleratorType] | None = None
    for position, entry, patterns in _compiled(family):
        for pattern in patterns:
            match = pattern.search(text)
            if match and (best is None or len(match.group(0)) > best[0]):
                best = (len(match.group(0)), -position, entry)
    if best is None:
        return None
    entry = best[2]
    if memory_mib:
        entry = _memory_variant(entry, memory_mib) or entry
    return entry


def resolve_type(
    model: str, family: str | None = None, memory_mib: float | None = None
) -> str | None:
    """The name of :func:`resolve_model`'s type, ``None`` when the model is unknown."""
    entry = resolve_model(model, family, memory_mib)
    return entry.name if entry else None


def _memory_variant(entry: AcceleratorType, memory_mib: float) -> AcceleratorType | None:
    variants = [
        v for v in ACCELERATOR_TYPES if v.generic == entry.name and v.memory_gib is not None
    ]
    if not variants:
        return None
    memory_gib = memory_mib / 1024
    nearest = min(variants, key=lambda v: abs(v.memory_gib - memory_gib))
    # Accept within 15%: reported usable memory is a little below the advertised size.
    return nearest if abs(nearest.memory_gib - memory_gib) <= 0.15 * nearest.memory_gib else None
