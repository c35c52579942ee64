"""Cluster YAMLs written the ways Ray's documentation allows load and plan."""

from __future__ import annotations

import json

from click.testing import CliRunner

from autoscaler.cli import cli
from autoscaler.config import load_cluster_config


def _write(tmp_path, text: str):
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    return path


def _plan(path, bundles) -> dict:
    result = CliRunner().invoke(
        cli, ["plan", str(path), "--bundles", json.dumps(bundles), "--json"]
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_a_minimal_gcp_file_gets_rays_default_node_types(tmp_path):
    path = _write(
        tmp_path,
        "cluster_name: tiny\nmax_workers: 3\n"
        "provider: {type: gcp, region: us-west1, availability_zone: us-west1-a, project_id: null}\n"
        "auth: {ssh_user: ubuntu}\n",
    )
    config = load_cluster_config(path)
    assert config.head_node_type == "ray_head_default"
    worker = config.node_type("ray_worker_small")
    assert worker.resources["CPU"] == 2 and worker.market == "spot"  # preemptible, as a list
    assert any("Ray's defaults for gcp" in w for w in config.warnings)
    assert _plan(path, [{"CPU": 2}] * 2)["launch"] == {"ray_worker_small": 1}


def test_a_minimal_aws_file_gets_rays_default_node_types(tmp_path):
    path = _write(tmp_path, "cluster_name: tiny\nprovider: {type: aws, region: us-west-2}\n")
    config = load_cluster_config(path)
    assert config.head_node_type == "ray.head.default"
    assert config.node_type("ray.worker.default").market == "spot"
    assert config.limits().max_workers == 2  # Ray's default


def test_the_legacy_layout_is_read_with_a_warning(tmp_path):
    path = _write(
        tmp_path,
        """
cluster_name: old
min_workers: 1
max_workers: 4
provider: {type: aws, region: us-east-1, availability_zone: "us-east-1a,us-east-1b"}
head_node: {InstanceType: m5.xlarge, ImageId: ami-0a2363a9cff180a64}
worker_nodes:
  InstanceType: g5.xlarge
  ImageId: ami-0a2363a9cff180a64
  InstanceMarketOptions: {MarketType: spot}
setup_commands: []
head_start_ray_commands: [ray stop]
""",
    )
    config = load_cluster_config(path)
    worker = config.node_type("ray.worker.default")
    assert worker.resources["GPU"] == 1 and worker.min_workers == 1 and worker.market == "spot"
    assert config.node_type("ray.head.default").resources["CPU"] == 4
    assert any("legacy layout" in w for w in config.warnings)
    assert _plan(path, [{"GPU": 1}])["launch"] == {"ray.worker.default": 1}


def test_docker_file_mounts_setup_and_launch_templates_load_and_plan(tmp_path, monkeypatch):
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text("print(1)\n")
    monkeypatch.chdir(tmp_path)
    path = _write(
        tmp_path,
        """
cluster_name: full
max_workers: 4
docker: {image: "rayproject/ray-ml:latest-gpu", container_name: ray_container}
provider: {type: aws, region: us-west-2, cache_stopped_nodes: true}
auth: {ssh_user: ubuntu}
file_mounts: {"/home/ubuntu/code": "code"}
cluster_synced_files: []
rsync_exclude: ["**/.git"]
initialization_commands: []
setup_commands: ["pip install -U ray"]
head_setup_commands: []
worker_setup_commands: []
head_start_ray_commands: [ray stop, "ray start --head --port=6379"]
worker_start_ray_commands: [ray stop, "ray start --address=$RAY_HEAD_IP:6379"]
available_node_types:
  ray.head.default:
    resources: {}
    node_config:
      LaunchTemplate: {LaunchTemplateId: lt-00000000000000000, Version: $Latest}
      ImageId: latest_dlami
      InstanceType: m5a.large
  ray.worker.gpu:
    min_workers: 0
    max_workers: 2
    resources: {}
    docker: {worker_image: "rayproject/ray-ml:latest-gpu"}
    node_config:
      LaunchTemplate: {LaunchTemplateName: ExampleLaunchTemplate, Version: 2}
      InstanceType: g6.xlarge
head_node_type: ray.head.default
""",
    )
    config = load_cluster_config(path)
    for key in ("docker", "file_mounts", "setup_commands", "head_start_ray_commands"):
        assert key not in config.ignored_keys()  # acted on from the boot data
    assert _plan(path, [{"GPU": 1, "accelerator_type:L4": 0.001}])["launch"] == {
        "ray.worker.gpu": 1
    }
