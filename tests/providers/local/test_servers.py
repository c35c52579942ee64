"""The embedded local cloud outlives one command and is reused, then stopped."""

import json
import subprocess
import sys

import boto3
import pytest

from instance_catalog.aws import corrected_records
from providers import UnknownProviderError, get_provider
from providers.local.servers import ensure_emulator, stop_emulator


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOSCALE_STATE_DIR", str(tmp_path))
    yield tmp_path
    stop_emulator("aws", "emu-test")


def test_ec2_emulator_is_shared_by_separate_processes(state_dir):
    script = (
        "from providers.local.servers import ensure_emulator;"
        "print(ensure_emulator('aws', 'emu-test'))"
    )
    urls = {
        subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=True
        ).stdout.strip()
        for _ in range(2)
    }
    assert len(urls) == 1
    (url,) = urls
    assert url.startswith("http://127.0.0.1:")
    record = json.loads((state_dir / "emu-test" / "emulator-aws.json").read_text())
    assert record["url"] == url
    ec2 = boto3.client(
        "ec2",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )
    assert ec2.describe_subnets()["Subnets"]  # a real EC2 API answers over HTTP


def test_stop_ends_the_emulator_and_a_new_one_starts_after(state_dir):
    ensure_emulator("aws", "emu-test")
    assert stop_emulator("aws", "emu-test") is True
    assert stop_emulator("aws", "emu-test") is False
    second = ensure_emulator("aws", "emu-test")
    ec2 = boto3.client(
        "ec2",
        endpoint_url=second,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )
    assert ec2.describe_instances()["Reservations"] == []  # a fresh, empty cloud
    assert ensure_emulator("aws", "emu-test") == second


def test_the_local_ec2_offers_every_type_the_catalog_sells_in_a_region(state_dir):
    ec2 = boto3.client(
        "ec2",
        endpoint_url=ensure_emulator("aws", "emu-test"),
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )
    records, zones = corrected_records()
    sold = {name for name in records if "us-east-1" in zones.get(name, {})}
    assert "p2.xlarge" in sold  # retired K80, moto's data lacks it
    pages = ec2.get_paginator("describe_instance_type_offerings").paginate(LocationType="region")
    offered = {o["InstanceType"] for page in pages for o in page["InstanceTypeOfferings"]}
    assert sold <= offered
    (k80,) = ec2.describe_instance_types(InstanceTypes=["p2.xlarge"])["InstanceTypes"]
    assert k80["VCpuInfo"]["DefaultVCpus"] == 4
    in_zone = ec2.describe_instance_type_offerings(
        LocationType="availability-zone",
        Filters=[{"Name": "instance-type", "Values": ["p2.xlarge"]}],
    )["InstanceTypeOfferings"]
    assert "us-east-1a" in {o["Location"] for o in in_zone}


def test_unknown_provider_type_names_the_known_ones():
    with pytest.raises(UnknownProviderError, match="known types: aws, gcp"):
        get_provider({"type": "azure"}, "c")


def test_every_zone_the_gcp_facts_know_serves_machine_types():
    from instance_catalog.tpu import gcp_data, tpu_zones
    from providers.local.gcp.zones import served_zone_tables

    machines, gpus = served_zone_tables()
    tpu = {z for g in gcp_data()["tpu"] for zs in tpu_zones(g).values() for z in zs}
    assert tpu | set(gpus) <= set(machines)
    assert "n1-standard-4" in machines["us-central2-b"]  # a TPU v4 zone
    assert not any(f.get("accelerators") for f in machines["us-central2-b"].values())
