"""Fake sysfs trees and tool output for AMD, Intel, MetaX and Apple GPUs."""

from __future__ import annotations

from tests.fakes.host import FakeHost
from tests.fakes.pci import add_pci_device, link_pci_device

GIB = 1024**3

AMD_MODELS: dict[str, dict[str, int | str]] = {
    # name: PCI device id, gfx_target_version, simd_count, simd_per_cu, memory, product name
    "MI300X": {
        "device_id": 0x74A1,
        "gfx": 90402,
        "simd_count": 1216,
        "simd_per_cu": 4,
        "num_xcc": 8,
        "memory": 192 * GIB,
        "product": "AMD Instinct MI300X OAM",
    },
    "MI250X": {
        "device_id": 0x740C,
        "gfx": 90010,
        "simd_count": 440,
        "simd_per_cu": 4,
        "num_xcc": 1,
        "memory": 64 * GIB,
        "product": "",
    },
    "V520": {
        "device_id": 0x7362,
        "gfx": 100101,
        "simd_count": 72,
        "simd_per_cu": 2,
        "num_xcc": 1,
        "memory": 8 * GIB,
        "product": "",
    },
}


def amd_uuid_int(position: int) -> int:
    return 0x4FD3D0E445B92000 + position


def install_amd(host: FakeHost, count: int = 8, model: str = "MI300X", cpu_nodes: int = 2) -> None:
    """KFD topology with ``cpu_nodes`` CPU nodes first, then ``count`` GPU nodes (8 = OAM box)."""
    spec = AMD_MODELS[model]
    nodes = "/sys/class/kfd/kfd/topology/nodes"
    for node in range(cpu_nodes):
        host.write(f"{nodes}/{node}/gpu_id", 0)
        host.write(
            f"{nodes}/{node}/properties",
            "cpu_cores_count 96\nsimd_count 0\nmem_banks_count 1\nvendor_id 0\ndevice_id 0\n"
            "location_id 0\ndomain 0\ndrm_render_minor 0\nunique_id 0\n",
        )
    host.mkdir("/dev/dri")
    for position in range(count):
        node = cpu_nodes + position
        minor = 128 + position
        bus = 0x0C + 0x10 * position
        host.write(f"{nodes}/{node}/gpu_id", 40000 + position)
        host.write(
            f"{nodes}/{node}/properties",
            "cpu_cores_count 0\n"
            f"simd_count {spec['simd_count']}\n"
            "mem_banks_count 1\n"
            "max_waves_per_simd 8\n"
            "wave_front_size 64\n"
            f"simd_per_cu {spec['simd_per_cu']}\n"
            f"gfx_target_version {spec['gfx']}\n"
            "vendor_id 4098\n"
            f"device_id {spec['device_id']}\n"
            f"location_id {bus << 8}\n"
            "domain 0\n"
            f"drm_render_minor {minor}\n"
            "hive_id 8119486017925245377\n"
            f"unique_id {amd_uuid_int(position)}\n"
            f"num_xcc {spec['num_xcc']}\n",
        )
        host.write(
            f"{nodes}/{node}/mem_banks/0/properties",
            f"heap_type 1\nsize_in_bytes {spec['memory']}\nflags 0\nwidth 8192\n",
        )
        host.write(f"/dev/dri/renderD{minor}")
        pci_dir = add_pci_device(
            host,
            f"0000:{bus:02x}:00.0",
            "0x1002",
            f"0x{spec['device_id']:04x}",
            pci_class="0x038000",
        )
        link_pci_device(host, f"/sys/class/drm/renderD{minor}/device", f"0000:{bus:02x}:00.0")
        if spec["product"]:
            host.write(f"{pci_dir}/product_name", spec["product"])


INTEL_MODELS: dict[str, tuple[int, int, int]] = {
    # name: PCI device id, memory bytes, tiles
    "Max 1550": (0x0BD5, 128 * GIB, 2),
    "Max 1100": (0x0BDA, 48 * GIB, 1),
    "Flex 170": (0x56C0, 16 * GIB, 1),
}


def _intel_card(host: FakeHost, card: int, bus: str, device_id: int) -> str:
    base = f"/sys/class/drm/card{card}"
    pci_dir = add_pci_device(host, bus, "0x8086", f"0x{device_id:04x}", pci_class="0x038000")
    host.write(
        f"{pci_dir}/uevent",
        f"DRIVER=i915\nPCI_CLASS=38000\nPCI_ID=8086:{device_id:04X}\nPCI_SLOT_NAME={bus}",
    )
    link_pci_device(host, f"{base}/device", bus)
    host.mkdir(f"/sys/class/drm/card{card}-DP-1")
    return base


def install_intel_gpu(
    host: FakeHost, count: int = 4, model: str = "Max 1550", integrated: bool = True
) -> None:
    """``count`` discrete cards (i915 DKMS layout), after an integrated GPU at card0."""
    device_id, memory, tiles = INTEL_MODELS[model]
    first = 0
    if integrated:
        _intel_card(host, 0, "0000:00:02.0", 0x4680)
        first = 1
    for position in range(count):
        bus = f"0000:{0x29 + 0x20 * position:02x}:00.0"
        base = _intel_card(host, first + position, bus, device_id)
        host.write(f"{base}/lmem_total_bytes", memory)
        for tile in range(tiles):
            host.mkdir(f"{base}/gt/gt{tile}")


def install_metax(host: FakeHost, count: int = 8, model: str = "C500", smi: bool = True) -> None:
    """``count`` MetaX GPUs bound to the ``metax`` driver, and ``mx-smi`` describing them."""
    rows = []
    for position in range(count):
        address = f"0000:{0x0E + 0x10 * position:02x}:00.0"
        pci_dir = add_pci_device(host, address, "0x9999", "0x4081", pci_class="0x030000")
        host.write(f"{pci_dir}/sriov_numvfs", 0)
        host.mkdir(f"/sys/bus/pci/drivers/metax/{address}")
        rows.append(
            f"| {position:<7} MetaX {model:<16} Off | {address}        | 0%            Native |\n"
            f"| 35C     59W / 350W              P0 | 858/65536 MiB       | Available            |\n"
            "+------------------------------------+---------------------+----------------------+"
        )
    if smi:
        host.command("mx-smi", mx_smi_output(rows), install_dir="/opt/mxdriver/bin")


def mx_smi_output(rows: list[str]) -> str:
    header = (
        "mx-smi  version: 2.2.6\n\n"
        "=================== MetaX System Management Interface Log ===================\n"
        "+---------------------------------------------------------------------------------+\n"
        "| MX-SMI 2.2.6                        Kernel Mode Driver Version: 3.0.11          |\n"
        "| MACA Version: 3.0.0.8               BIOS Version: 1.27.5.0                      |\n"
        "|------------------------------------+---------------------+----------------------+\n"
        "| GPU     NAME         Persistence-M | Bus-id              | GPU-Util      sGPU-M |\n"
        "| Temp    Pwr:Usage/Cap         Perf | Memory-Usage        | GPU-State            |\n"
        "|====================================+=====================+======================|\n"
    )
    return header + "\n".join(rows) + "\n"


def install_apple(host: FakeHost, chip: str = "Apple M2 Max", memsize: int = 96 * GIB) -> None:
    """A macOS host whose ``sysctl`` reports ``chip``."""
    host.system = "Darwin"
    host.command("sysctl", f"{chip}\n{memsize}\n", install_dir="/usr/sbin")
