"""Retention settings over HTTP on moto: defaults, updates, never_charge, roles, 400s."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient

from batchroute.clock import FixedClock
from batchroute.config import Settings
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from functions.api.deps import get_clock
from tests.integration.principals import TestOrg, new_org

PATH = "/v1/retention-settings"


@pytest.fixture
def client(local_aws: LocalStack) -> TestClient:
    identity_store.cache_clear()
    app = create_app(Settings(retention_grace_hours=48))
    app.dependency_overrides[get_clock] = lambda: FixedClock(datetime(2026, 2, 1, tzinfo=UTC))
    return TestClient(app, raise_server_exceptions=False)


@pytest.fixture
def org(local_aws: LocalStack) -> TestOrg:
    identity_store.cache_clear()
    return new_org()


def put(client: TestClient, org: TestOrg, body: Any, role: str = "admin") -> Any:
    return client.put(PATH, json=body, headers=org.key_headers(role))  # type: ignore[arg-type]


@pytest.mark.parametrize("role", ["owner", "admin", "member", "billing"])
def test_every_role_reads_the_grace_only_default(client: TestClient, org: TestOrg, role: str) -> None:
    response = client.get(PATH, headers=org.key_headers(role))  # type: ignore[arg-type]
    assert response.status_code == 200
    assert response.json() == {
        "org_id": org.org_id,
        "retention_tier": "grace_only",
        "extended_days": None,
        "never_charge": False,
        "grace_hours": 48,
        "updated_at": None,
    }


def test_an_admin_key_sets_extended_retention(client: TestClient, org: TestOrg) -> None:
    # When an admin key asks for 30 days
    response = put(client, org, {"retention_tier": "extended_fixed", "extended_days": 30})
    # Then 200 with the settings, and reads agree
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["retention_tier"], body["extended_days"], body["updated_at"]) == (
        "extended_fixed",
        30,
        "2026-02-01T00:00:00.000Z",
    )
    assert client.get(PATH, headers=org.session_headers("member")).json() == body


def test_never_charge_forces_grace_only(client: TestClient, org: TestOrg) -> None:
    put(client, org, {"retention_tier": "until_deleted"})
    body = put(client, org, {"never_charge": True, "retention_tier": "until_deleted"}).json()
    assert (body["retention_tier"], body["never_charge"], body["extended_days"]) == ("grace_only", True, None)


@pytest.mark.parametrize("role", ["member", "billing"])
def test_roles_without_retention_manage_get_403(client: TestClient, org: TestOrg, role: str) -> None:
    response = put(client, org, {"retention_tier": "until_deleted"}, role)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"


def test_an_owner_session_may_update(client: TestClient, org: TestOrg) -> None:
    response = client.put(
        PATH, json={"retention_tier": "until_deleted"}, headers=org.session_headers("owner")
    )
    assert response.status_code == 200 and response.json()["retention_tier"] == "until_deleted"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"retention_tier": "extended_fixed"}, "extended_days"),
        ({"retention_tier": "extended_fixed", "extended_days": 0}, "extended_days"),
        ({"retention_tier": "extended_fixed", "extended_days": 4000}, "extended_days"),
        ({"extended_days": 10}, "extended_days"),
        ({"retention_tier": "forever"}, "retention_tier"),
        ({"never_charge": 1}, "never_charge"),
        ({"keep": True}, "keep"),
    ],
)
def test_invalid_updates_are_400_naming_the_field(
    client: TestClient, org: TestOrg, body: dict[str, Any], field: str
) -> None:
    response = put(client, org, body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_retention" and error["details"]["field"] == field
    assert client.get(PATH, headers=org.key_headers()).json()["updated_at"] is None


def test_anonymous_callers_get_401(client: TestClient) -> None:
    assert client.get(PATH).status_code == 401
    assert client.put(PATH, json={}).status_code == 401
