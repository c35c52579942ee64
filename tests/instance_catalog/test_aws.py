"""EC2 instance types: round trips per family, overrides, and agreement with the source."""

import pytest

from instance_catalog.aws import (
    accelerator_of,
    apply_overrides,
    corrected_records,
    decode_zones,
    encode_zones,
    get_ec2_accelerator_type,
    get_ec2_num_accelerators,
    raw_snapshot,
    unresolved_accelerators,
)
from instance_catalog.catalog import load_catalog

GIB = 1024


@pytest.mark.parametrize(
    ("instance_type", "vcpus", "memory_gib", "expected"),
    [
        (
            "p4d.24xlarge",
            96,
            1152,
            {"GPU": 8, "accelerator_type:A100": 1, "accelerator_type:A100-40G": 1},
        ),
        (
            "p4de.24xlarge",
            96,
            1152,
            {"GPU": 8, "accelerator_type:A100": 1, "accelerator_type:A100-80G": 1},
        ),
        (
            "p5.48xlarge",
            192,
            2048,
            {"GPU": 8, "accelerator_type:H100": 1, "accelerator_type:H100-80G": 1},
        ),
        (
            "p5.4xlarge",
            16,
            256,
            {"GPU": 1, "accelerator_type:H100": 1, "accelerator_type:H100-80G": 1},
        ),
        ("p5e.48xlarge", 192, 2048, {"GPU": 8, "accelerator_type:H200": 1}),
        ("g5.xlarge", 4, 16, {"GPU": 1, "accelerator_type:A10G": 1}),
        ("g6.xlarge", 4, 16, {"GPU": 1, "accelerator_type:L4": 1}),
        ("g6e.xlarge", 4, 32, {"GPU": 1, "accelerator_type:L40S": 1}),
        ("g6f.large", 2, 8, {"GPU": 0.125, "accelerator_type:L4-PARTITIONED": 1}),
        ("gr6f.4xlarge", 16, 128, {"GPU": 0.5, "accelerator_type:L4-PARTITIONED": 1}),
        ("trn1.2xlarge", 8, 32, {"neuron_cores": 2, "accelerator_type:Trainium": 1}),
        ("trn1.32xlarge", 128, 512, {"neuron_cores": 32, "accelerator_type:aws-neuron-core": 1}),
        # Logical NeuronCores at Neuron's default LNC=2: four per Trainium2 chip.
        ("trn2.48xlarge", 192, 2048, {"neuron_cores": 64, "accelerator_type:Trainium2": 1}),
        ("trn2u.48xlarge", 192, 2048, {"neuron_cores": 64, "accelerator_type:Trainium2": 1}),
        ("trn2.3xlarge", 12, 128, {"neuron_cores": 4, "accelerator_type:Trainium2": 1}),
        ("inf1.xlarge", 4, 8, {"neuron_cores": 4, "accelerator_type:Inferentia": 1}),
        ("inf1.24xlarge", 96, 192, {"neuron_cores": 64}),
        ("inf2.xlarge", 4, 16, {"neuron_cores": 2, "accelerator_type:Inferentia2": 1}),
        ("inf2.48xlarge", 192, 768, {"neuron_cores": 24}),
        (
            "dl1.24xlarge",
            96,
            768,
            {"HPU": 8, "accelerator_type:Intel-GAUDI": 1, "accelerator_type:Intel-GAUDI1": 1},
        ),
        ("dl2q.24xlarge", 96, 768, {}),  # no detector reports a Qualcomm AI100: no promise
        ("g4ad.xlarge", 4, 16, {"GPU": 1, "accelerator_type:AMD-Radeon-Pro-V520": 1}),
        ("g4ad.16xlarge", 64, 256, {"GPU": 4}),
        (
            "p3.2xlarge",
            8,
            61,
            {"GPU": 1, "accelerator_type:V100": 1, "accelerator_type:V100-16G": 1},
        ),
        ("p3dn.24xlarge", 96, 768, {"GPU": 8, "accelerator_type:V100-32G": 1}),
        ("m6i.large", 2, 8, {}),
    ],
)
def test_round_trip(instance_type, vcpus, memory_gib, expected):
    entry = load_catalog().get(instance_type, "aws")
    assert entry.vcpus == vcpus
    assert entry.memory_mib == memory_gib * GIB
    from instance_catalog.resources import resources_for

    resources = resources_for(entry)
    assert resources["CPU"] == vcpus
    assert resources["memory"] == memory_gib * 2**30
    for name, quantity in expected.items():
        assert resources[name] == quantity, name
    if not expected:
        assert set(resources) == {"CPU", "memory"}


