"""MetaX GPU detection from fake PCI sysfs and ``mx-smi`` output."""

from __future__ import annotations

from accel.families.metax import MetaxGpu
from tests.fakes.gpu_trees import install_metax
from tests.fakes.pci import add_pci_device

metax = MetaxGpu()


def test_detects_every_c500_with_mx_smi_names_and_memory(fake_host):
    install_metax(fake_host, count=8, model="C500")
    found = metax.detect(fake_host.probe())
    assert found is not None and found.count == 8
    assert found.resource == "GPU"
    assert found.tokens == ("MXC500", "MetaX-C500")  # Ray's METAX_C500, then ours
    assert [d.id for d in found.devices] == [str(i) for i in range(8)]
    first = found.devices[0]
    assert first.model == "MetaX C500"
    assert first.memory_mib == 65536
    assert first.details["pci_bus_id"] == "0000:0e:00.0"
    assert fake_host.command_calls[0][0].endswith("/opt/mxdriver/bin/mx-smi")


def test_c550_type(fake_host):
    install_metax(fake_host, count=2, model="C550")
    assert metax.detect(fake_host.probe()).accelerator_type == "MetaX-C550"


def test_without_mx_smi_devices_are_counted_but_untyped(fake_host):
    install_metax(fake_host, count=4, smi=False)
    found = metax.detect(fake_host.probe())
    assert found.count == 4
    assert found.tokens == ()
    assert found.devices[0].model == "MetaX GPU [9999:4081]"
    assert found.devices[0].memory_mib is None


def test_failing_hung_or_garbage_mx_smi_still_counts_pci_devices(fake_host):
    install_metax(fake_host, count=2, smi=False)
    for kwargs in ({"returncode": 1}, {"hangs": True}, {"stdout": "\x00 not a table \n|||"}):
        fake_host.command("mx-smi", **kwargs)
        found = metax.detect(fake_host.probe())
        assert found.count == 2 and found.accelerator_type is None


def test_unbound_functions_and_other_vendors_are_skipped(fake_host):
    install_metax(fake_host, count=2)
    (fake_host.root / "sys/bus/pci/drivers/metax/0000:1e:00.0").rmdir()
    add_pci_device(fake_host, "0000:05:00.0", "0x10de", "0x2330", pci_class="0x030200")
    found = metax.detect(fake_host.probe())
    assert [d.details["pci_bus_id"] for d in found.devices] == ["0000:0e:00.0"]


def test_sriov_physical_function_with_vfs_is_skipped(fake_host):
    install_metax(fake_host, count=2)
    fake_host.write("/sys/bus/pci/devices/0000:0e:00.0/sriov_numvfs", 4)
    assert metax.detect(fake_host.probe()).count == 1


def test_no_mx_smi_run_on_hosts_without_metax(fake_host):
    fake_host.command("mx-smi", "")
    assert metax.detect(fake_host.probe()) is None
    assert fake_host.command_calls == []


def test_cuda_visible_devices_filters(fake_host):
    install_metax(fake_host, count=4)
    fake_host.env["CUDA_VISIBLE_DEVICES"] = "1,3"
    assert [d.id for d in metax.detect(fake_host.probe()).devices] == ["1", "3"]
    for value in ("", "NoDevFiles"):
        fake_host.env["CUDA_VISIBLE_DEVICES"] = value
        assert metax.detect(fake_host.probe()) is None


def test_worker_env_and_noset():
    assert metax.worker_env(["0", "1"], 8, {}) == {"CUDA_VISIBLE_DEVICES": "0,1"}
    env = {"RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1"}
    assert metax.worker_env(["0"], 8, env) == {}


def test_quantities():
    assert metax.validate_quantity(0.5) is None
    assert "negative" in metax.validate_quantity(-0.5)
