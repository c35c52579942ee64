"""A fake IAM and Resource Manager REST surface: what ``up`` uses to give a cluster its
service accounts and custom role (:mod:`providers.gcp.account`), spoken to over HTTP.

Serves, as ``iam.googleapis.com`` and ``cloudresourcemanager.googleapis.com`` do:

* ``/v1/projects/P/serviceAccounts[/EMAIL]``: create (``accountId``), get, delete, and
  ``EMAIL:getIamPolicy`` / ``EMAIL:setIamPolicy`` (who may act as the account);
* ``/v1/projects/P/roles[/ID]``: create (``roleId``), get, patch (``updateMask``), delete
  (which only marks the role ``deleted``: its id cannot be reused, as on IAM, until it is
  undeleted with ``ID:undelete``);
* ``/v1/projects/P:getIamPolicy`` / ``:setIamPolicy``: the project's policy.

Policies carry an ``etag``; a write with a stale one is refused (409 ``ABORTED``), as
concurrent edits are on Google's side. A member naming a service account of the project
that does not exist is refused (400), and a new account stays invisible to policy writes for
``propagation_writes`` attempts (IAM is eventually consistent). Deleting an account turns
its project bindings into ``deleted:serviceAccount:EMAIL?uid=N``. :meth:`IamCloud.interfere`
makes another writer change a policy between a caller's read and write.
"""

from __future__ import annotations

import base64
import copy
import itertools
import re
import threading
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from providers.local.gcp.rest import ApiError

_ACCOUNTS = re.compile(r"^/v1/projects/([^/:]+)/serviceAccounts(?:/([^/:]+))?(?::(\w+))?$")
_ROLES = re.compile(r"^/v1/projects/([^/:]+)/roles(?:/([^/:]+))?(?::(\w+))?$")
_PROJECT = re.compile(r"^/v1/projects/([^/:]+):(getIamPolicy|setIamPolicy)$")
_ACCOUNT_ID = re.compile(r"^[a-z]([-a-z0-9]{4,28}[a-z0-9])$")
_ROLE_ID = re.compile(r"^[a-zA-Z0-9_.]{3,64}$")
_PERMISSION = re.compile(r"^[a-z][a-zA-Z0-9]*(\.[a-zA-Z0-9]+){2}$")
_ROLE_FIELDS = ("title", "description", "includedPermissions", "stage")


def email_of(project: str, account_id: str) -> str:
    return f"{account_id}@{project}.iam.gserviceaccount.com"


