"""Every role against every guarded action over HTTP: allowed exactly when docs/roles.md says so."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from batchroute.domain.accounts.access import ROLE_PERMISSIONS, ROLES, Permission, Role
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from tests.integration.principals import TestOrg, new_org

# (permission, method, path, body, session only)
GUARDED: list[tuple[Permission, str, str, dict[str, Any] | None, bool]] = [
    ("account:read", "GET", "/v1/auth/account", None, False),
    ("account:manage", "PUT", "/v1/auth/account/profile", {"display_name": "Renamed"}, False),
    ("keys:manage", "POST", "/v1/auth/account/api-keys", {"label": "matrix"}, True),
    (
        "delivery:manage",
        "PUT",
        "/v1/auth/account/delivery-webhook",
        {"url": "https://93.184.215.14/hooks", "secret": "a-long-secret"},
        False,
    ),
    ("retention:manage", "PUT", "/v1/retention-settings", {"retention_tier": "grace_only"}, False),
    ("billing:read", "GET", "/v1/billing/controls", None, False),
    ("billing:read", "GET", "/v1/billing/controls/audit", None, False),
    ("billing:read", "GET", "/v1/billing/events", None, False),
    ("billing:read", "GET", "/v1/usage", None, False),
    ("billing:manage", "PUT", "/v1/billing/controls", {"alert_email_enabled": True}, True),
    ("billing:read", "GET", "/v1/billing/auto-topup", None, False),
    ("billing:read", "GET", "/v1/billing/auto-topup/attempts", None, False),
    ("billing:manage", "PUT", "/v1/billing/auto-topup", {"amount": 30}, False),
    ("account:read", "GET", "/v1/delivery-targets", None, False),
    ("routing:read", "GET", "/v1/routing/policy", None, False),
    ("routing:read", "GET", "/v1/routing/policy/history", None, False),
    ("routing:manage", "PUT", "/v1/routing/policy", {"chat_fallbacks_allowed": True}, False),
    ("batches:read", "GET", "/v1/schedules", None, False),
    (
        "delivery:manage",
        "POST",
        "/v1/delivery-targets",
        {
            "bucket": "matrix-results",
            "region": "us-east-1",
            "access_key_id": "AKIAMATRIX",
            "secret_access_key": "s" * 40,
        },
        False,
    ),
    ("batches:read", "GET", "/v1/work-orders", None, False),
    ("batches:create", "POST", "/v1/work-orders", {"name": "matrix"}, False),
    ("batches:read", "GET", "/v1/feedback", None, False),
    ("batches:read", "GET", "/v1/feedback/summary", None, False),
    ("batches:read", "GET", "/v1/presets", None, False),
    ("batches:create", "POST", "/v1/presets", {"name": "matrix", "model": "gpt-4o-mini"}, False),
]


@pytest.fixture
def client(local_aws: LocalStack) -> TestClient:
    identity_store.cache_clear()
    return TestClient(create_app(), raise_server_exceptions=False)


@pytest.fixture
def org(client: TestClient) -> TestOrg:
    return new_org()


def _call(
    client: TestClient, method: str, path: str, body: dict[str, Any] | None, headers: dict[str, str]
) -> Any:
    return client.request(method, path, json=body, headers=headers)


@pytest.mark.parametrize("role", ROLES)
def test_sessions_of_every_role(client: TestClient, org: TestOrg, role: Role) -> None:
    for permission, method, path, body, _ in GUARDED:
        # Given a signed-in user with `role` / When the guarded action is tried
        response = _call(client, method, path, body, org.session_headers(role))
        # Then it is allowed exactly when the role grants the permission
        if permission in ROLE_PERMISSIONS[role]:
            assert response.status_code < 300, (role, path, response.text)
        else:
            assert response.status_code == 403, (role, path, response.text)
            assert response.json()["error"]["code"] == "permission_denied"


@pytest.mark.parametrize("role", ROLES)
def test_api_keys_of_every_role(client: TestClient, org: TestOrg, role: Role) -> None:
    for permission, method, path, body, session_only in GUARDED:
        response = _call(client, method, path, body, org.key_headers(role))
        if session_only:
            assert response.status_code == 403, (role, path)
            assert response.json()["error"]["code"] == "user_session_required"
        elif permission in ROLE_PERMISSIONS[role]:
            assert response.status_code < 300, (role, path, response.text)
        else:
            assert response.status_code == 403, (role, path)
            assert response.json()["error"]["code"] == "permission_denied"


def test_no_credentials_is_401_everywhere(client: TestClient) -> None:
    for _, method, path, body, _ in GUARDED:
        response = _call(client, method, path, body, {})
        assert response.status_code == 401, path
        assert "code" in response.json()["error"]
