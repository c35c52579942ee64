"""Cluster YAML: Ray's files load unchanged, node types fill from the catalog, errors name paths."""

from dataclasses import replace
from pathlib import Path

import pytest

from autoscaler.config import ConfigError, load_cluster_config, parse_cluster_config
from instance_catalog.catalog import Offer, load_catalog

FIXTURES = Path(__file__).parent / "fixtures"


def cluster(provider: dict | None = None, **node_types: dict) -> dict:
    """A minimal config: an m5.large head plus ``node_types``."""
    return {
        "cluster_name": "test",
        "provider": provider or {"type": "aws", "region": "us-east-1"},
        "available_node_types": {
            "head": {"node_config": {"InstanceType": "m5.large"}},
            **node_types,
        },
        "head_node_type": "head",
    }


def problems(data: dict) -> tuple[str, ...]:
    with pytest.raises(ConfigError) as raised:
        parse_cluster_config(data)
    return raised.value.messages


def test_ray_aws_yaml_loads_unchanged_and_lists_the_keys_not_acted_on():
    config = load_cluster_config(FIXTURES / "aws-ray.yaml")
    assert config.head_node_type == "ray.head.default"
    assert [t.name for t in config.node_types()] == [
        "ray.head.default",
        "gpu_workers",
        "spot_gpu_workers",
    ]
    ignored = config.ignored_keys()
    assert ignored == ("rsync_exclude", "rsync_filter")  # Ray's node keys act at boot
    assert config.not_acted_on()[0].startswith("rsync_exclude: Ray key not acted on (")
    assert all(t.ray_start for t in config.spec.available_node_types.values())
    assert config.spec.setup_commands == ['pip install -U "ray[default]"']
    assert config.spec.provider.model_extra["security_group"]["GroupName"]
    assert config.limits().max_workers == 10
    assert config.warnings == ()


def test_ray_market_options_mean_spot():
    config = load_cluster_config(FIXTURES / "aws-ray.yaml")
    spot = config.node_type("spot_gpu_workers")
    assert spot.market == "spot"
    assert spot.price == load_catalog().get("g5.xlarge", "aws").price("us-east-1", spot=True)


def test_aws_resources_fill_from_catalog():
    gpu = load_cluster_config(FIXTURES / "aws-ray.yaml").node_type("gpu_workers")
    assert gpu.resources["GPU"] == 8
    assert gpu.resources["accelerator_type:A100"] == 1
    assert gpu.devices == {"GPU": 8}
    assert gpu.price == load_catalog().get("p4d.24xlarge", "aws").price("us-east-1")
    assert gpu.max_workers == 4


def test_head_node_is_existing_capacity():
    config = load_cluster_config(FIXTURES / "aws-ray.yaml")
    (head,) = config.head_existing_nodes()
    assert head.node_type == "ray.head.default"
    assert not head.pending
    assert head.free["CPU"] == 0  # the YAML's {"CPU": 0} wins over the catalog's 2
    assert head.free["memory"] == 8 * 2**30


def test_gcp_tpu_slice_has_hosts_and_head_resource():
    config = load_cluster_config(FIXTURES / "gcp-tpu.yaml")
    tpu = config.node_type("tpu_v4_16")
    assert tpu.hosts == 2
    assert tpu.resources["TPU"] == 4
    assert tpu.head_resources == {"TPU-v4-16-head": 1}
    assert "TPU-v4-16-head" not in tpu.resources
    assert tpu.devices == {"TPU": 4}
    # Whole-slice price in the zone's region (no provider.region given).
    assert tpu.price == load_catalog().get("v4-16", "gcp").price("us-central2")


def test_gcp_accelerator_config_matches_the_slice_type():
    config = load_cluster_config(FIXTURES / "gcp-tpu.yaml")
    by_type, by_topology = config.node_type("tpu_v4_16"), config.node_type("tpu_topology")
    assert by_topology.resources == by_type.resources
    assert by_topology.head_resources == by_type.head_resources
    assert by_topology.market == "spot"  # schedulingConfig.preemptible
    assert by_topology.price == load_catalog().get("v4-16", "gcp").price("us-central2", True)


