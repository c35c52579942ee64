"""Fake PCI functions as sysfs shows them, shared by every family's device-tree builder."""

from __future__ import annotations

import posixpath

from tests.fakes.host import FakeHost

PCI_ROOT = "/sys/devices/pci0000:00"


def add_pci_device(
    fake_host: FakeHost,
    bus_id: str,
    vendor: str,
    device: str,
    subsystem_device: str = "0x0000",
    iommu_group: int | None = None,
    pci_class: str = "0x120000",
) -> str:
    """A PCI function as sysfs shows it, linked from ``/sys/bus/pci/devices`` and its group."""
    dev_dir = f"{PCI_ROOT}/{bus_id}"
    fake_host.write_many(
        dev_dir,
        {
            "vendor": vendor,
            "device": device,
            "subsystem_vendor": vendor,
            "subsystem_device": subsystem_device,
            "class": pci_class,
        },
    )
    link_pci_device(fake_host, f"/sys/bus/pci/devices/{bus_id}", bus_id)
    if iommu_group is not None:
        group_dir = f"/sys/kernel/iommu_groups/{iommu_group}"
        _relative_symlink(fake_host, f"{dev_dir}/iommu_group", group_dir)
        link_pci_device(fake_host, f"{group_dir}/devices/{bus_id}", bus_id)
    return dev_dir


def link_pci_device(fake_host: FakeHost, link: str, bus_id: str) -> None:
    """A relative sysfs link such as ``/sys/class/accel/accel0/device`` to a PCI function."""
    _relative_symlink(fake_host, link, f"{PCI_ROOT}/{bus_id}")


def _relative_symlink(fake_host: FakeHost, link: str, target: str) -> None:
    fake_host.symlink(link, posixpath.relpath(target, posixpath.dirname(link)))
