"""What a node of an EC2 instance type advertises (CPU, memory, accelerators)."""

from __future__ import annotations

from typing import Any

from instance_catalog.aws import accelerator_of
from instance_catalog.catalog import UnknownInstanceTypeError, load_catalog
from instance_catalog.model import AWS, InstanceType
from instance_catalog.resources import resources_for
from providers.aws.client import call


def instance_type_resources(ec2: Any, instance_type: str) -> dict[str, float]:
    """From the instance catalog; for a type it lacks, from ``DescribeInstanceTypes``."""
    try:
        return resources_for(load_catalog().get(instance_type, AWS))
    except UnknownInstanceTypeError:
        pass
    answer = call(ec2, "describe_instance_types", InstanceTypes=[instance_type])
    record = answer["InstanceTypes"][0]
    entry = InstanceType(
        name=instance_type,
        cloud=AWS,
        vcpus=int(record["VCpuInfo"]["DefaultVCpus"]),
        memory_mib=int(record["MemoryInfo"]["SizeInMiB"]),
        accelerator=accelerator_of(record),
    )
    return resources_for(entry)
