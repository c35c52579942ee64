"""What `up` makes in a GCP project for one cluster, least privilege, and `down --purge`
removes:

* a service account for the head (``accel-<cluster>-head``), granted on the project one
  custom role (``accel_<cluster>_head``) holding exactly :data:`HEAD_PERMISSIONS` (what the
  monitor calls: Compute Engine VMs, Cloud TPU nodes and queued resources), and
  ``roles/iam.serviceAccountUser`` on the worker service account only (to launch workers
  with it);
* a service account for workers (``accel-<cluster>-worker``) with no role at all: agents
  report to the monitor over HTTP (:mod:`autoscaler.report_channel`) and make no Google API
  call. It exists because a VM or TPU node without one named runs as the project's Compute
  Engine default service account, which usually holds Editor; a role-less account of its
  own is the least a node can run as on Cloud TPU (which cannot launch without one), and
  gives users one identity to grant their workloads' data access to;
* firewall rules on the node configs' network: ``accel-<cluster>-internal`` allows all
  traffic between the cluster's nodes (source and target network tag ``accel-<cluster>``),
  and ``accel-<cluster>-ssh`` allows SSH from ``provider.firewall.ssh_source_ranges`` only
  when that key is set.

Service accounts, custom roles and firewall rules take no labels, so each one we make says
``accel-cluster-name=<cluster>`` in its description: that is what marks it ours. Anything
under our names without it is never changed or deleted, and `up` stops with an error naming
it. Policy bindings are added and removed by read-modify-write on the policy's ``etag``
(retried when someone else wrote in between), so concurrent edits are never lost.

Why a custom role on the project, not IAM conditions: GCP labels cannot appear in IAM
conditions (AWS's tag conditions have no GCP equivalent), so the head may act on any VM or
TPU node of the project, and the plugins' label checks keep it to the cluster's own. For a
hard boundary, give each cluster its own project.

Node configs that name their own ``serviceAccounts`` (Compute Engine) or ``serviceAccount``
(Cloud TPU), or their own network ``tags``, keep them, and nothing is made for them.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import re
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from google.auth.exceptions import GoogleAuthError
from google.cloud import compute_v1
from google.protobuf import json_format

from providers.base import NODE_KIND_HEAD, NODE_KIND_WORKER, TAG_CLUSTER, AccountResource
from providers.errors import InvalidConfigError, ProviderError
from providers.gcp.api import CallSettings, client_kwargs, cloud_call
from providers.gcp.errors import (
    API_ERRORS,
    classify,
    is_already_exists,
    is_not_found,
    is_policy_conflict,
    is_unknown_member,
)
from providers.gcp.iam import IamApi
from providers.gcp.tpu.slices import tpu_slice_type

logger = logging.getLogger(__name__)

HEAD_PERMISSIONS: tuple[str, ...] = (
    # Compute Engine VMs (providers/gcp/compute): aggregatedList, get, bulkInsert, delete,
    # setLabels, and polling their zonal operations.
    "compute.instances.list",
    "compute.instances.get",
    "compute.instances.create",
    "compute.instances.delete",
    "compute.instances.setLabels",
    "compute.zoneOperations.get",
    # What a VM launch sets on the new VM: the boot script (metadata), the cluster's network
    # tag, the worker service account, a new boot disk from an image, the subnet and an
    # external IP where the node config asks for one.
    "compute.instances.setMetadata",
    "compute.instances.setTags",
    "compute.instances.setServiceAccount",
    "compute.disks.create",
    "compute.images.useReadOnly",
    "compute.subnetworks.use",
    "compute.subnetworks.useExternalIp",
    # The last lines of a VM's console, for nodes that never report.
    "compute.instances.getSerialPortOutput",
    # Cloud TPU nodes and queued resources (providers/gcp/tpu): list, get, create, delete,
    # relabel (update), and polling their operations.
    "tpu.nodes.list",
    "tpu.nodes.get",
    "tpu.nodes.create",
    "tpu.nodes.delete",
    "tpu.nodes.update",
    "tpu.operations.get",
    "tpu.queuedResources.list",
    "tpu.queuedResources.get",
    "tpu.queuedResources.create",
    "tpu.queuedResources.delete",
)
"""The head's custom role, in full. Launching with the worker service account also needs
``iam.serviceAccounts.actAs`` on that one account: ``roles/iam.serviceAccountUser``
granted on the worker account itself, never on the project (which would let the head act as
every account of the project)."""
ACT_AS_ROLE = "roles/iam.serviceAccountUser"
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
"""The access scope nodes get: with it, the service account's IAM roles alone decide."""
FIREWALL_KEY = "firewall"
"""``provider.firewall``: ``{ssh_source_ranges: [CIDR, ...]}`` opens SSH from those ranges to
the cluster's nodes (Ray's GCP provider has no such key; without it no SSH rule is made)."""
DEFAULT_PROPAGATION_S = 60.0
"""How long a policy write waits for a new service account to become visible to IAM."""
MAX_POLICY_CONFLICTS = 8
_SLUG_ROOM = 17
"""Characters of the cluster name in our names: ``accel-<slug>-worker`` fits the 30 that a
service account id may have."""
_OWNER = re.compile(re.escape(TAG_CLUSTER) + r"=([a-z0-9_-]*)")


