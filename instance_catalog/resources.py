"""What a node of an instance type advertises, in the resource model detection uses."""

from __future__ import annotations

from accel.family_rules import rules_named
from accel.names import tokens_for
from instance_catalog.model import Accelerator, InstanceType

MIB = 2**20
ACCELERATOR_TYPE_PREFIX = "accelerator_type:"


def accelerator_resources(accelerator: Accelerator) -> dict[str, float]:
    """The family's resource (``GPU``, ``neuron_cores``, ``HPU``, ``TPU``...) and type tokens.

    Neuron schedules NeuronCores, so it counts devices x cores per device (logical cores at
    the default LNC). Accelerators no ``accel`` family detects (Qualcomm AI100, FPGAs, media
    accelerators) advertise nothing: no node would report a promised token.
    """
    resources: dict[str, float] = {}
    if accelerator.family is None:
        return resources
    quantity = accelerator.count
    if accelerator.family == "neuron":
        quantity *= accelerator.cores_per_device or 1
    resources[rules_named(accelerator.family).resource_name] = float(quantity)
    for token in tokens_for(accelerator.name):
        resources[f"{ACCELERATOR_TYPE_PREFIX}{token}"] = 1.0
    return resources


def resources_for(
    entry: InstanceType, attached: Accelerator | None = None, tpu_worker: int = 0
) -> dict[str, float]:
    """Resources one node (one host, for a TPU slice) of ``entry`` advertises.

    ``attached`` is a GPU attached to a GCE N1 machine (its ``count`` the number attached).
    A TPU slice's worker 0 also carries ``TPU-<type>-head``, as detection reports it.
    """
    resources = {"CPU": float(entry.vcpus), "memory": float(entry.memory_mib * MIB)}
    for accelerator in (entry.accelerator, attached):
        if accelerator is not None:
            resources.update(accelerator_resources(accelerator))
    if entry.tpu is not None and tpu_worker == 0:
        resources[f"TPU-{entry.name}-head"] = 1.0
    return resources