def test_n1_with_attached_t4s():
    data = cluster(
        {"type": "gcp", "region": "us-central1", "project_id": "p"},
        t4={
            "node_config": {
                "machineType": "n1-standard-8",
                "guestAccelerators": [
                    {"acceleratorType": "nvidia-tesla-t4", "acceleratorCount": 2}
                ],
            }
        },
    )
    data["available_node_types"]["head"] = {"node_config": {"machineType": "n1-standard-4"}}
    t4 = parse_cluster_config(data).node_type("t4")
    assert t4.resources["GPU"] == 2
    assert t4.resources["accelerator_type:T4"] == 1
    assert t4.resources["CPU"] == 8
    entry = load_catalog().get("n1-standard-8", "gcp")
    attachment = next(a for a in entry.attachable_gpus if a.accelerator.name == "T4")
    expected = Offer(entry, replace(attachment.accelerator, count=2)).price("us-central1")
    assert expected is not None and t4.price == pytest.approx(expected)
    assert t4.price > entry.price("us-central1")


def test_n1_attachment_errors_name_the_field():
    gce = {"type": "gcp", "region": "us-central1"}
    bad_count = cluster(
        gce,
        t4={
            "node_config": {
                "machineType": "n1-standard-8",
                "guestAccelerators": [
                    {"acceleratorType": "nvidia-tesla-t4", "acceleratorCount": 3}
                ],
            }
        },
    )
    bad_count["available_node_types"]["head"] = {"node_config": {"machineType": "n1-standard-4"}}
    (message,) = problems(bad_count)
    assert message.startswith(
        "available_node_types.t4.node_config.guestAccelerators[0].acceleratorCount:"
    )
    assert "1, 2, 4" in message
    bad_count["available_node_types"]["t4"]["node_config"]["guestAccelerators"] = [
        {"acceleratorType": "nvidia-tesla-t5", "acceleratorCount": 1}
    ]
    (message,) = problems(bad_count)
    assert "guestAccelerators[0].acceleratorType" in message
    assert "did you mean 'nvidia-tesla-t4'" in message


def test_user_resources_win_per_key():
    config = parse_cluster_config(
        cluster(
            gpu={
                "node_config": {"InstanceType": "p4d.24xlarge"},
                "resources": {"CPU": 90, "custom": 1},
            }
        )
    )
    gpu = config.node_type("gpu")
    assert gpu.resources["CPU"] == 90
    assert gpu.resources["custom"] == 1
    assert gpu.resources["GPU"] == 8  # still from the catalog


def test_cost_per_hour_overrides_the_catalog():
    config = parse_cluster_config(
        cluster(gpu={"node_config": {"InstanceType": "p4d.24xlarge"}, "cost_per_hour": 12.5})
    )
    assert config.node_type("gpu").price == 12.5


def test_market_spot_uses_the_spot_price():
    entry = load_catalog().get("p4d.24xlarge", "aws")
    config = parse_cluster_config(
        cluster(gpu={"node_config": {"InstanceType": "p4d.24xlarge"}, "market": "spot"})
    )
    gpu = config.node_type("gpu")
    assert gpu.market == "spot"
    assert gpu.price == entry.price("us-east-1", spot=True) != entry.price("us-east-1")


def test_unknown_instance_type_with_resources_is_a_warning():
    config = parse_cluster_config(
        cluster(custom={"node_config": {"InstanceType": "x9.huge"}, "resources": {"CPU": 4}})
    )
    custom = config.node_type("custom")
    assert custom.resources == {"CPU": 4}
    assert custom.price is None
    assert any("custom.node_config.InstanceType" in w for w in config.warnings)
    assert any("set cost_per_hour" in w for w in config.warnings)
    priced = parse_cluster_config(
        cluster(
            custom={
                "node_config": {"InstanceType": "x9.huge"},
                "resources": {"CPU": 4},
                "cost_per_hour": 1.5,
            }
        )
    )
    assert priced.node_type("custom").price == 1.5


