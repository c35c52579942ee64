"""`autoscale catalog show|list|refresh` as users run them."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest


def autoscale(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autoscaler", *args],
        env=env or dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_show_prints_the_documented_fields():
    done = autoscale("catalog", "show", "p4de.24xlarge", "--json")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["instance_type"] == "p4de.24xlarge"
    assert shown["cloud"] == "aws"
    assert (shown["vcpus"], shown["memory_mib"]) == (96, 1179648)
    assert shown["accelerator"]["name"] == "A100-80G"
    assert shown["accelerator"]["count"] == 8
    assert shown["resources"]["GPU"] == 8
    assert shown["resources"]["accelerator_type:A100-80G"] == 1
    assert shown["price_per_hour"] > 0


def test_show_tpu_slice_has_its_shape():
    shown = json.loads(autoscale("catalog", "show", "v4-16", "--cloud", "gcp", "--json").stdout)
    assert (shown["chips"], shown["hosts"], shown["chips_per_host"]) == (8, 2, 4)
    assert shown["topology"] == "2x2x2"
    assert shown["resources"]["TPU"] == 4
    assert shown["resources"]["TPU-v4-16-head"] == 1


def test_show_unknown_type_suggests_close_names():
    done = autoscale("catalog", "show", "p4de.24xlargee")
    assert done.returncode == 1
    assert "closest: p4de.24xlarge" in done.stderr
    assert "Traceback" not in done.stderr


def test_show_region_not_offered_is_an_error():
    done = autoscale("catalog", "show", "p4de.24xlarge", "--region", "mars-north-1")
    assert done.returncode == 1
    assert "not offered in mars-north-1" in done.stderr


def test_list_by_accelerator_finds_both_clouds_cheapest_first():
    done = autoscale("catalog", "list", "--accelerator", "a100-80gb:8", "--json")
    offers = json.loads(done.stdout)
    names = [offer["instance_type"] for offer in offers]
    assert set(names) == {"p4de.24xlarge", "a2-ultragpu-8g"}
    prices = [offer["price_per_hour"] for offer in offers]
    assert prices == sorted(prices)


def test_list_generic_type_includes_every_variant():
    offers = json.loads(autoscale("catalog", "list", "--accelerator", "A100:8", "--json").stdout)
    assert {"p4d.24xlarge", "p4de.24xlarge", "a2-highgpu-8g", "a2-ultragpu-8g"} <= {
        offer["instance_type"] for offer in offers
    }


def test_list_attachable_gpus_on_n1():
    offers = json.loads(
        autoscale("catalog", "list", "--accelerator", "t4:4", "--cloud", "gcp", "--json").stdout
    )
    assert offers
    assert all(offer["instance_type"].startswith("n1-") for offer in offers)
    assert all(offer["resources"]["GPU"] == 4 for offer in offers)


def test_list_unknown_accelerator_says_what_is_close():
    done = autoscale("catalog", "list", "--accelerator", "h10:8")
    assert done.returncode == 2
    assert "closest: H100" in done.stderr


def test_list_table_for_people():
    done = autoscale("catalog", "list", "--accelerator", "trainium")
    assert done.returncode == 0
    assert "trn1.32xlarge" in done.stdout


def test_refresh_without_credentials_explains(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_CONFIG_FILE=str(tmp_path / "none"), AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none")
    )
    done = autoscale("catalog", "refresh", "--cloud", "aws", env=env)
    assert done.returncode == 1
    assert "no AWS credentials found" in done.stderr


@pytest.fixture
def moto_server():
    from moto.server import ThreadedMotoServer

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


def test_refresh_against_the_ec2_api_then_queries_use_it(tmp_path, moto_server):
    env = dict(os.environ)
    env.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
        AUTOSCALE_CATALOG_DIR=str(tmp_path),
    )
    done = autoscale(
        "catalog",
        "refresh",
        "--cloud",
        "aws",
        "--region",
        "us-east-1",
        "--endpoint-url",
        moto_server,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "aws_instance_types.json").exists()
    shown = json.loads(autoscale("catalog", "show", "p4d.24xlarge", "--json", env=env).stdout)
    assert shown["regions"] == ["us-east-1"]
    assert shown["accelerator"]["count"] == 8


def _plan(tmp_path, config: dict, bundles: str) -> dict:
    import yaml
    from click.testing import CliRunner

    from autoscaler.cli import cli

    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(config))
    done = CliRunner().invoke(cli, ["plan", str(path), "--bundles", bundles, "--json"])
    assert done.exit_code == 0, done.output
    return json.loads(done.output)


def test_ray_multi_node_style_cluster_on_m4_xlarge_plans(tmp_path):
    config = {
        "cluster_name": "multi-node-type",
        "max_workers": 10,
        "provider": {"type": "aws", "region": "us-west-2"},
        "available_node_types": {
            "head_node": {"node_config": {"InstanceType": "m4.xlarge"}, "resources": {}},
            "cpu_4_ondemand": {
                "node_config": {"InstanceType": "m4.xlarge"},
                "resources": {"CPU": 4},
                "min_workers": 0,
                "max_workers": 5,
            },
        },
        "head_node_type": "head_node",
    }
    plan = _plan(tmp_path, config, '[{"CPU": 4}, {"CPU": 4}, {"CPU": 4}]')
    assert plan["launch"] == {"cpu_4_ondemand": 2}  # one bundle fits on the head
    assert plan["infeasible"] == []


def test_every_ec2_instance_family_plans_as_a_node_type(tmp_path):
    from instance_catalog.catalog import load_catalog

    first_of_family: dict[str, str] = {}
    for entry in sorted(load_catalog().entries("aws"), key=lambda e: e.name):
        first_of_family.setdefault(entry.name.split(".")[0], entry.name)
    assert len(first_of_family) > 150
    node_types = {
        f"w-{family}": {"node_config": {"InstanceType": name}, "max_workers": 1}
        for family, name in first_of_family.items()
    }
    node_types["head"] = {"node_config": {"InstanceType": "m4.xlarge"}, "resources": {"CPU": 0}}
    config = {
        "cluster_name": "every-family",
        "max_workers": 1000,
        "provider": {"type": "aws", "region": "us-east-1"},
        "available_node_types": node_types,
        "head_node_type": "head",
    }
    plan = _plan(tmp_path, config, '[{"CPU": 1}]')
    assert sum(plan["launch"].values()) == 1
    assert plan["infeasible"] == []


def test_refresh_prices_then_show_says_how_old_each_price_is(tmp_path):
    from datetime import datetime, timezone

    from tests.fakes.aws_replay import load_recordings, replay_server

    env = dict(os.environ)
    env.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
        AUTOSCALE_CATALOG_DIR=str(tmp_path),
    )
    regions = ["--region", "us-east-1", "--region", "us-west-2"]
    with replay_server(load_recordings()) as (url, _):
        done = autoscale(
            *("catalog", "refresh", "--cloud", "aws", "--prices", *regions),
            *("--endpoint-url", url, "--pricing-endpoint-url", url),
            env=env,
        )
    assert done.returncode == 0, done.stderr
    assert "4 on-demand and 3 spot prices in 2 region(s) written to" in done.stdout
    today = datetime.now(timezone.utc).date()

    def show(*args: str) -> dict:
        return json.loads(autoscale("catalog", "show", *args, "--json", env=env).stdout)

    fresh = show("p5.48xlarge", "--region", "us-east-1")
    assert (fresh["price_per_hour"], fresh["spot_price_per_hour"]) == (55.04, 11.9873)
    assert (fresh["price_as_of"], fresh["price_age_days"]) == (today.isoformat(), 0)
    assert fresh["price_warnings"] == []
    bundled = show("p5.48xlarge", "--region", "us-west-2")  # not in that region's refresh
    assert bundled["price_per_hour"] == 98.32
    # The recording it comes from does not say when AWS's prices were read: no date is made up.
    assert (bundled["price_as_of"], bundled["price_age_days"]) == (None, None)
    assert "SkyPilot" in bundled["price_source"]
    assert "unknown date" in bundled["price_warnings"][0]
    assert "price_age_days" in autoscale("catalog", "show", "m4.xlarge", env=env).stdout


def test_show_gives_the_price_list_figure_with_its_source_date():
    done = autoscale("catalog", "show", "p5.48xlarge", "--region", "us-east-1", "--json")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert (shown["price_per_hour"], shown["price_as_of"]) == (55.04, "2026-07-20")
    assert "Price List" in shown["price_source"]


@pytest.mark.parametrize("name", ["n4-standard-8", "t2d-standard-4", "c2d-highcpu-8"])
def test_gcp_families_in_the_recorded_api_answers_are_known(name):
    done = autoscale("catalog", "show", name, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["regions"]


def test_plan_explain_names_each_price_source_and_date(tmp_path):
    done = autoscale("plan", "example-clusters/gcp-gpu.yaml", "--explain", "--json")
    assert done.returncode == 0, done.stderr
    prices = json.loads(done.stdout)["explain"]["prices"]
    h100 = next(line for line in prices if "a3-highgpu-8g" in line)
    assert "skypilot-gcp" in h100 and "date unknown" in h100 and "flagged" in h100


def test_types_that_cannot_launch_are_listed_only_when_named():
    listed = json.loads(autoscale("catalog", "list", "--cloud", "gcp", "--json").stdout)
    labels = {row["instance_type"] for row in listed}
    assert not any(label.startswith("v7x-") or "k80" in label for label in labels)
    named = autoscale("catalog", "list", "--accelerator", "tpu-v7x", "--json")
    rows = json.loads(named.stdout)
    assert rows and all(not row["launchable"] for row in rows)
    assert "Google Kubernetes Engine" in rows[0]["unavailable_reason"]
    shown = autoscale("catalog", "show", "n1-standard-8", "--json")
    assert json.loads(shown.stdout)["launchable"]


def test_plan_says_why_a_node_type_cannot_launch(tmp_path):
    import yaml

    data = yaml.safe_load(Path("tests/autoscaler/fixtures/gcp-tpu.yaml").read_text())
    data["provider"]["availability_zone"] = "us-central1-c"
    del data["available_node_types"]["tpu_topology"]
    name, node_type = "tpu_v4_16", data["available_node_types"]["tpu_v4_16"]
    node_type["node_config"]["acceleratorType"] = "v7x-8"
    node_type["min_workers"] = 1
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(data))
    done = autoscale("plan", str(path), "--explain", "--json")
    assert done.returncode == 0, done.stderr
    explain = json.loads(done.stdout)["explain"]
    assert any("cannot be launched" in w and "GKE" in w for w in explain["warnings"])
    assert any(name in note and "Kubernetes Engine" in note for note in explain["notes"])
