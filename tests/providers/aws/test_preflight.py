"""`up`'s EC2 preflight, over moto's server: images, subnets, offered types, dry-run launches."""

from __future__ import annotations


def test_preflight_checks_images_subnets_and_dry_runs(provider):
    problems = provider.preflight(
        {
            "good": {"InstanceType": "m5.large", "ImageId": "ami-03cf127a"},
            "bad": {
                "InstanceType": "m5.large",
                "ImageId": "ami-00000000",
                "SubnetIds": ["subnet-12345678"],
            },
        }
    )
    assert "subnet subnet-12345678 does not exist in us-east-1" in problems
    assert "image ami-00000000 does not exist in us-east-1" in problems
    assert not any(p.startswith("good:") for p in problems)


def test_preflight_names_a_zone_outside_the_region(make_provider):
    provider = make_provider(availability_zone="us-east-1a,eu-west-1a")
    problems = provider.preflight({})
    assert problems == ["availability zone 'eu-west-1a' is not in us-east-1"]


def test_preflight_needs_a_region(make_provider):
    assert make_provider(region=None).preflight({}) == ["provider.region is required for AWS"]