def test_unknown_instance_type_without_resources_is_an_error():
    (message,) = problems(cluster(gpu_workers={"node_config": {"InstanceType": "p4d.24xlage"}}))
    assert message.startswith("available_node_types.gpu_workers.node_config.InstanceType:")
    assert "p4d.24xlarge" in message


def test_nothing_to_fill_from_is_an_error():
    (message,) = problems(cluster(bare={"node_config": {}}))
    assert message.startswith("available_node_types.bare.node_config.InstanceType: missing")


def test_field_typos_suggest_the_closest_key():
    data = cluster(gpu={"node_config": {"InstanceType": "m5.large"}, "min_worker": 1})
    data["max_worker"] = 3
    messages = problems(data)
    assert "max_worker: unknown key; did you mean 'max_workers'?" in messages
    assert (
        "available_node_types.gpu.min_worker: unknown key; did you mean 'min_workers'?" in messages
    )


def test_bad_market_lists_the_allowed_values():
    (message,) = problems(
        cluster(gpu={"node_config": {"InstanceType": "m5.large"}, "market": "spots"})
    )
    assert message == (
        "available_node_types.gpu.market: 'spots' is not allowed "
        "(allowed: spot, on-demand); did you mean 'spot'?"
    )


def test_head_node_type_must_name_a_node_type():
    data = cluster()
    data["head_node_type"] = "haed"
    (message,) = problems(data)
    assert message.startswith("head_node_type: 'haed' is not in available_node_types")
    assert "did you mean 'head'" in message
    del data["head_node_type"]  # optional: the autoscaler may run outside the cluster
    assert parse_cluster_config(data, "x").head_existing_nodes() == ()


def test_min_workers_within_max_workers():
    (message,) = problems(
        cluster(
            gpu={"node_config": {"InstanceType": "m5.large"}, "min_workers": 3, "max_workers": 1}
        )
    )
    assert message == "available_node_types.gpu.min_workers: 3 exceeds max_workers (1)"


def test_errors_are_collected_into_one_config_error(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("provider: {type: azure}\navailable_node_types: {}\n")
    with pytest.raises(ConfigError) as raised:
        load_cluster_config(path)
    messages = raised.value.messages
    assert any(m.startswith("provider.type: 'azure' is not allowed") for m in messages)
    assert str(path) in str(raised.value)


def test_ray_defaults_apply():
    config = parse_cluster_config(cluster())
    assert config.limits().max_workers == 2
    assert config.limits().upscaling_speed == 1.0
    assert config.idle_timeout_minutes("head") == 5


def test_head_type_launches_no_workers_unless_its_max_workers_says_so():
    config = load_cluster_config(FIXTURES / "aws-ray.yaml")
    assert config.node_type(config.head_node_type).max_workers == 0
    data = cluster(head={"node_config": {"InstanceType": "m5.large"}, "max_workers": 3})
    data["head_node_type"] = "head"
    assert parse_cluster_config(data, "x").node_type("head").max_workers == 3


def test_every_tpu_node_config_gets_its_offering():
    provider = {"type": "gcp", "project_id": "p", "availability_zone": "us-central2-b"}
    config = parse_cluster_config(
        {
            "provider": provider,
            "available_node_types": {
                "by_type": {"node_config": {"acceleratorType": "v4-16"}},
                "by_config": {
                    "node_config": {"acceleratorConfig": {"type": "V4", "topology": "2x2x2"}},
                    "market": "spot",
                },
            },
        }
    )
    by_type, by_config = config.node_types()
    assert by_type.offering.instance_type == by_config.offering.instance_type == "v4-16"
    assert by_config.offering.zones == ("us-central2-b",)
    assert (by_type.offering.market, by_config.offering.market) == ("on-demand", "spot")
    assert by_config.hosts == 2 and by_config.offering.region == "us-central2"
