"""Fake device trees and tool output for the NPU families (Ascend, Rebellions, Furiosa,
Mobilint, Tenstorrent), shaped like captures from real hosts.

Each ``install_<family>(fake_host, ...)`` describes a whole node; the ``*_output`` helpers
return just the tool text so a test can alter it.
"""

from __future__ import annotations

from typing import Any

from tests.fakes.host import FakeHost
from tests.fakes.pci import add_pci_device, link_pci_device

# -- Huawei Ascend ------------------------------------------------------------------------
ASCEND_MANAGEMENT_NODES = ("davinci_manager", "devmm_svm", "hisi_hdc")
ASCEND_CHIPS_PER_CARD = {"910C": 2, "310P3": 2}
ASCEND_MEMORY_MIB = {"910B1": 65536, "910B2": 65536, "910B3": 65536, "910B4": 32768}
_WIDE = (27, 15, 52)  # column widths of the 910 table
_NARROW = (31, 17, 54)  # column widths of the 310P table


def _row(widths: tuple[int, ...], *cells: str) -> str:
    return (
        "|"
        + "|".join(f" {cell}".ljust(width) for cell, width in zip(cells, widths, strict=True))
        + "|"
    )


def _rule(widths: tuple[int, ...], char: str = "=") -> str:
    return "+" + "+".join(char * width for width in widths) + "+"


def npu_smi_info(count: int = 8, chip: str = "910B3", card_ids: list[int] | None = None) -> str:
    """``npu-smi info`` of ``count`` cards (two chips each on 910C / 310P3), as 25.x prints it."""
    card_ids = card_ids if card_ids is not None else list(range(count))
    per_card = ASCEND_CHIPS_PER_CARD.get(chip, 1)
    if chip.startswith("310P"):
        return _npu_smi_310p(card_ids, chip, per_card)
    memory = ASCEND_MEMORY_MIB.get(chip, 65536)
    lines = [
        "+" + "-" * 96 + "+",
        "| npu-smi 25.5.1                   Version: 25.5.1".ljust(97) + "|",
        _rule(_WIDE, "-"),
        _row(_WIDE, "NPU   Name", "Health", "Power(W)    Temp(C)           Hugepages-Usage(page)"),
        _row(_WIDE, "Chip", "Bus-Id", "AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)"),
        _rule(_WIDE),
    ]
    for card in card_ids:
        lines.append(
            _row(_WIDE, f"{card:<5} {chip}", "OK", "102.8       45                0    / 0")
        )
        for chip_id in range(per_card):
            bus = f"0000:{0xC1 + card:02X}:00.{chip_id}"
            usage = f"0           0    / 0          3445 / {memory}"
            lines.append(_row(_WIDE, str(chip_id), bus, usage))
        lines.append(_rule(_WIDE))
    lines += [
        _rule(_WIDE, "-"),
        _row(_WIDE, "NPU     Chip", "Process id", "Process name             | Process memory(MB)"),
        _rule(_WIDE),
        _row(_WIDE, "0       0", "2290156", "VLLMEngineCore           | 56630"),
        _rule(_WIDE),
    ]
    return "\n".join(lines) + "\n"


def _npu_smi_310p(card_ids: list[int], chip: str, per_card: int) -> str:
    lines = [
        _row(
            _NARROW,
            "NPU     Name",
            "Health",
            "Power(W)     Temp(C)           Hugepages-Usage(page)",
        ),
        _row(_NARROW, "Chip    Device", "Bus-Id", "AICore(%)    Memory-Usage(MB)"),
        _rule(_NARROW),
    ]
    device = 0
    for card in card_ids:
        lines.append(
            _row(_NARROW, f"{card:<7} {chip}", "OK", "NA           45                0     / 0")
        )
        for chip_id in range(per_card):
            bus = f"0000:{card + 1:02X}:00.0"
            lines.append(_row(_NARROW, f"{chip_id:<7} {device}", bus, "0            1720 / 44280"))
            device += 1
        lines.append(_rule(_NARROW))
    return "\n".join(lines) + "\n"


def install_ascend(
    fake_host: FakeHost,
    count: int = 8,
    chip: str = "910B3",
    npu_smi: bool = True,
    device_nodes: bool = True,
) -> None:
    """An Ascend node: ``npu-smi`` in ``/usr/local/sbin`` and ``/dev/davinci<N>`` nodes."""
    if npu_smi:
        fake_host.command("npu-smi", npu_smi_info(count, chip), install_dir="/usr/local/sbin")
    if device_nodes:
        chips = count * ASCEND_CHIPS_PER_CARD.get(chip, 1)
        for name in (*(f"davinci{n}" for n in range(chips)), *ASCEND_MANAGEMENT_NODES):
            fake_host.write(f"/dev/{name}")


# -- Rebellions ---------------------------------------------------------------------------
RBLN_DIE_BYTES = 16_877_879_296  # 15.72 GiB behind each ATOM die