def test_partitioned_gpus_never_look_like_whole_gpus():
    for name in ("g6f.large", "g6f.4xlarge", "gr6f.4xlarge"):
        from instance_catalog.resources import resources_for

        resources = resources_for(load_catalog().get(name))
        assert resources["GPU"] < 1
        assert "accelerator_type:L4" not in resources


def test_qualcomm_dl2q_has_no_gpu_resource():
    from instance_catalog.resources import resources_for

    resources = resources_for(load_catalog().get("dl2q.24xlarge"))
    assert "GPU" not in resources and "neuron_cores" not in resources


def test_every_accelerator_type_in_the_source_is_catalogued_with_its_counts():
    records, _ = corrected_records()
    catalog = load_catalog()
    checked = 0
    for name, record in records.items():
        neuron = record.get("NeuronInfo", {}).get("NeuronDevices")
        gpus = record.get("GpuInfo", {}).get("Gpus")
        entry = catalog.get(name, "aws")
        if neuron:
            assert entry.accelerator.count == neuron[0]["Count"]
            # The cloud counts physical cores; Trainium2 pairs them by default (LNC=2).
            physical = neuron[0]["CoreInfo"]["Count"]
            lnc = 2 if neuron[0]["Name"] == "Trainium2" else 1
            assert entry.accelerator.cores_per_device == physical // lnc
            checked += 1
        elif gpus:
            partition = gpus[0].get("GpuPartitionSize", 1.0)
            expected = gpus[0]["Count"] if partition >= 1 else partition
            assert entry.accelerator.count == expected, name
            checked += 1
    assert checked > 80


def test_every_snapshot_record_is_catalogued_and_every_accelerator_has_a_canonical_name():
    records, _ = corrected_records()
    assert set(records) >= set(raw_snapshot()["instance_types"])
    assert unresolved_accelerators(records) == []


def test_types_missing_from_the_snapshot_are_added_by_overrides():
    for name in ("dl1.24xlarge", "g4ad.xlarge", "p3.2xlarge", "p3.16xlarge"):
        assert name not in raw_snapshot()["instance_types"]
        assert load_catalog().get(name).accelerator is not None


def test_inferentia_is_counted_once():
    record = corrected_records()[0]["inf2.48xlarge"]
    assert "InferenceAcceleratorInfo" not in record
    # Even without the override, Neuron devices win over the duplicate listing.
    raw = raw_snapshot()["instance_types"]["inf2.48xlarge"]
    assert "InferenceAcceleratorInfo" in raw
    assert accelerator_of(raw).family == "neuron"


def test_override_file_entries_all_say_why_and_apply():
    from instance_catalog.aws import overrides

    for entry in overrides():
        assert entry.get("reason"), entry["instance_type"]
        assert {"set", "remove", "add"} & set(entry), entry["instance_type"]


def test_override_set_merges_and_remove_drops():
    records = {
        "x.large": {
            "InstanceType": "x.large",
            "GpuInfo": {"Gpus": [{"Count": 0}]},
            "InferenceAcceleratorInfo": {},
        }
    }
    fixed, _ = apply_overrides(
        records,
        {},
        [
            {"instance_type": "x.*", "reason": "r", "set": {"GpuInfo": {"Gpus": [{"Count": 1}]}}},
            {"instance_type": "x.large", "reason": "r", "remove": ["InferenceAcceleratorInfo"]},
        ],
    )
    assert fixed["x.large"] == {"InstanceType": "x.large", "GpuInfo": {"Gpus": [{"Count": 1}]}}
    assert records["x.large"]["GpuInfo"]["Gpus"][0]["Count"] == 0  # input untouched