def slug(cluster: str) -> str:
    """The cluster name in resource names: lowercase letters, digits and '-', at most 17
    characters; a name that had to change gets a digest of the original (so ``a_b`` and
    ``a-b`` differ)."""
    cleaned = re.sub(r"[^a-z0-9-]+", "-", cluster.lower()).strip("-")
    if cleaned == cluster and len(cleaned) <= _SLUG_ROOM:
        return cleaned
    digest = hashlib.sha256(cluster.encode()).hexdigest()[:6]
    return f"{cleaned[: _SLUG_ROOM - 7].rstrip('-')}-{digest}".lstrip("-")


def account_id(cluster: str, kind: str) -> str:
    """``accel-<cluster>-head`` / ``accel-<cluster>-worker``."""
    return f"accel-{slug(cluster)}-{kind}"


def role_id(cluster: str) -> str:
    """``accel_<cluster>_head`` (custom role ids take no '-')."""
    return account_id(cluster, NODE_KIND_HEAD).replace("-", "_")


def network_tag(cluster: str) -> str:
    """``accel-<cluster>``: the network tag on every node, the firewall rules' target."""
    return f"accel-{slug(cluster)}"


def firewall_name(cluster: str, purpose: str) -> str:
    """``accel-<cluster>-internal`` / ``accel-<cluster>-ssh``."""
    return f"{network_tag(cluster)}-{purpose}"


def description(cluster: str, what: str) -> str:
    """The description that marks a resource as the cluster's."""
    return f"accel-autoscaler: {what} of cluster {cluster} ({TAG_CLUSTER}={cluster})"


def is_ours(resource_description: str | None, cluster: str) -> bool:
    return cluster in _OWNER.findall(resource_description or "")


