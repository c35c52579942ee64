"""A VM's serial port output through the real client: the end of it, owned VMs only."""

from __future__ import annotations

import pytest

from providers.base import TAG_CLUSTER, TAG_NODE_TYPE
from providers.errors import AccessDeniedError
from providers.gcp.compute import provider as provider_module
from providers.local.gcp.compute import BOOT_LOG, Fault
from tests.providers.gcp.compute.conftest import L4, PROJECT, ZONES

TAGS = {TAG_NODE_TYPE: "l4"}


def test_an_owned_vm_shows_its_boot_log(provider):
    (node,) = provider.create_node(L4, TAGS, 1, "req-1").nodes

    assert provider.console_output(node.id) == BOOT_LOG


def test_only_the_end_of_a_long_serial_output_is_read(provider, cloud, monkeypatch):
    monkeypatch.setattr(provider_module, "CONSOLE_BYTES", 64)
    (node,) = provider.create_node(L4, TAGS, 1, "req-1").nodes
    cloud.set_serial_output(node.id, "x" * 10_000 + "\nstartup-script exit status 1\n")

    output = provider.console_output(node.id)

    assert len(output) == 64 and output.endswith("startup-script exit status 1\n")


def test_someone_elses_vm_is_never_read(provider, make_provider, cloud):
    cloud.put_instance(PROJECT, ZONES[0], "stranger", {TAG_CLUSTER: "beta"})
    cloud.put_instance(PROJECT, ZONES[0], "unlabelled", {})
    (other,) = make_provider("beta").create_node(L4, TAGS, 1, "req-b").nodes

    for name in ("stranger", "unlabelled", other.id, f"{ZONES[0]}/stranger", "no-such-vm"):
        assert provider.console_output(name) is None
    assert "serialPort" not in cloud.calls


def test_a_refused_read_is_a_permission_error(provider, cloud):
    (node,) = provider.create_node(L4, TAGS, 1, "req-1").nodes
    cloud.inject(Fault("permission", method="serialPort"))

    with pytest.raises(AccessDeniedError) as caught:
        provider.console_output(node.id)

    assert caught.value.action == "compute.instances.getSerialPortOutput"
