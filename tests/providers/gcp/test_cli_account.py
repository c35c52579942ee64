"""`up` prepares the GCP project and `down --purge` removes it, end to end through the CLI,
against the fake Compute Engine, Cloud TPU, IAM and Resource Manager over HTTP."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from autoscaler.cli import cli
from providers.local.gcp.iam import email_of
from providers.local.gcp.server import GcpEmulator

PROJECT = "acct-project"
ZONE = "us-central1-a"


@pytest.fixture
def emulator(monkeypatch, tmp_path):
    monkeypatch.setenv("AUTOSCALE_STATE_DIR", str(tmp_path / "state"))
    with GcpEmulator() as running:
        yield running


@pytest.fixture
def cluster_yaml(emulator, tmp_path) -> str:
    vm = {"machineType": "n1-standard-4"}
    path = tmp_path / "acct.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "cluster_name": "acct",
                "provider": {
                    "type": "gcp",
                    "project_id": PROJECT,
                    "availability_zone": ZONE,
                    "endpoint_url": emulator.url,
                    "operation_poll_s": 0.01,
                    "retry_deadline_s": 2,
                },
                "available_node_types": {
                    "head": {"node_config": vm},
                    "cpu": {"node_config": vm, "min_workers": 1, "max_workers": 2},
                    "tpu": {
                        "node_config": {"acceleratorType": "v5litepod-8"},
                        "min_workers": 1,
                        "max_workers": 1,
                    },
                },
                "head_node_type": "head",
            }
        )
    )
    return str(path)


def autoscale(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_up_twice_makes_one_set_and_down_purge_removes_only_ours(cluster_yaml, emulator):
    iam, compute, tpu = emulator.iam, emulator.compute, emulator.tpu
    iam.put_service_account(PROJECT, "someone-elses", description="not a cluster's")
    first = autoscale("up", cluster_yaml, "--yes")
    assert first.exit_code == 0, first.output
    assert "service-account accel-acct-head: created" in first.output
    assert "firewall-rule accel-acct-internal: created" in first.output
    second = autoscale("up", cluster_yaml, "--yes")
    assert second.exit_code == 0, second.output
    assert "service-account accel-acct-head: reused" in second.output
    assert ": created" not in second.output
    emails = sorted(a["email"] for a in iam.service_accounts(PROJECT))
    assert emails == [
        email_of(PROJECT, "accel-acct-head"),
        email_of(PROJECT, "accel-acct-worker"),
        email_of(PROJECT, "someone-elses"),
    ]

    vms = [compute.get(PROJECT, ZONE, name.split("/")[1]) for name in compute.instance_names()]
    by_kind = {vm["labels"]["accel-node-kind"]: vm for vm in vms}
    assert by_kind["head"]["serviceAccounts"][0]["email"] == email_of(PROJECT, "accel-acct-head")
    assert by_kind["worker"]["serviceAccounts"][0]["email"] == email_of(
        PROJECT, "accel-acct-worker"
    )
    assert all(vm["tags"] == {"items": ["accel-acct"]} for vm in vms)
    (slice_name,) = tpu.node_names()
    node = tpu.get(PROJECT, ZONE, slice_name.rsplit("/", 1)[-1])
    assert node["serviceAccount"]["email"] == email_of(PROJECT, "accel-acct-worker")
    assert node["tags"] == ["accel-acct"]

    status = json.loads(autoscale("status", cluster_yaml, "--json").output)
    assert sorted(r["kind"] for r in status["account"]) == [
        "firewall-rule",
        "iam-binding",
        "iam-binding",
        "iam-role",
        "service-account",
        "service-account",
    ]

    down = autoscale("down", cluster_yaml, "--yes", "--purge")
    assert down.exit_code == 0, down.output
    assert [a["email"] for a in iam.service_accounts(PROJECT)] == [
        email_of(PROJECT, "someone-elses")
    ]
    assert all(r.get("deleted") for r in iam.roles(PROJECT))
    assert iam.policy(f"projects/{PROJECT}")["bindings"] == []
    assert compute.firewall_names(PROJECT) == []
    assert compute.instance_names() == [] and tpu.node_names() == []