def test_zones_come_from_the_offerings():
    entry = load_catalog().get("p4d.24xlarge")
    assert "us-east-1" in entry.zones
    assert all(zone.startswith("us-east-1") for zone in entry.zones["us-east-1"])


@pytest.mark.parametrize(
    ("instance_type", "family", "count", "type_"),
    [
        ("p4de.24xlarge", "nvidia", 8, "A100-80G"),
        ("p4de.24xlarge", None, 8, "A100-80G"),
        ("p4de.24xlarge", "neuron", None, None),
        ("trn1.32xlarge", "neuron", 32, "Trainium"),
        ("dl1.24xlarge", "gaudi", 8, "Intel-GAUDI1"),
        ("g4ad.2xlarge", "amd", 1, "AMD-Radeon-Pro-V520"),
        ("m6i.large", None, None, None),
        ("no-such.type", None, None, None),
    ],
)
def test_ray_style_ec2_hooks_per_family(instance_type, family, count, type_):
    assert get_ec2_num_accelerators(instance_type, family=family) == count
    assert get_ec2_accelerator_type(instance_type, family=family) == type_


def test_ec2_hooks_read_caller_records():
    records = {
        "q.large": {
            "GpuInfo": {
                "Gpus": [
                    {
                        "Name": "T4",
                        "Manufacturer": "NVIDIA",
                        "Count": 2,
                        "MemoryInfo": {"SizeInMiB": 16384},
                    }
                ]
            }
        }
    }
    assert get_ec2_num_accelerators("q.large", records) == 2
    assert get_ec2_accelerator_type("q.large", records, family="nvidia") == "T4"


def _moto_instance_types() -> dict:
    import gzip
    import json
    from pathlib import Path

    import moto

    path = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"
    with gzip.open(path) as handle:
        return json.load(handle)


def test_every_ec2_instance_type_in_the_source_is_catalogued_with_its_facts():
    source = _moto_instance_types()
    catalog = load_catalog()
    assert len(source) > 1300
    for name, record in source.items():
        entry = catalog.get(name, "aws")
        assert entry.vcpus == record["VCpuInfo"]["DefaultVCpus"], name
        assert entry.memory_mib == record["MemoryInfo"]["SizeInMiB"], name
        expected = tuple(record["ProcessorInfo"]["SupportedArchitectures"])
        assert entry.architectures == expected, name
        assert entry.network == record["NetworkInfo"]["NetworkPerformance"], name
        assert entry.regions, name
    families = {name.split(".")[0] for name in source}
    assert {"m4", "a1", "t2", "x2iedn", "u-6tb1", "mac2", "c7gn", "hpc7g"} <= families


def test_m4_xlarge_from_rays_multi_node_example_is_known():
    entry = load_catalog().get("m4.xlarge", "aws")
    assert (entry.vcpus, entry.memory_mib, entry.architectures) == (4, 16 * GIB, ("x86_64",))
    assert entry.network == "High"
    assert entry.accelerator is None
    assert all(zone.startswith(region) for region, zones in entry.zones.items() for zone in zones)
    assert "us-east-1" in entry.regions


def test_zones_round_trip_through_the_compact_form():
    zones = {
        "a.large": {"us-east-1": ["us-east-1b", "us-east-1a"], "us-west-2": ["us-west-2-lax-1a"]},
        "b.large": {"us-west-2": ["us-west-2-lax-1a"], "us-east-1": ["us-east-1a", "us-east-1b"]},
        "c.large": {"eu-west-1": ["eu-west-1c"]},
    }
    encoded = encode_zones(zones)
    assert len(encoded["zone_sets"]) == 2  # a and b share one map
    decoded = decode_zones(encoded)
    assert decoded == {
        name: {region: tuple(sorted(found)) for region, found in by_region.items()}
        for name, by_region in zones.items()
    }