class GcpAccount:
    """One cluster's service accounts, custom role, policy bindings and firewall rules in
    one project."""

    def __init__(
        self,
        provider_config: Mapping[str, Any],
        cluster: str,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.provider_config = dict(provider_config)
        self.cluster = cluster
        self.iam = IamApi(provider_config)
        self.project = self.iam.project
        self.settings = CallSettings(provider_config)
        firewall = provider_config.get(FIREWALL_KEY)
        self.firewall_settings: Mapping[str, Any] = (
            firewall if isinstance(firewall, Mapping) else {}
        )
        self.propagation_s = float(provider_config.get("iam_propagation_s", DEFAULT_PROPAGATION_S))
        self.sleep = sleep
        self.clock = clock
        self._firewalls: compute_v1.FirewallsClient | None = None
        self._operations: compute_v1.GlobalOperationsClient | None = None
        self._launch: dict[str, str | None] = {}
        """Node kind -> the service account its launches get (None: none of ours exists)."""

    # Names -----------------------------------------------------------------------------------
    def email(self, kind: str) -> str:
        return self.iam.email(account_id(self.cluster, kind))

    @property
    def role(self) -> str:
        return self.iam.role_name(role_id(self.cluster))

    # Make ------------------------------------------------------------------------------------
    def prepare(
        self, node_configs: Mapping[str, Mapping[str, Any]], head_type: str | None
    ) -> list[AccountResource]:
        """Make (or find) what the node configs need; idempotent."""
        made: list[AccountResource] = []
        workers = [c for name, c in node_configs.items() if name != head_type]
        worker = None
        if any(not _own_account(c) for c in workers):
            worker = self._service_account(NODE_KIND_WORKER, "worker nodes", made)
        head = node_configs.get(head_type) if head_type else None
        if head is not None and not _own_account(head):
            head_email = self._service_account(NODE_KIND_HEAD, "head node", made)
            self._custom_role(made)
            member = f"serviceAccount:{head_email}"
            self._grant(f"projects/{self.project}", self.role, member, made)
            if worker is not None:
                self._grant(worker, ACT_AS_ROLE, member, made)
        elif head is not None and worker is not None:
            logger.warning(
                "the head node runs as its own service account: grant it %s on %s so it can "
                "launch workers",
                ACT_AS_ROLE,
                worker,
            )
        tagged = [c for c in node_configs.values() if not _own_tags(c)]
        if tagged:
            self._firewall_rules(self._network(tagged), made)
        self._launch = {}
        return made

    def _service_account(self, kind: str, what: str, made: list[AccountResource]) -> str:
        """The service account ``accel-<cluster>-<kind>``; its email."""
        name = account_id(self.cluster, kind)
        email = self.iam.email(name)
        with cloud_call(action="iam.serviceAccounts.get"):
            found = self.iam.get_service_account(email)
        if found is None:
            with cloud_call(action="iam.serviceAccounts.create"):
                try:
                    self.iam.create_service_account(
                        name,
                        f"accel-autoscaler {self.cluster} {kind}"[:100],
                        description(self.cluster, f"the {what}"),
                    )
                    made.append(AccountResource("service-account", name, email, created=True))
                    return email
                except API_ERRORS as exc:
                    if not is_already_exists(exc):
                        raise
                    found = self.iam.get_service_account(email)  # made just now by a twin
        self._check_ours("service account", email, (found or {}).get("description"))
        made.append(AccountResource("service-account", name, email))
        return email

    def _custom_role(self, made: list[AccountResource]) -> None:
        """The head's role with exactly :data:`HEAD_PERMISSIONS` (an older set is updated; a
        role deleted by `down --purge` is undeleted, as IAM keeps its id for weeks)."""
        rid = role_id(self.cluster)
        wanted = sorted(HEAD_PERMISSIONS)
        with cloud_call(action="iam.roles.get"):
            found = self.iam.get_role(rid)
        if found is None:
            with cloud_call(action="iam.roles.create"):
                try:
                    self.iam.create_role(
                        rid,
                        {
                            "title": f"accel-autoscaler head of {self.cluster}"[:100],
                            "description": description(self.cluster, "the head node's monitor"),
                            "includedPermissions": wanted,
                            "stage": "GA",
                        },
                    )
                    made.append(AccountResource("iam-role", rid, self.role, created=True))
                    return
                except API_ERRORS as exc:
                    if not is_already_exists(exc):
                        raise
                    found = self.iam.get_role(rid) or {}  # made just now (a retried create)
        self._check_ours("custom role", self.role, found.get("description"))
        revived = bool(found.get("deleted"))
        if revived:
            with cloud_call(action="iam.roles.undelete"):
                found = self.iam.undelete_role(rid, str(found.get("etag", "")))
        if sorted(found.get("includedPermissions") or []) != wanted:
            with cloud_call(action="iam.roles.update"):
                self.iam.update_role(
                    rid, {"includedPermissions": wanted, "etag": found.get("etag", "")}
                )
        made.append(AccountResource("iam-role", rid, self.role, created=revived))

    def _grant(self, resource: str, role: str, member: str, made: list[AccountResource]) -> None:
        """Bind ``member`` to ``role`` on ``resource`` (the project or a service account)."""
        added = self._edit_policy(resource, lambda p: _with_member(p, role, member), grant=True)
        made.append(AccountResource("iam-binding", _binding_name(role, member), resource, added))

    def _edit_policy(
        self,
        resource: str,
        edit: Callable[[dict[str, Any]], dict[str, Any] | None],
        grant: bool = False,
    ) -> bool:
        """Read ``resource``'s policy, ``edit`` it (None: nothing to change) and write it back
        with the etag it was read with; again from the read when someone else wrote in
        between, and, for a ``grant``, (with backoff) while IAM does not see a new service
        account yet."""
        on_project = resource == f"projects/{self.project}"
        permission = "resourcemanager.projects" if on_project else "iam.serviceAccounts"
        deadline = self.clock() + self.propagation_s
        conflicts, delay = 0, 1.0
        while True:
            try:
                policy = (
                    self.iam.get_project_policy()
                    if on_project
                    else self.iam.get_account_policy(resource)
                )
            except API_ERRORS as exc:
                if grant and not on_project and is_not_found(exc) and self.clock() < deadline:
                    logger.info("IAM does not see the new service account yet; waiting")
                    self.sleep(delay)
                    delay = min(delay * 2, 10.0)
                    continue
                raise classify(exc, action=f"{permission}.getIamPolicy") from exc
            changed = edit(policy)
            if changed is None:
                return False
            try:
                if on_project:
                    self.iam.set_project_policy(changed)
                else:
                    self.iam.set_account_policy(resource, changed)
                return True
            except API_ERRORS as exc:
                if is_policy_conflict(exc) and conflicts < MAX_POLICY_CONFLICTS:
                    conflicts += 1
                    logger.info("the IAM policy of %s changed meanwhile; again", resource)
                    continue
                if grant and is_unknown_member(exc) and self.clock() < deadline:
                    logger.info("IAM does not see the new service account yet; waiting")
                    self.sleep(delay)
                    delay = min(delay * 2, 10.0)
                    continue
                raise classify(exc, action=f"{permission}.setIamPolicy") from exc

    def _firewall_rules(self, network: str, made: list[AccountResource]) -> None:
        tag = network_tag(self.cluster)
        rules = {
            firewall_name(self.cluster, "internal"): {
                "description": description(self.cluster, "traffic between the nodes"),
                "sourceTags": [tag],
                "allowed": [{"IPProtocol": "all"}],
            }
        }
        ranges = self.firewall_settings.get("ssh_source_ranges")
        if ranges:
            rules[firewall_name(self.cluster, "ssh")] = {
                "description": description(self.cluster, "SSH to the nodes"),
                "sourceRanges": [str(r) for r in ranges],
                "allowed": [{"IPProtocol": "tcp", "ports": ["22"]}],
            }
        for name, fields in rules.items():
            found = self._get_firewall(name)
            if found is not None:
                self._check_ours("firewall rule", name, found.description)
                made.append(AccountResource("firewall-rule", name, str(found.id)))
                continue
            body = {
                "name": name,
                "network": f"projects/{self.project}/global/networks/{network}",
                "direction": "INGRESS",
                "priority": 1000,
                "targetTags": [tag],
                **fields,
            }
            rule = compute_v1.Firewall()
            json_format.ParseDict(body, compute_v1.Firewall.pb(rule))
            with cloud_call(action="compute.firewalls.create"):
                try:
                    operation = self.firewalls.insert_unary(
                        request=compute_v1.InsertFirewallRequest(
                            project=self.project,
                            firewall_resource=rule,
                            # one id per insert, kept across its retries: Compute Engine
                            # remembers ids for a while, so a rule deleted by `down --purge`
                            # and made again must not reuse the first one
                            request_id=str(uuid.uuid4()),
                        ),
                        retry=self.settings.retry,
                        timeout=self.settings.timeout_s,
                    )
                    self._wait(operation)
                except API_ERRORS as exc:
                    if not is_already_exists(exc):
                        raise
            found = self._get_firewall(name)
            made.append(
                AccountResource("firewall-rule", name, str(found.id) if found else None, True)
            )

    # Find (read-only) -----------------------------------------------------------------------
    def find(self) -> list[AccountResource]:
        """What exists for the cluster now, ours only."""
        found: list[AccountResource] = []
        emails = {}
        for kind in (NODE_KIND_HEAD, NODE_KIND_WORKER):
            email = self.email(kind)
            with cloud_call(action="iam.serviceAccounts.get"):
                account = self.iam.get_service_account(email)
            if account is not None and is_ours(account.get("description"), self.cluster):
                emails[kind] = email
                found.append(
                    AccountResource("service-account", account_id(self.cluster, kind), email)
                )
        with cloud_call(action="iam.roles.get"):
            role = self.iam.get_role(role_id(self.cluster))
        role_ours = (
            role is not None
            and not role.get("deleted")
            and is_ours(role.get("description"), self.cluster)
        )
        if role_ours:
            found.append(AccountResource("iam-role", role_id(self.cluster), self.role))
        head = emails.get(NODE_KIND_HEAD)
        if head is not None:
            member = f"serviceAccount:{head}"
            grants = [(f"projects/{self.project}", self.role)] if role_ours else []
            if NODE_KIND_WORKER in emails:
                grants.append((emails[NODE_KIND_WORKER], ACT_AS_ROLE))
            for resource, role_name in grants:
                if self._has_member(resource, role_name, member):
                    found.append(
                        AccountResource("iam-binding", _binding_name(role_name, member), resource)
                    )
        for name in (firewall_name(self.cluster, "internal"), firewall_name(self.cluster, "ssh")):
            rule = self._get_firewall(name)
            if rule is not None and is_ours(rule.description, self.cluster):
                found.append(AccountResource("firewall-rule", name, str(rule.id)))
        return found

    def _has_member(self, resource: str, role: str, member: str) -> bool:
        with cloud_call(action="getIamPolicy"):
            policy = (
                self.iam.get_project_policy()
                if resource == f"projects/{self.project}"
                else self.iam.get_account_policy(resource)
            )
        return _with_member(policy, role, member) is None

    def launch_settings(self, node_config: Mapping[str, Any], kind: str) -> dict[str, Any]:
        """What a launch of ``kind`` adds to ``node_config``: the cluster's service account
        of that kind (when it exists and is ours) and network tag, where the node config
        names none of its own, in the node config's API's form (Compute Engine or Cloud TPU).
        """
        tpu = tpu_slice_type(node_config) is not None
        settings: dict[str, Any] = {}
        if not _own_account(node_config):
            email = self._launch_account(kind)
            if email is not None and tpu:
                settings["serviceAccount"] = {"email": email, "scope": [CLOUD_PLATFORM]}
            elif email is not None:
                settings["serviceAccounts"] = [{"email": email, "scopes": [CLOUD_PLATFORM]}]
        if not _own_tags(node_config):
            tag = network_tag(self.cluster)
            settings["tags"] = [tag] if tpu else {"items": [tag]}
        return settings

    def _launch_account(self, kind: str) -> str | None:
        """The email of ``kind``'s service account if it exists and is ours (looked up once:
        the head needs only its worker account, which it may read)."""
        if kind not in self._launch:
            email = self.email(kind)
            try:
                with cloud_call(action="iam.serviceAccounts.get"):
                    account = self.iam.get_service_account(email)
            except (ProviderError, GoogleAuthError) as err:
                logger.warning("cannot read service account %s, launching without: %s", email, err)
                account = None
            ours = account is not None and is_ours(account.get("description"), self.cluster)
            self._launch[kind] = email if ours else None
        return self._launch[kind]

    # Remove ---------------------------------------------------------------------------------
    def purge(self) -> list[AccountResource]:
        """Delete what :meth:`find` finds (ours only): bindings first, then the role, the
        service accounts and the firewall rules; what was deleted."""
        order = ("iam-binding", "iam-role", "service-account", "firewall-rule")
        found = sorted(self.find(), key=lambda r: order.index(r.kind))
        head = f"serviceAccount:{self.email(NODE_KIND_HEAD)}"
        for resource in found:
            if resource.kind == "iam-binding":
                role = self.role if resource.id == f"projects/{self.project}" else ACT_AS_ROLE
                self._edit_policy(str(resource.id), lambda p, r=role: _without_member(p, r, head))
            elif resource.kind == "iam-role":
                with cloud_call(action="iam.roles.delete"):
                    self._ignore_missing(lambda: self.iam.delete_role(role_id(self.cluster)))
            elif resource.kind == "service-account":
                with cloud_call(action="iam.serviceAccounts.delete"):
                    email = str(resource.id)
                    self._ignore_missing(lambda e=email: self.iam.delete_service_account(e))
            else:
                with cloud_call(action="compute.firewalls.delete"):
                    self._ignore_missing(lambda n=resource.name: self._delete_firewall(n))
        self._launch = {}
        return found

    # Helpers --------------------------------------------------------------------------------
    @property
    def firewalls(self) -> compute_v1.FirewallsClient:
        if self._firewalls is None:
            self._firewalls = compute_v1.FirewallsClient(**client_kwargs(self.provider_config))
        return self._firewalls

    def _get_firewall(self, name: str) -> compute_v1.Firewall | None:
        with cloud_call(action="compute.firewalls.get"):
            try:
                return self.firewalls.get(
                    project=self.project,
                    firewall=name,
                    retry=self.settings.retry,
                    timeout=self.settings.timeout_s,
                )
            except API_ERRORS as exc:
                if is_not_found(exc):
                    return None
                raise

    def _delete_firewall(self, name: str) -> None:
        operation = self.firewalls.delete_unary(
            project=self.project,
            firewall=name,
            retry=self.settings.retry,
            timeout=self.settings.timeout_s,
        )
        self._wait(operation)

    def _wait(self, operation: compute_v1.Operation) -> None:
        """Poll a global operation until DONE (or the operation timeout); raise its error."""
        deadline = self.clock() + self.settings.operation_timeout_s
        while operation.status != compute_v1.Operation.Status.DONE:
            if self.clock() >= deadline:
                raise ProviderError(
                    f"{operation.operation_type} of {operation.target_link} is still running "
                    f"after {self.settings.operation_timeout_s:g}s; run the command again"
                )
            self.sleep(self.settings.poll_s)
            if self._operations is None:
                kwargs = client_kwargs(self.provider_config)
                self._operations = compute_v1.GlobalOperationsClient(**kwargs)
            operation = self._operations.get(
                project=self.project,
                operation=operation.name,
                retry=self.settings.retry,
                timeout=self.settings.timeout_s,
            )
        if operation.error.errors:
            first = operation.error.errors[0]
            raise ProviderError(
                f"{operation.operation_type} failed: {first.message}",
                code=first.code,
                raw_message=first.message,
            )

    def _network(self, node_configs: list[Mapping[str, Any]]) -> str:
        """The one network of ``node_configs`` (``default`` where they name none)."""
        networks = set()
        for config in node_configs:
            if tpu_slice_type(config) is not None:
                network = (config.get("networkConfig") or {}).get("network")
                field = "networkConfig.network"
            else:
                interfaces = config.get("networkInterfaces") or [{}]
                network = interfaces[0].get("network")
                field = "networkInterfaces"
                if not network and interfaces[0].get("subnetwork"):
                    raise InvalidConfigError(
                        "name the subnetwork's network too (the cluster's firewall rule is "
                        "made on it), or name your own network tags",
                        field=field,
                    )
            path = str(network or "default")
            owner = re.search(r"projects/([^/]+)/global/networks/", path)
            if owner and owner.group(1) != self.project:
                raise InvalidConfigError(
                    f"network {path} is another project's (Shared VPC): make the firewall "
                    "rules there yourself and name your own network tags in each node_config",
                    field=field,
                )
            networks.add(path.rsplit("/", 1)[-1])
        if len(networks) != 1:
            raise InvalidConfigError(
                f"the node types use networks {', '.join(sorted(networks))}: one firewall rule "
                "cannot serve them; name your own network tags in each node_config",
                field="tags",
            )
        return networks.pop()

    def _check_ours(self, what: str, name: str, resource_description: str | None) -> None:
        if not is_ours(resource_description, self.cluster):
            raise InvalidConfigError(
                f"{what} {name} exists and is not cluster {self.cluster}'s (its description "
                f"lacks {TAG_CLUSTER}={self.cluster}): it is left alone; name your own in the "
                "node configs instead"
            )

    @staticmethod
    def _ignore_missing(call: Callable[[], Any]) -> None:
        try:
            call()
        except API_ERRORS as exc:
            if not is_not_found(exc):
                raise


def _binding_name(role: str, member: str) -> str:
    return f"{role} for {member.split(':', 1)[-1].split('@', 1)[0]}"


def _with_member(policy: Mapping[str, Any], role: str, member: str) -> dict[str, Any] | None:
    """``policy`` with ``member`` in ``role`` (unconditionally); None when it already is."""
    policy = copy.deepcopy(dict(policy))
    bindings = policy.setdefault("bindings", [])
    for binding in bindings:
        if binding.get("role") == role and not binding.get("condition"):
            if member in binding.get("members", []):
                return None
            binding.setdefault("members", []).append(member)
            break
    else:
        bindings.append({"role": role, "members": [member]})
    return _versioned(policy)


def _without_member(policy: Mapping[str, Any], role: str, member: str) -> dict[str, Any] | None:
    """``policy`` without ``member`` in ``role``; None when it is not there."""
    policy = copy.deepcopy(dict(policy))
    changed = False
    for binding in policy.get("bindings", []):
        if binding.get("role") == role and member in binding.get("members", []):
            binding["members"].remove(member)
            changed = True
    if not changed:
        return None
    policy["bindings"] = [b for b in policy.get("bindings", []) if b.get("members")]
    return _versioned(policy)


def _versioned(policy: dict[str, Any]) -> dict[str, Any]:
    """Version 3 where a binding has a condition (IAM refuses those at version 1)."""
    if any(b.get("condition") for b in policy.get("bindings", [])):
        policy["version"] = 3
    return policy


def _own_account(node_config: Mapping[str, Any]) -> bool:
    return "serviceAccounts" in node_config or "serviceAccount" in node_config


def _own_tags(node_config: Mapping[str, Any]) -> bool:
    return "tags" in node_config
