"""`up`'s project preparation on GCP, through the real clients over HTTP to the embedded
fake (Compute Engine, Cloud TPU, IAM, Resource Manager): service accounts, the head's custom
role and bindings, firewall rules made once, used by launches, removed by purge, and never
someone else's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from providers.base import NODE_KIND_HEAD, NODE_KIND_WORKER, TAG_NODE_KIND, TAG_NODE_TYPE
from providers.errors import InvalidConfigError
from providers.gcp import account as gcp_account
from providers.gcp.account import (
    ACT_AS_ROLE,
    CLOUD_PLATFORM,
    HEAD_PERMISSIONS,
    GcpAccount,
    account_id,
    firewall_name,
    network_tag,
    role_id,
    slug,
)
from providers.gcp.provider import GcpNodeProvider
from providers.local.gcp import compute as compute_emulator
from providers.local.gcp import tpu as tpu_emulator
from providers.local.gcp.compute import ComputeCloud
from providers.local.gcp.iam import IamCloud, email_of
from providers.local.gcp.server import GcpEmulator
from providers.local.gcp.tpu import TpuCloud

PROJECT = "test-project"
CLUSTER = "alpha"
ZONE = "us-central1-a"
VM = {"machineType": "n1-standard-4", "availability_zone": [ZONE]}
TPU = {"acceleratorType": "v5litepod-8", "availability_zone": [ZONE]}
CONFIGS = {"head": VM, "cpu": VM, "tpu": TPU}
HEAD = account_id(CLUSTER, NODE_KIND_HEAD)
WORKER = account_id(CLUSTER, NODE_KIND_WORKER)
PROJECT_RESOURCE = f"projects/{PROJECT}"


@pytest.fixture
def iam() -> IamCloud:
    return IamCloud()


@pytest.fixture
def emulator(iam):
    compute = ComputeCloud()
    with GcpEmulator(compute=compute, tpu=TpuCloud(), iam=iam) as running:
        yield running


@pytest.fixture
def make_provider(emulator):
    def make(cluster: str = CLUSTER, **overrides) -> GcpNodeProvider:
        settings = {
            "type": "gcp",
            "project_id": PROJECT,
            "availability_zone": ZONE,
            "endpoint_url": emulator.url,
            "operation_timeout_s": 10,
            "operation_poll_s": 0.01,
            "retry_deadline_s": 2,
            **overrides,
        }
        return GcpNodeProvider(settings, cluster)

    return make


@pytest.fixture
def provider(make_provider) -> GcpNodeProvider:
    return make_provider()


def _head_member(cluster: str = CLUSTER) -> str:
    return f"serviceAccount:{email_of(PROJECT, account_id(cluster, NODE_KIND_HEAD))}"


def _members(policy: dict, role: str) -> list[str]:
    return [m for b in policy["bindings"] if b["role"] == role for m in b["members"]]


def test_prepare_makes_each_resource_once_and_marks_it_ours(provider, iam, emulator):
    first = provider.prepare_account(CONFIGS, "head")
    assert sorted((r.kind, r.name, r.created) for r in first) == sorted(
        [
            ("service-account", WORKER, True),
            ("service-account", HEAD, True),
            ("iam-role", role_id(CLUSTER), True),
            ("iam-binding", f"projects/{PROJECT}/roles/{role_id(CLUSTER)} for {HEAD}", True),
            ("iam-binding", f"{ACT_AS_ROLE} for {HEAD}", True),
            ("firewall-rule", firewall_name(CLUSTER, "internal"), True),
        ]
    )
    again = provider.prepare_account(CONFIGS, "head")
    assert not any(r.created for r in again)
    assert {(r.kind, r.name, r.id) for r in again} == {(r.kind, r.name, r.id) for r in first}
    assert sorted(a["email"] for a in iam.service_accounts(PROJECT)) == [
        email_of(PROJECT, HEAD),
        email_of(PROJECT, WORKER),
    ]
    assert all(
        "accel-cluster-name=alpha" in a["description"] for a in iam.service_accounts(PROJECT)
    )
    assert len(iam.roles(PROJECT)) == 1
    assert emulator.compute.firewall_names(PROJECT) == [firewall_name(CLUSTER, "internal")]
    assert sorted((r.kind, r.name) for r in provider.account_resources()) == sorted(
        (r.kind, r.name) for r in first
    )


def test_the_head_gets_exactly_the_documented_role_and_workers_get_none(provider, iam):
    provider.prepare_account(CONFIGS, "head")
    (role,) = iam.roles(PROJECT)
    assert role["name"] == f"projects/{PROJECT}/roles/{role_id(CLUSTER)}"
    assert role["includedPermissions"] == sorted(HEAD_PERMISSIONS)
    policy = iam.policy(PROJECT_RESOURCE)
    assert policy["bindings"] == [{"role": role["name"], "members": [_head_member()]}]
    worker = f"projects/{PROJECT}/serviceAccounts/{email_of(PROJECT, WORKER)}"
    assert iam.policy(worker)["bindings"] == [{"role": ACT_AS_ROLE, "members": [_head_member()]}]
    head = f"projects/{PROJECT}/serviceAccounts/{email_of(PROJECT, HEAD)}"
    assert iam.policy(head)["bindings"] == []  # nobody may act as the head


def test_the_role_covers_every_call_the_plugins_make_and_no_iam_or_project_power():
    """The emulators name the permission each call needs; every call the monitor makes
    (not the catalog refresh, which runs from the user's machine) is in the role."""
    refresh_only = {"machineTypes", "acceleratorTypes"}
    compute = {
        p
        for m, p in compute_emulator._PERMISSIONS.items()
        if m not in refresh_only and not m.startswith(("firewalls.", "globalOperation"))
    }
    tpu = set(tpu_emulator._VERB_PERMISSIONS.values())
    assert compute | tpu <= set(HEAD_PERMISSIONS)
    assert len(set(HEAD_PERMISSIONS)) == len(HEAD_PERMISSIONS)
    assert not any(p.startswith(("iam.", "resourcemanager.")) for p in HEAD_PERMISSIONS)
    assert not any("firewalls" in p or p.endswith("*") for p in HEAD_PERMISSIONS)


def test_the_firewall_rule_opens_the_cluster_to_itself_only(provider, emulator):
    provider.prepare_account(CONFIGS, "head")
    rule = emulator.compute.get_firewall(PROJECT, firewall_name(CLUSTER, "internal"))
    assert rule["sourceTags"] == rule["targetTags"] == [network_tag(CLUSTER)]
    assert rule["allowed"] == [{"IPProtocol": "all"}]
    assert rule["direction"] == "INGRESS" and "sourceRanges" not in rule
    assert rule["network"].endswith(f"/projects/{PROJECT}/global/networks/default")


def test_ssh_is_opened_only_where_the_config_asks(make_provider, emulator):
    ranges = ["203.0.113.0/24"]
    made = make_provider(firewall={"ssh_source_ranges": ranges}).prepare_account(CONFIGS, "head")
    assert firewall_name(CLUSTER, "ssh") in [r.name for r in made]
    rule = emulator.compute.get_firewall(PROJECT, firewall_name(CLUSTER, "ssh"))
    assert rule["sourceRanges"] == ranges and rule["targetTags"] == [network_tag(CLUSTER)]
    assert rule["allowed"] == [{"IPProtocol": "tcp", "ports": ["22"]}]


def test_vms_and_tpu_nodes_launch_with_their_kinds_account_and_the_tag(provider, emulator):
    provider.prepare_account(CONFIGS, "head")
    head = provider.create_node(VM, {TAG_NODE_KIND: NODE_KIND_HEAD}, 1, "h").nodes[0]
    worker = provider.create_node(VM, {TAG_NODE_TYPE: "cpu"}, 1, "w").nodes[0]
    tpu = provider.create_node(TPU, {TAG_NODE_TYPE: "tpu"}, 1, "t").nodes[0]

    tag = network_tag(CLUSTER)
    for node, kind in ((head, NODE_KIND_HEAD), (worker, NODE_KIND_WORKER)):
        vm = emulator.compute.get(PROJECT, ZONE, node.id)
        email = email_of(PROJECT, account_id(CLUSTER, kind))
        assert vm["serviceAccounts"] == [{"email": email, "scopes": [CLOUD_PLATFORM]}]
        assert vm["tags"] == {"items": [tag]}
    stored = emulator.tpu.get(PROJECT, ZONE, tpu.id)
    assert stored["serviceAccount"] == {
        "email": email_of(PROJECT, WORKER),
        "scope": [CLOUD_PLATFORM],
    }
    assert stored["tags"] == [tag]


def test_named_accounts_and_tags_are_kept_and_nothing_is_made_for_them(provider, emulator, iam):
    own_vm = {**VM, "serviceAccounts": [], "tags": {"items": ["mine"]}}
    own_tpu = {**TPU, "serviceAccount": {"email": "default"}, "tags": ["mine"]}
    configs = {"head": own_vm, "cpu": own_vm, "tpu": own_tpu}
    assert provider.prepare_account(configs, "head") == []
    assert iam.service_accounts(PROJECT) == [] and emulator.compute.firewall_names(PROJECT) == []
    node = provider.create_node(own_vm, {TAG_NODE_TYPE: "cpu"}, 1, "w").nodes[0]
    vm = emulator.compute.get(PROJECT, ZONE, node.id)
    assert "serviceAccounts" not in vm and vm["tags"] == {"items": ["mine"]}


def test_launches_before_up_run_as_configured(provider, emulator):
    node = provider.create_node(VM, {TAG_NODE_TYPE: "cpu"}, 1, "w").nodes[0]
    vm = emulator.compute.get(PROJECT, ZONE, node.id)
    assert "serviceAccounts" not in vm  # none of ours exists: nothing named that is missing
    assert vm["tags"] == {"items": [network_tag(CLUSTER)]}  # inert until the rule exists


def test_a_same_named_account_of_someone_else_is_left_alone(provider, iam):
    iam.put_service_account(PROJECT, HEAD, description="the data team's")
    with pytest.raises(InvalidConfigError, match="not cluster alpha's") as caught:
        provider.prepare_account(CONFIGS, "head")
    assert email_of(PROJECT, HEAD) in str(caught.value)
    assert all(r.name != HEAD for r in provider.purge_account())
    assert iam.account_exists(email_of(PROJECT, HEAD))


def test_a_same_named_firewall_rule_of_someone_else_is_left_alone(provider, emulator):
    name = firewall_name(CLUSTER, "internal")
    emulator.compute.put_firewall(PROJECT, name, description="hand made")
    with pytest.raises(InvalidConfigError, match=f"firewall rule {name} exists and is not"):
        provider.prepare_account(CONFIGS, "head")
    provider.purge_account()
    assert emulator.compute.firewall_names(PROJECT) == [name]


def test_a_same_named_role_of_someone_else_is_left_alone(provider, iam):
    iam.put_role(PROJECT, role_id(CLUSTER), ["compute.instances.list"], description="theirs")
    with pytest.raises(InvalidConfigError, match="custom role"):
        provider.prepare_account(CONFIGS, "head")
    provider.purge_account()
    (role,) = iam.roles(PROJECT)
    assert role["includedPermissions"] == ["compute.instances.list"] and not role.get("deleted")


def test_purge_removes_ours_only_and_up_again_revives_the_role(make_provider, iam, emulator):
    alpha, beta = make_provider(), make_provider(cluster="beta")
    alpha.prepare_account(CONFIGS, "head")
    beta.prepare_account(CONFIGS, "head")
    iam.add_binding(PROJECT_RESOURCE, "roles/viewer", "user:someone@example.com")

    deleted = alpha.purge_account()
    assert len(deleted) == 6
    assert alpha.account_resources() == []
    assert len(beta.account_resources()) == 6
    assert sorted(a["email"] for a in iam.service_accounts(PROJECT)) == [
        email_of(PROJECT, account_id("beta", k)) for k in (NODE_KIND_HEAD, NODE_KIND_WORKER)
    ]
    policy = iam.policy(PROJECT_RESOURCE)
    assert _members(policy, "roles/viewer") == ["user:someone@example.com"]
    assert _members(policy, f"projects/{PROJECT}/roles/{role_id('beta')}") == [_head_member("beta")]
    assert _members(policy, f"projects/{PROJECT}/roles/{role_id(CLUSTER)}") == []
    assert emulator.compute.firewall_names(PROJECT) == [firewall_name("beta", "internal")]

    revived = {r.name: r for r in alpha.prepare_account(CONFIGS, "head")}
    assert revived[role_id(CLUSTER)].created  # IAM keeps a deleted role's id: undeleted
    assert len(alpha.account_resources()) == 6


def test_a_concurrent_policy_edit_is_not_lost(provider, iam):
    iam.interfere(PROJECT_RESOURCE, "roles/viewer", "user:other@example.com")
    provider.prepare_account(CONFIGS, "head")
    policy = iam.policy(PROJECT_RESOURCE)
    assert _members(policy, "roles/viewer") == ["user:other@example.com"]
    assert _members(policy, f"projects/{PROJECT}/roles/{role_id(CLUSTER)}") == [_head_member()]
    assert iam.calls["setIamPolicy"] == 2  # refused once (stale etag), then written


def test_a_new_account_not_yet_visible_to_iam_is_waited_for(emulator, iam):
    iam.propagation_writes = 2
    slept: list[float] = []
    settings = {"project_id": PROJECT, "endpoint_url": emulator.url, "retry_deadline_s": 2}
    account = GcpAccount(settings, CLUSTER, sleep=slept.append)
    account.prepare({"head": VM, "cpu": VM}, "head")
    assert slept == [1.0, 2.0]
    assert _members(iam.policy(PROJECT_RESOURCE), account.role) == [_head_member()]


def test_node_types_on_two_networks_are_refused(provider):
    other = {**VM, "networkInterfaces": [{"network": "global/networks/other"}]}
    with pytest.raises(InvalidConfigError, match="networks default, other"):
        provider.prepare_account({"head": VM, "cpu": other}, "head")


def test_a_cluster_without_a_head_type_gets_a_worker_account_only(provider, iam):
    made = provider.prepare_account({"cpu": VM}, None)
    assert sorted(r.kind for r in made) == ["firewall-rule", "service-account"]
    assert iam.roles(PROJECT) == [] and iam.policy(PROJECT_RESOURCE)["bindings"] == []


def test_names_fit_gcp_rules_and_differ_for_names_that_clean_alike():
    long = "a-very-long-cluster-name-for-training"
    assert len(account_id(long, NODE_KIND_WORKER)) <= 30
    assert slug("a_b") != slug("a-b") and slug("alpha") == "alpha"
    assert gcp_account.is_ours("x (accel-cluster-name=alpha)", "alpha")
    assert not gcp_account.is_ours("x (accel-cluster-name=alpha2)", "alpha")


def test_the_readme_lists_the_head_role_in_full():
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    section = readme[readme.index("\n### What `up` does on GCP\n") :]
    section = section[: section.index("It also gets `roles/iam.serviceAccountUser`")]
    listed = re.findall(r"`((?:compute|tpu)\.\w+\.\w+)`", section)
    assert sorted(listed) == sorted(HEAD_PERMISSIONS)