class IamCloud:
    """Service accounts, custom roles and IAM policies of any number of projects."""

    def __init__(self, propagation_writes: int = 0) -> None:
        self.propagation_writes = propagation_writes
        self.calls: dict[str, int] = {}
        self._lock = threading.Lock()
        self._accounts: dict[str, dict] = {}
        """email -> service account."""
        self._unseen: dict[str, int] = {}
        """email -> policy writes that still do not see it."""
        self._roles: dict[str, dict] = {}
        """``projects/P/roles/ID`` -> role."""
        self._policies: dict[str, dict] = {}
        """``projects/P`` or ``projects/P/serviceAccounts/EMAIL`` -> policy."""
        self._interfere: dict[str, Callable[[dict], None]] = {}
        self._ids = itertools.count(100000000000000000001)

    # Tests ----------------------------------------------------------------------------------
    def put_service_account(self, project: str, account_id: str, description: str = "") -> str:
        """Seed a service account directly (e.g. one someone else made); its email."""
        with self._lock:
            return self._create_account(project, account_id, {"description": description})["email"]

    def put_role(self, project: str, role_id: str, permissions: list[str], description="") -> None:
        """Seed a custom role directly (e.g. one someone else made)."""
        with self._lock:
            self._roles[f"projects/{project}/roles/{role_id}"] = self._new_role(
                project, role_id, {"includedPermissions": permissions, "description": description}
            )

    def add_binding(self, resource: str, role: str, member: str) -> None:
        """Add ``member`` to ``role`` on ``resource`` (``projects/P``...), as another tool."""
        with self._lock:
            policy = self._policy(resource)
            _add(policy, role, member)
            policy["etag"] = _etag()

    def interfere(self, resource: str, role: str, member: str) -> None:
        """Right after the next read of ``resource``'s policy, another writer adds ``member``
        to ``role`` there (so the reader's etag goes stale)."""
        with self._lock:
            self._interfere[resource] = lambda policy: _add(policy, role, member)

    def policy(self, resource: str) -> dict:
        with self._lock:
            return copy.deepcopy(self._policy(resource))

    def service_accounts(self, project: str) -> list[dict]:
        with self._lock:
            return [dict(a) for a in self._accounts.values() if a["projectId"] == project]

    def roles(self, project: str) -> list[dict]:
        with self._lock:
            return [
                copy.deepcopy(r)
                for name, r in self._roles.items()
                if name.startswith(f"projects/{project}/")
            ]

    def account_exists(self, email: str) -> bool:
        with self._lock:
            return email in self._accounts

    # Service accounts -------------------------------------------------------------------------
    def _create_account(self, project: str, account_id: str, fields: dict) -> dict:
        if not _ACCOUNT_ID.match(account_id or ""):
            raise ApiError(
                400,
                "INVALID_ARGUMENT",
                f"Invalid accountId {account_id!r}: 6-30 characters, lowercase letters, digits "
                "and '-', starting with a letter.",
            )
        email = email_of(project, account_id)
        if email in self._accounts:
            raise ApiError(
                409,
                "ALREADY_EXISTS",
                f"Service account {account_id} already exists within project projects/{project}.",
            )
        unique = str(next(self._ids))
        account = {
            "name": f"projects/{project}/serviceAccounts/{email}",
            "projectId": project,
            "uniqueId": unique,
            "email": email,
            "displayName": str(fields.get("displayName", "")),
            "description": str(fields.get("description", "")),
            "etag": _etag(),
            "oauth2ClientId": unique,
        }
        self._accounts[email] = account
        self._unseen[email] = self.propagation_writes
        return account

    def _account(self, project: str, email: str) -> dict:
        account = self._accounts.get(email)
        if account is None or project not in ("-", account["projectId"]):
            raise ApiError(
                404,
                "NOT_FOUND",
                f"Unknown service account: projects/{project}/serviceAccounts/{email}",
            )
        return account

    def _delete_account(self, project: str, email: str) -> None:
        account = self._account(project, email)
        del self._accounts[email]
        self._unseen.pop(email, None)
        self._policies.pop(f"projects/{account['projectId']}/serviceAccounts/{email}", None)
        gone = f"deleted:serviceAccount:{email}?uid={account['uniqueId']}"
        for policy in self._policies.values():
            for binding in policy.get("bindings", []):
                ours = f"serviceAccount:{email}"
                binding["members"] = [gone if m == ours else m for m in binding["members"]]

    # Roles ------------------------------------------------------------------------------------
    def _new_role(self, project: str, role_id: str, fields: dict) -> dict:
        role = {
            "name": f"projects/{project}/roles/{role_id}",
            "title": str(fields.get("title") or role_id),
            "description": str(fields.get("description", "")),
            "includedPermissions": self._permissions(fields.get("includedPermissions")),
            "stage": str(fields.get("stage") or "GA"),
            "etag": _etag(),
        }
        return role

    @staticmethod
    def _permissions(values: Any) -> list[str]:
        permissions = list(values or [])
        for permission in permissions:
            if not isinstance(permission, str) or not _PERMISSION.match(permission):
                raise ApiError(400, "INVALID_ARGUMENT", f"Permission {permission} is not valid.")
        return sorted(set(permissions))

    def _role(self, name: str) -> dict:
        role = self._roles.get(name)
        if role is None:
            raise ApiError(404, "NOT_FOUND", f"The role named {name} was not found.")
        return role

    def _create_role(self, project: str, role_id: str, fields: dict) -> dict:
        if not _ROLE_ID.match(role_id or ""):
            raise ApiError(400, "INVALID_ARGUMENT", f"The role_id ({role_id}) is not valid.")
        name = f"projects/{project}/roles/{role_id}"
        existing = self._roles.get(name)
        if existing is not None:
            why = " and was deleted; undelete it or wait" if existing.get("deleted") else ""
            raise ApiError(409, "ALREADY_EXISTS", f"A role named {role_id} already exists{why}.")
        self._roles[name] = self._new_role(project, role_id, fields)
        return self._roles[name]

    def _patch_role(self, name: str, mask: str, fields: dict) -> dict:
        role = self._role(name)
        if role.get("deleted"):
            raise ApiError(400, "FAILED_PRECONDITION", f"The role {name} is deleted.")
        if fields.get("etag") and fields["etag"] != role["etag"]:
            raise ApiError(409, "ABORTED", "The etag of the role does not match.")
        for key in [k.strip() for k in mask.split(",") if k.strip()] or list(_ROLE_FIELDS):
            if key not in _ROLE_FIELDS:
                raise ApiError(400, "INVALID_ARGUMENT", f"Invalid update mask field {key}.")
            if key == "includedPermissions":
                role[key] = self._permissions(fields.get(key))
            elif key in fields:
                role[key] = str(fields[key])
        role["etag"] = _etag()
        return role

    # Policies ---------------------------------------------------------------------------------
    def _policy(self, resource: str) -> dict:
        return self._policies.setdefault(resource, {"version": 1, "etag": _etag(), "bindings": []})

    def _get_policy(self, resource: str) -> dict:
        policy = self._policy(resource)
        answer = copy.deepcopy(policy)
        hook = self._interfere.pop(resource, None)
        if hook is not None:
            hook(policy)
            policy["etag"] = _etag()
        return answer

    def _set_policy(self, resource: str, body: dict) -> dict:
        wanted = body.get("policy")
        if not isinstance(wanted, dict):
            raise ApiError(400, "INVALID_ARGUMENT", "policy is required.")
        current = self._policy(resource)
        if wanted.get("etag") and wanted["etag"] != current["etag"]:
            raise ApiError(
                409,
                "ABORTED",
                "There were concurrent policy changes. Please retry the whole "
                "read-modify-write with exponential backoff.",
            )
        bindings = []
        for binding in wanted.get("bindings") or []:
            members = list(dict.fromkeys(binding.get("members") or []))
            for member in members:
                self._check_member(member)
            if members:
                bindings.append({**binding, "members": members})
        for binding in bindings:
            role = binding.get("role", "")
            if role.startswith("projects/") and (
                role not in self._roles or self._roles[role].get("deleted")
            ):
                raise ApiError(400, "INVALID_ARGUMENT", f"Role {role} does not exist.")
        self._policies[resource] = {
            "version": int(wanted.get("version") or 1),
            "etag": _etag(),
            "bindings": bindings,
        }
        return copy.deepcopy(self._policies[resource])

    def _check_member(self, member: str) -> None:
        kind, _, email = member.partition(":")
        if kind != "serviceAccount" or not email.endswith(".iam.gserviceaccount.com"):
            return
        unseen = self._unseen.get(email, 0)
        if email not in self._accounts or unseen > 0:
            if unseen > 0:
                self._unseen[email] = unseen - 1
            raise ApiError(400, "INVALID_ARGUMENT", f"Service account {email} does not exist.")

    # HTTP -------------------------------------------------------------------------------------
    def route(self, method: str, path: str, query: dict[str, str], body: dict) -> dict:
        """Serve one IAM (``/v1/projects/P/serviceAccounts|roles``) or Resource Manager
        (``/v1/projects/P:getIamPolicy``) request."""
        path = unquote(path)
        with self._lock:
            match = _PROJECT.match(path)
            if match and method == "POST":
                project, verb = match.groups()
                self._count(verb)
                resource = f"projects/{project}"
                if verb == "getIamPolicy":
                    return self._get_policy(resource)
                return self._set_policy(resource, body)
            match = _ACCOUNTS.match(path)
            if match:
                return self._route_account(method, *match.groups(), body)
            match = _ROLES.match(path)
            if match:
                return self._route_role(method, *match.groups(), query, body)
        raise ApiError(404, "NOT_FOUND", f"{method} {path} is not part of the emulated API.")

    def _route_account(
        self, method: str, project: str, email: str | None, verb: str | None, body: dict
    ) -> dict:
        if email is None and method == "POST" and verb is None:
            self._count("serviceAccounts.create")
            return dict(
                self._create_account(
                    project, str(body.get("accountId", "")), body.get("serviceAccount") or {}
                )
            )
        if email is not None and verb is None and method == "GET":
            self._count("serviceAccounts.get")
            return dict(self._account(project, email))
        if email is not None and verb is None and method == "DELETE":
            self._count("serviceAccounts.delete")
            self._delete_account(project, email)
            return {}
        if email is not None and method == "POST" and verb in ("getIamPolicy", "setIamPolicy"):
            self._count(f"serviceAccounts.{verb}")
            account = self._account(project, email)
            resource = f"projects/{account['projectId']}/serviceAccounts/{email}"
            if verb == "getIamPolicy":
                return self._get_policy(resource)
            return self._set_policy(resource, body)
        raise ApiError(404, "NOT_FOUND", f"{method} service accounts is not emulated.")

    def _route_role(
        self,
        method: str,
        project: str,
        role_id: str | None,
        verb: str | None,
        query: dict[str, str],
        body: dict,
    ) -> dict:
        name = f"projects/{project}/roles/{role_id}"
        if role_id is None and method == "POST" and verb is None:
            self._count("roles.create")
            role_id = str(body.get("roleId", ""))
            return copy.deepcopy(self._create_role(project, role_id, body.get("role") or {}))
        if role_id is not None and verb is None and method == "GET":
            self._count("roles.get")
            return copy.deepcopy(self._role(name))
        if role_id is not None and verb is None and method == "PATCH":
            self._count("roles.update")
            return copy.deepcopy(self._patch_role(name, query.get("updateMask", ""), body))
        if role_id is not None and verb is None and method == "DELETE":
            self._count("roles.delete")
            role = self._role(name)
            if role.get("deleted"):
                raise ApiError(400, "FAILED_PRECONDITION", f"The role {name} is deleted.")
            role.update(deleted=True, etag=_etag())
            return copy.deepcopy(role)
        if role_id is not None and verb == "undelete" and method == "POST":
            self._count("roles.undelete")
            role = self._role(name)
            if not role.get("deleted"):
                raise ApiError(400, "FAILED_PRECONDITION", f"The role {name} is not deleted.")
            role.pop("deleted")
            role["etag"] = _etag()
            return copy.deepcopy(role)
        raise ApiError(404, "NOT_FOUND", f"{method} roles is not emulated.")

    def _count(self, method: str) -> None:
        self.calls[method] = self.calls.get(method, 0) + 1


def _add(policy: dict, role: str, member: str) -> None:
    for binding in policy.setdefault("bindings", []):
        if binding.get("role") == role and "condition" not in binding:
            if member not in binding["members"]:
                binding["members"].append(member)
            return
    policy["bindings"].append({"role": role, "members": [member]})


def _etag() -> str:
    return base64.b64encode(uuid.uuid4().bytes[:8]).decode()
