"""The IAM and Resource Manager REST APIs, for what ``up`` makes in a project (service
accounts, a custom role, policy bindings).

Google's Python IAM admin client speaks only gRPC, so these few calls go over REST through
google-auth's ``AuthorizedSession`` (Application Default Credentials, the same as the
Compute Engine and Cloud TPU clients), with the shared retries of
:class:`providers.gcp.api.CallSettings`. An error answer becomes google-api-core's own
exception (``from_http_response``), so :func:`providers.gcp.errors.classify` reads it like
any other Google API error. With ``endpoint_url`` (a local fake, plain HTTP) both APIs are
served there and no credentials are sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import requests
from google.api_core import exceptions as gexc

from providers.gcp.api import CallSettings, project_of
from providers.gcp.errors import API_ERRORS, is_not_found

IAM_ENDPOINT = "https://iam.googleapis.com"
RESOURCE_MANAGER_ENDPOINT = "https://cloudresourcemanager.googleapis.com"
SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
POLICY_VERSION = 3
"""Read policies at version 3 so conditional bindings (others') are returned and kept."""


class IamApi:
    """Service accounts and custom roles of one project, and IAM policies."""

    def __init__(self, provider_config: Mapping[str, Any]) -> None:
        self.project = project_of(provider_config)
        self.settings = CallSettings(provider_config)
        endpoint = str(provider_config.get("endpoint_url") or "").rstrip("/")
        self.iam_url = endpoint or IAM_ENDPOINT
        self.crm_url = endpoint or RESOURCE_MANAGER_ENDPOINT
        self._session: requests.Session | None = None

    @property
    def session(self) -> requests.Session:
        if self._session is None:
            if self.iam_url.startswith("http://"):
                self._session = requests.Session()  # a local fake: never send a token in clear
            else:
                import google.auth
                from google.auth.transport.requests import AuthorizedSession

                credentials, _ = google.auth.default(scopes=list(SCOPES))
                self._session = AuthorizedSession(credentials)
        return self._session

    def _request(
        self,
        method: str,
        url: str,
        body: Mapping[str, Any] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        def once() -> dict[str, Any]:
            response = self.session.request(
                method, url, json=body, params=params, timeout=self.settings.timeout_s
            )
            if response.status_code >= 400:
                raise gexc.from_http_response(response)
            return response.json() if response.content else {}

        return self.settings.retry(once)()

    def _get(self, url: str) -> dict[str, Any] | None:
        """The resource at ``url``, or None when it does not exist."""
        try:
            return self._request("GET", url)
        except API_ERRORS as exc:
            if is_not_found(exc):
                return None
            raise

    # Service accounts ---------------------------------------------------------------------
    def email(self, account_id: str) -> str:
        return f"{account_id}@{self.project}.iam.gserviceaccount.com"

    def _account_url(self, email: str) -> str:
        return f"{self.iam_url}/v1/projects/{self.project}/serviceAccounts/{quote(email)}"

    def get_service_account(self, email: str) -> dict[str, Any] | None:
        return self._get(self._account_url(email))

    def create_service_account(
        self, account_id: str, display_name: str, description: str
    ) -> dict[str, Any]:
        return self._request(
            "POST",
            f"{self.iam_url}/v1/projects/{self.project}/serviceAccounts",
            {
                "accountId": account_id,
                "serviceAccount": {"displayName": display_name, "description": description},
            },
        )

    def delete_service_account(self, email: str) -> None:
        self._request("DELETE", self._account_url(email))

    def get_account_policy(self, email: str) -> dict[str, Any]:
        return self._request(
            "POST",
            self._account_url(email) + ":getIamPolicy",
            params={"options.requestedPolicyVersion": str(POLICY_VERSION)},
        )

    def set_account_policy(self, email: str, policy: Mapping[str, Any]) -> dict[str, Any]:
        return self._request("POST", self._account_url(email) + ":setIamPolicy", {"policy": policy})

    # Custom roles --------------------------------------------------------------------------
    def role_name(self, role_id: str) -> str:
        return f"projects/{self.project}/roles/{role_id}"

    def get_role(self, role_id: str) -> dict[str, Any] | None:
        """The role, deleted ones included (``deleted: true``), or None."""
        return self._get(f"{self.iam_url}/v1/{self.role_name(role_id)}")

    def create_role(self, role_id: str, role: Mapping[str, Any]) -> dict[str, Any]:
        return self._request(
            "POST",
            f"{self.iam_url}/v1/projects/{self.project}/roles",
            {"roleId": role_id, "role": dict(role)},
        )

    def update_role(self, role_id: str, role: Mapping[str, Any]) -> dict[str, Any]:
        return self._request(
            "PATCH",
            f"{self.iam_url}/v1/{self.role_name(role_id)}",
            dict(role),
            params={"updateMask": ",".join(sorted(k for k in role if k != "etag"))},
        )

    def undelete_role(self, role_id: str, etag: str) -> dict[str, Any]:
        return self._request(
            "POST", f"{self.iam_url}/v1/{self.role_name(role_id)}:undelete", {"etag": etag}
        )

    def delete_role(self, role_id: str) -> None:
        self._request("DELETE", f"{self.iam_url}/v1/{self.role_name(role_id)}")

    # The project's policy (Resource Manager) ----------------------------------------------
    def get_project_policy(self) -> dict[str, Any]:
        return self._request(
            "POST",
            f"{self.crm_url}/v1/projects/{self.project}:getIamPolicy",
            {"options": {"requestedPolicyVersion": POLICY_VERSION}},
        )

    def set_project_policy(self, policy: Mapping[str, Any]) -> dict[str, Any]:
        return self._request(
            "POST",
            f"{self.crm_url}/v1/projects/{self.project}:setIamPolicy",
            {"policy": dict(policy)},
        )