def rbln_smi_json(
    count: int = 4, name: str = "RBLN-CA22", memory_bytes: int = RBLN_DIE_BYTES
) -> dict[str, Any]:
    """``rbln-smi --json`` (driver 3.0), dies listed out of kernel order as the tool does."""
    order = [n for n in range(count) if n % 2 == 1] + [n for n in range(count) if n % 2 == 0]
    devices = [
        {
            "npu": number // 2,
            "name": name,
            "sid": f"00000000225133{60 + number // 4:02d}",
            "uuid": f"3a5d3eec-4b2e-4fa0-afa0-192c9b99a7{number:02x}",
            "device": f"rbln{number}",
            "status": "normal",
            "fw_ver": "3.0.0",
            "pci": {
                "dev": "0x1220",
                "bus_id": f"0000:{0x03 + number:02x}:00.0",
                "numa_node": "0",
                "link_speed": "32.0GT/s",
                "link_width": "16",
            },
            "temperature": "29C",
            "card_power": "18109794uW",
            "pstate": "P14",
            "memory": {"used": "75497472", "total": str(memory_bytes)},
            "util": "0.0",
            "board_info": "0005000c",
            "location": 5,
        }
        for number in order
    ]
    return {"KMD_version": "3.0.0", "devices": devices, "contexts": []}


def install_rebellions(
    fake_host: FakeHost,
    count: int = 4,
    name: str = "RBLN-CA22",
    tool: str | None = "rbln-smi",
    device_nodes: bool = True,
) -> None:
    """A Rebellions node: ``rbln-smi`` (or ``rbln-stat``) and ``/dev/rbln<N>`` nodes."""
    if tool:
        fake_host.command(tool, rbln_smi_json(count, name))
    if device_nodes:
        for number in range(count):
            fake_host.write(f"/dev/rbln{number}")
        fake_host.write("/dev/rbln_ctl")


# -- Furiosa ------------------------------------------------------------------------------
def furiosa_smi_info_json(count: int = 2, arch: str = "rngd") -> list[dict[str, str]]:
    """``furiosa-smi info --format json``."""
    return [
        {
            "arch": arch,
            "dev_name": f"npu{n}",
            "device_uuid": f"3E93AE7C-E8EA-4C62-BED6-AD2EC0461A{n:02X}",
            "device_sn": f"RNGD00000{n}",
            "firmware": "2025.2.0+d3c908a",
            "pert": "",
            "temperature": "30.18°C",
            "power": "53.00 W",
            "core_clock": "N/A",
            "governor": "OnDemand",
            "pci_bdf": f"0000:{0x17 + n * 0x13:02x}:00.0",
            "pci_dev": f"{508 - 2 * n}:0",
        }
        for n in range(count)
    ]


def install_furiosa(
    fake_host: FakeHost,
    count: int = 2,
    arch: str = "rngd",
    smi: bool = True,
    device_files: bool = True,
    platform: str = "FuriosaAI",
) -> None:
    """A Furiosa node: ``furiosa-smi``, device files and management nodes in sysfs."""
    if smi:
        fake_host.command("furiosa-smi", furiosa_smi_info_json(count, arch))
    if not device_files:
        return
    for n in range(count):
        if arch == "warboy":
            names = (f"npu{n}", f"npu{n}pe0", f"npu{n}pe1", f"npu{n}pe0-1")
            dev_dir, mgmt = "/dev", f"/sys/class/npu_mgmt/npu{n}_mgmt"
        else:
            names = (f"npu{n}", f"npu{n}pe0", f"npu{n}pe0-3", f"npu{n}pe4-7", f"npu{n}pe0-7")
            dev_dir, mgmt = "/dev/rngd", f"/sys/class/rngd_mgmt/rngd!npu{n}mgmt"
        for name in names:
            fake_host.write(f"{dev_dir}/{name}")
        fake_host.write_many(
            mgmt,
            {
                "platform_type": platform,
                "device_uuid": f"82540B87-1055-48C6-AAB1-C4CC84672C{n:02X}",
                "device_sn": f"RNGD00000{n}",
                "busname": f"0000:{0x17 + n:02x}:00.0",
                "fw_version": "2025.2.0",
                "dev": f"{235 + n}:0",
            },
        )


# -- Mobilint -----------------------------------------------------------------------------
def install_mobilint(fake_host: FakeHost, count: int = 2, family: str = "aries") -> None:
    """Mobilint device nodes: ``/dev/aries<N>``, or ``/dev/regulus-npu<N>`` with the REGULUS
    auxiliary nodes beside them."""
    if family == "regulus":
        names = [f"regulus-npu{n}" for n in range(count)] + ["regulus", "regulus-usb"]
    else:
        names = [f"aries{n}" for n in range(count)]
    for name in names:
        fake_host.write(f"/dev/{name}")


# -- Tenstorrent --------------------------------------------------------------------------
TT_PCI_DEVICE_IDS = {"n150": "0x401e", "n300": "0x401e", "p150a": "0xb140", "p100a": "0xb140"}


def install_tenstorrent(
    fake_host: FakeHost, count: int = 2, card: str = "n300", sysfs: bool = True
) -> None:
    """tt-kmd's ``/dev/tenstorrent/<N>`` and ``/sys/class/tenstorrent/tenstorrent!<N>``, with
    the ``device`` link to the PCI function."""
    for n in range(count):
        fake_host.write(f"/dev/tenstorrent/{n}")
        if not sysfs:
            continue
        bdf = f"0000:{0x01 + n:02x}:00.0"
        add_pci_device(fake_host, bdf, "0x1e52", TT_PCI_DEVICE_IDS.get(card, "0x401e"))
        node = f"/sys/class/tenstorrent/tenstorrent!{n}"
        fake_host.write_many(
            node,
            {
                "tt_card_type": card,
                "tt_serial": f"100018611902{n:04X}",
                "tt_fw_bundle_ver": "18.7.0.0",
                "tt_aiclk": "500",
            },
        )
        link_pci_device(fake_host, f"{node}/device", bdf)
