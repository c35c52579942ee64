"""Ray's names, both ways, read from the installed Ray (2.60).

* Every ``ray.util.accelerators`` constant is a token that the nodes with that device
  advertise, so a Ray task naming Ray's constant lands on them.
* Every token Ray's own detection would give a device we know (NVIDIA: parsed from the NVML
  name; AMD: Ray's PCI id table; Furiosa: ``FURIOSA_`` + architecture) is advertised by our
  detection of that device too.
"""

from __future__ import annotations

import pytest

from accel.families.amd import AMD_DEVICE_TYPES
from accel.families.furiosa import ARCH_TYPES, normalise_arch
from accel.families.nvidia import NvidiaGpu
from accel.names import RAY_FAMILY_TOKENS, all_names, get, lookup, tokens_for
from tests.fakes.nvml import MODELS, FakeNvml, gpus

ray_constants = pytest.importorskip("ray.util.accelerators.accelerators")

RAY_CONSTANTS = sorted(
    {v for k, v in vars(ray_constants).items() if not k.startswith("_") and isinstance(v, str)}
)


def test_the_installed_ray_is_the_one_these_facts_are_from():
    import ray

    assert ray.__version__.startswith("2.60")
    assert "FURIOSA_RNGD" in RAY_CONSTANTS and "AMD-Instinct-MI355X-OAM" in RAY_CONSTANTS


@pytest.mark.parametrize("ray_name", RAY_CONSTANTS)
def test_every_ray_constant_is_advertised_by_the_types_it_names(ray_name):
    family = next((f for f, token in RAY_FAMILY_TOKENS.items() if token == ray_name), None)
    if family is not None:  # a family-wide name (Apple-Silicon): every generic type of it
        named = [n for n in all_names() if get(n).family == family and not get(n).generic]
    else:
        named = [lookup(ray_name).name]
    assert named and all(ray_name in tokens_for(name) for name in named)


@pytest.mark.parametrize("model", sorted(MODELS))
def test_nvidia_nodes_advertise_the_token_ray_parses_from_the_nvml_name(model, fake_host):
    from ray._private.accelerators.nvidia_gpu import NvidiaGPUAcceleratorManager

    ray_token = NvidiaGPUAcceleratorManager._gpu_name_to_accelerator_type(model)
    fake_host.nvml = FakeNvml()
    fake_host.nvml.gpus = gpus(model, 2)
    detection = NvidiaGpu().detect(fake_host.probe())
    assert ray_token in detection.tokens, (model, ray_token, detection.tokens)


def _ray_amd_table() -> dict[int, str]:
    from ray._private.accelerators.amd_gpu import amd_product_dict

    return {int(pci_id, 16): name for pci_id, name in amd_product_dict.items()}


@pytest.mark.parametrize(("pci_id", "ray_token"), sorted(_ray_amd_table().items()))
def test_amd_devices_advertise_the_token_of_rays_pci_table(pci_id, ray_token):
    assert pci_id in AMD_DEVICE_TYPES, f"0x{pci_id:04x} ({ray_token}) is unknown"
    assert ray_token in tokens_for(AMD_DEVICE_TYPES[pci_id])


@pytest.mark.parametrize("arch", ["Warboy", "Rngd", "RngdS", "RngdMax", "rngd+"])
def test_furiosa_devices_advertise_the_token_ray_derives_from_the_architecture(arch, monkeypatch):
    from ray._private.accelerators import furiosa

    class Device:
        def device_info(self):
            return type("Info", (), {"arch": lambda _self: arch})()

    monkeypatch.setattr(furiosa, "_get_furiosa_list_devices", lambda: lambda: [Device()])
    ray_token = furiosa.FuriosaAcceleratorManager.get_current_node_accelerator_type()
    ours = ARCH_TYPES.get(normalise_arch(arch))
    assert ours is not None, arch
    assert ray_token in tokens_for(ours)


def test_ray_names_resolve_to_our_canonical_types():
    assert lookup("MXC500").name == "MetaX-C500"
    assert lookup("M2-Max").name == "Apple-M2-Max"
    assert lookup("FURIOSA_RNGD").name == "Furiosa-RNGD"
    assert tokens_for("Mobilint-ARIES") == ("MOBILINT_ARIES", "Mobilint-ARIES")
