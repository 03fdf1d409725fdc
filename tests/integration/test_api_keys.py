"""API keys over HTTP: session-only creation (value once), revocation, prefixes, hashing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.app_secret import app_secret
from batchroute.adapters.aws import client as aws_client
from batchroute.config import get_settings
from batchroute.domain.accounts.access import ROLES, Role
from batchroute.domain.accounts.accounts import ApiKey, Org, Session, User
from batchroute.domain.accounts.credentials import IssuedKey, issue_api_key, keyed_hash, new_opaque_token
from batchroute.ids import new_id
from batchroute.services.accounts.authentication import SESSION_COOKIE
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from tests.integration.principals import new_org

NOW = "2026-01-01T00:00:00.000Z"
LATER = "2999-01-01T00:00:00.000Z"


def _org_with_owner(role: str = "owner") -> tuple[str, str, str]:
    """An org whose user has `role`; returns (org_id, session cookie value, owner key value)."""
    store = identity_store()
    org_id, user_id = new_id("org"), new_id("user")
    issued = issue_api_key(get_settings().environment, app_secret())
    store.create_account(
        org=Org(org_id=org_id, display_name="Acme", plan="prepaid", owner_user_id=user_id, created_at=NOW),
        user=User(
            user_id=user_id,
            org_id=org_id,
            email=f"{user_id}@example.com",
            password_hash="x",
            role=role,
            created_at=NOW,
        ),  # type: ignore[arg-type]
        api_key=_api_key(org_id, issued, label="seed", role="owner"),
    )
    token = new_opaque_token()
    store.put_session(
        Session(
            session_id=new_id("sess"),
            token_hash=keyed_hash(app_secret(), token),
            user_id=user_id,
            org_id=org_id,
            created_at=NOW,
            expires_at=LATER,
        )
    )
    return org_id, token, issued.value


def _api_key(org_id: str, issued: IssuedKey, *, label: str, role: Role) -> ApiKey:
    return ApiKey(
        key_id=new_id("key"),
        org_id=org_id,
        key_hash=issued.key_hash,
        label=label,
        role=role,
        display_prefix=issued.display_prefix,
        created_at=NOW,
    )


@pytest.fixture
def client(local_aws: LocalStack) -> TestClient:
    identity_store.cache_clear()
    return TestClient(create_app(), raise_server_exceptions=False)


def test_session_creates_a_key_shown_once_that_works_at_once(client: TestClient) -> None:
    # Given a signed-in owner
    _, session, _ = _org_with_owner()
    client.cookies.set(SESSION_COOKIE, session)
    # When a key is created
    response = client.post("/v1/auth/account/api-keys", json={"label": "ci", "role": "admin"})
    # Then 201 with the value once, the environment's prefix, and the key authenticates
    assert response.status_code == 201
    body = response.json()
    value = body["api_key"]
    assert value.startswith("brk_local_")
    assert body["key"]["role"] == "admin" and body["key"]["label"] == "ci"
    assert value not in str(body["key"])
    client.cookies.clear()
    runtime = client.get("/v1/runtime", headers={"Authorization": f"Bearer {value}"}).json()
    assert runtime["provider_simulation"] is True and "routing" in runtime


def test_role_defaults_to_member_and_label_limits(client: TestClient) -> None:
    _, session, _ = _org_with_owner()
    client.cookies.set(SESSION_COOKIE, session)
    assert client.post("/v1/auth/account/api-keys", json={"label": "x"}).json()["key"]["role"] == "member"
    for bad in (
        {"label": ""},
        {"label": "x" * 121},
        {"label": "   "},  # a key listed with a blank name
        {"label": "ci\x00key"},
        {"label": "ok", "role": "root"},
        {},
    ):
        response = client.post("/v1/auth/account/api-keys", json=bad)
        assert response.status_code == 400, bad
        assert response.json()["error"]["code"] == "invalid_request"
    # A label is kept trimmed
    assert client.post("/v1/auth/account/api-keys", json={"label": "  ci  "}).json()["key"]["label"] == "ci"


def test_api_keys_cannot_manage_keys(client: TestClient) -> None:
    # Given an owner API key (no user session)
    _, _, key = _org_with_owner()
    response = client.post(
        "/v1/auth/account/api-keys", json={"label": "x"}, headers={"Authorization": f"Bearer {key}"}
    )
    # Then 403 user_session_required
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "user_session_required"


@pytest.mark.parametrize("role", ["member", "billing"])
def test_roles_without_key_management_get_403(client: TestClient, role: str) -> None:
    _, session, _ = _org_with_owner(role)
    client.cookies.set(SESSION_COOKIE, session)
    response = client.post("/v1/auth/account/api-keys", json={"label": "x"})
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"


def test_missing_or_bad_credentials_get_401(client: TestClient) -> None:
    assert client.post("/v1/auth/account/api-keys", json={"label": "x"}).status_code == 401
    client.cookies.set(SESSION_COOKIE, "not-a-session")
    assert client.post("/v1/auth/account/api-keys", json={"label": "x"}).status_code == 401


def test_revoked_key_gets_401_at_once(client: TestClient) -> None:
    _, session, _ = _org_with_owner()
    client.cookies.set(SESSION_COOKIE, session)
    created = client.post("/v1/auth/account/api-keys", json={"label": "temp"}).json()
    revoke = client.post(f"/v1/auth/account/api-keys/{created['key']['id']}/revoke")
    assert revoke.status_code == 200 and revoke.json() == {"ok": True}
    client.cookies.clear()
    response = client.get("/v1/runtime", headers={"Authorization": f"Bearer {created['api_key']}"})
    assert "routing" not in response.json()  # optional auth: a revoked key counts as anonymous
    strict = client.post(
        "/v1/auth/account/api-keys",
        json={"label": "x"},
        headers={"Authorization": f"Bearer {created['api_key']}"},
    )
    assert strict.status_code == 401 and strict.json()["error"]["code"] == "api_key_revoked"


def test_revoking_another_orgs_key_is_not_found(client: TestClient) -> None:
    _, session_a, _ = _org_with_owner()
    _, session_b, _ = _org_with_owner()
    client.cookies.set(SESSION_COOKIE, session_b)
    foreign = client.post("/v1/auth/account/api-keys", json={"label": "b"}).json()["key"]["id"]
    client.cookies.set(SESSION_COOKIE, session_a)
    response = client.post(f"/v1/auth/account/api-keys/{foreign}/revoke")
    assert response.status_code == 404
    assert client.post("/v1/auth/account/api-keys/key_nope/revoke").status_code == 404


def test_another_environments_key_and_legacy_prefix(client: TestClient) -> None:
    # Given a production-shaped key, and a legacy-prefix key of this environment
    production_key = issue_api_key("production", app_secret()).value
    headers = {"Authorization": f"Bearer {production_key}"}
    response = client.post("/v1/auth/account/api-keys", json={"label": "x"}, headers=headers)
    assert response.status_code == 401 and response.json()["error"]["code"] == "invalid_api_key"
    org_id, _, _ = _org_with_owner()
    legacy = issue_api_key("local", app_secret(), legacy=True)
    identity_store().put_key(_api_key(org_id, legacy, label="old", role="member"))
    assert legacy.value.startswith("br-local-")
    runtime = client.get("/v1/runtime", headers={"Authorization": f"Bearer {legacy.value}"}).json()
    assert "routing" in runtime


def test_no_key_value_is_stored_in_clear(client: TestClient, local_aws: LocalStack) -> None:
    _, session, _ = _org_with_owner()
    client.cookies.set(SESSION_COOKIE, session)
    value = client.post("/v1/auth/account/api-keys", json={"label": "secret"}).json()["api_key"]
    items = boto3.client("dynamodb", region_name=local_aws.region).scan(
        TableName=local_aws.tables["identity"]
    )
    dump = str(items["Items"])
    assert value not in dump and value[10:30] not in dump
    assert session not in dump


def test_the_console_lists_the_orgs_keys_newest_first_without_values(client: TestClient) -> None:
    # Given a signed-in owner with a seeded key, who creates two more and revokes one
    _, session, seeded = _org_with_owner()
    client.cookies.set(SESSION_COOKIE, session)
    first = client.post("/v1/auth/account/api-keys", json={"label": "first"}).json()
    second = client.post("/v1/auth/account/api-keys", json={"label": "second", "role": "admin"}).json()
    client.post(f"/v1/auth/account/api-keys/{first['key']['id']}/revoke")
    # When the keys are listed
    response = client.get("/v1/auth/account/api-keys")
    # Then every key of the org shows, newest first, the revoked one marked, and no value
    assert response.status_code == 200
    rows = response.json()["data"]
    assert [row["label"] for row in rows] == ["second", "first", "seed"]
    assert rows[0]["role"] == "admin" and rows[0]["revoked_at"] is None
    assert rows[1]["revoked_at"] is not None
    assert all(row["prefix"] for row in rows)
    for value in (first["api_key"], second["api_key"], seeded):
        assert value not in response.text
    # And an API key may not list them (a key is not a session)
    client.cookies.clear()
    listed_by_key = client.get("/v1/auth/account/api-keys", headers={"Authorization": f"Bearer {seeded}"})
    assert listed_by_key.status_code == 403
    assert listed_by_key.json()["error"]["code"] == "user_session_required"


# A caller creates and revokes only keys of a role within its own (docs/roles.md, Granting roles).
KEYS = "/v1/auth/account/api-keys"


def _key_ids(client: TestClient, headers: dict[str, str]) -> list[str]:
    return [row["id"] for row in client.get(KEYS, headers=headers).json()["data"]]


@pytest.mark.parametrize(
    ("caller", "grantable"),
    [("owner", ["owner", "admin", "member", "billing"]), ("admin", ["admin", "member"])],
)
def test_the_list_names_the_roles_the_caller_may_create_and_revoke(
    client: TestClient, caller: str, grantable: list[str]
) -> None:
    # The keys page offers only these roles, and Revoke only on keys of these roles
    org = new_org()
    response = client.get(KEYS, headers=org.session_headers(caller))  # type: ignore[arg-type]
    assert response.status_code == 200, response.text
    assert response.json()["grantable_roles"] == grantable
    # And each is what create answers: 201 for a listed role, 403 permission_denied for another
    for role in ROLES:
        created = client.post(KEYS, json={"label": "x", "role": role}, headers=org.session_headers(caller))  # type: ignore[arg-type]
        assert created.status_code == (201 if role in grantable else 403), (role, created.text)


@pytest.mark.parametrize("role", ["owner", "billing"])
def test_an_admin_may_not_create_a_key_of_a_role_with_more_permissions(client: TestClient, role: str) -> None:
    # Given a signed-in admin (admin lacks billing:manage) and the org's keys
    org = new_org()
    admin = org.session_headers("admin")
    before = _key_ids(client, org.session_headers())
    # When the admin asks for an owner or a billing key
    response = client.post(KEYS, json={"label": "escalate", "role": role}, headers=admin)
    # Then 403 permission_denied naming the role asked for and the missing permission
    assert response.status_code == 403, response.text
    error = response.json()["error"]
    assert error["code"] == "permission_denied"
    assert error["details"] == {
        "permission": "billing:manage",
        "role": "admin",
        "target_role": role,
        "missing_permissions": ["billing:manage"],
    }
    assert "api_key" not in response.text
    # And no key was created
    assert _key_ids(client, org.session_headers()) == before


def test_an_admin_key_escalation_cannot_reach_auto_topup(client: TestClient) -> None:
    # The reported path: admin -> owner key -> PUT /v1/billing/auto-topup. The admin has no key to use.
    org = new_org()
    admin = org.session_headers("admin")
    assert client.put("/v1/billing/auto-topup", json={"enabled": False}, headers=admin).status_code == 403
    minted = client.post(KEYS, json={"label": "x", "role": "owner"}, headers=admin)
    assert minted.status_code == 403 and "api_key" not in minted.json()


@pytest.mark.parametrize("role", ["admin", "member"])
def test_an_admin_still_creates_keys_of_roles_within_its_own(client: TestClient, role: str) -> None:
    org = new_org()
    response = client.post(KEYS, json={"label": "ok", "role": role}, headers=org.session_headers("admin"))
    assert response.status_code == 201, response.text
    assert response.json()["key"]["role"] == role
    # And the default role (member) too
    default = client.post(KEYS, json={"label": "ok"}, headers=org.session_headers("admin"))
    assert default.status_code == 201 and default.json()["key"]["role"] == "member"


@pytest.mark.parametrize("role", ROLES)
def test_an_owner_creates_a_key_of_any_role(client: TestClient, role: str) -> None:
    org = new_org()
    response = client.post(KEYS, json={"label": "any", "role": role}, headers=org.session_headers())
    assert response.status_code == 201, response.text
    assert response.json()["key"]["role"] == role


@pytest.mark.parametrize("role", ["owner", "billing"])
def test_an_admin_may_not_revoke_a_key_of_a_role_with_more_permissions(client: TestClient, role: str) -> None:
    # Given an owner-made key of a role beyond the admin's
    org = new_org()
    created = client.post(KEYS, json={"label": "money", "role": role}, headers=org.session_headers()).json()
    # When the admin revokes it
    response = client.post(f"{KEYS}/{created['key']['id']}/revoke", headers=org.session_headers("admin"))
    # Then 403 permission_denied, and the key is not revoked and still works
    assert response.status_code == 403, response.text
    error = response.json()["error"]
    assert error["code"] == "permission_denied"
    assert error["details"]["target_role"] == role and error["details"]["role"] == "admin"
    rows = {row["id"]: row for row in client.get(KEYS, headers=org.session_headers()).json()["data"]}
    assert rows[created["key"]["id"]]["revoked_at"] is None
    account = client.get("/v1/auth/account", headers={"Authorization": f"Bearer {created['api_key']}"})
    assert account.status_code == 200
    # And an unknown key id is still 404 for the admin (the org's keys are looked up first)
    assert client.post(f"{KEYS}/key_nope/revoke", headers=org.session_headers("admin")).status_code == 404


@pytest.mark.parametrize(
    ("caller", "role"), [("admin", "admin"), ("admin", "member"), ("owner", "owner"), ("owner", "billing")]
)
def test_keys_of_roles_within_the_callers_are_revoked(client: TestClient, caller: str, role: str) -> None:
    org = new_org()
    created = client.post(KEYS, json={"label": "temp", "role": role}, headers=org.session_headers()).json()
    response = client.post(f"{KEYS}/{created['key']['id']}/revoke", headers=org.session_headers(caller))  # type: ignore[arg-type]
    assert response.status_code == 200 and response.json() == {"ok": True}
    account = client.get("/v1/auth/account", headers={"Authorization": f"Bearer {created['api_key']}"})
    assert account.status_code == 401


@pytest.fixture
def lagging_index() -> Iterator[None]:
    """gsi1 as DynamoDB may serve it a moment after a write: without the org's keys yet (a
    global secondary index is eventually consistent; moto's is not, so the lag is made here)."""

    def mark(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        values = params.get("ExpressionAttributeValues", {})
        context["behind"] = params.get("IndexName") == "gsi1" and values.get(":prefix") == {"S": "KEY#"}

    def lag(parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        if context.get("behind"):
            parsed.update(Items=[], Count=0, ScannedCount=0)

    events = aws_client("dynamodb").meta.events
    events.register("before-parameter-build.dynamodb.Query", mark)
    events.register("after-call.dynamodb.Query", lag)
    yield
    events.unregister("before-parameter-build.dynamodb.Query", mark)
    events.unregister("after-call.dynamodb.Query", lag)


def test_a_key_is_listed_and_revoked_the_moment_it_is_created(
    client: TestClient, lagging_index: None
) -> None:
    # Given a signed-in owner who has just created a key, before gsi1 lists it
    _, session, _ = _org_with_owner()
    client.cookies.set(SESSION_COOKIE, session)
    created = client.post("/v1/auth/account/api-keys", json={"label": "rotate"}).json()
    key_id = created["key"]["id"]
    # When the owner lists the keys and revokes the new one at once
    listed = client.get("/v1/auth/account/api-keys").json()["data"]
    revoke = client.post(f"/v1/auth/account/api-keys/{key_id}/revoke")
    # Then the key is listed (with the seed key), the revoke is done, and the list shows it revoked
    assert listed[0]["id"] == key_id and len(listed) == 2
    assert revoke.status_code == 200
    after = {k["id"]: k for k in client.get("/v1/auth/account/api-keys").json()["data"]}
    assert after[key_id]["revoked_at"] is not None
    client.cookies.clear()
    headers = {"Authorization": f"Bearer {created['api_key']}"}
    strict = client.post("/v1/auth/account/api-keys", json={"label": "x"}, headers=headers)
    assert strict.status_code == 401 and strict.json()["error"]["code"] == "api_key_revoked"


def test_a_key_from_before_the_orgs_copies_is_listed_and_revoked(client: TestClient) -> None:
    # Given a key written as keys were before their org's copy existed (its hash item alone)
    org_id, session, _ = _org_with_owner()
    store = identity_store()
    old = issue_api_key("local", app_secret())
    key = _api_key(org_id, old, label="old", role="member")
    store.dynamodb.transact_write_items(TransactItems=store.key_items(key)[:1])
    client.cookies.set(SESSION_COOKIE, session)
    # When the owner lists the keys and revokes it
    listed = {k["id"] for k in client.get("/v1/auth/account/api-keys").json()["data"]}
    revoke = client.post(f"/v1/auth/account/api-keys/{key.key_id}/revoke")
    # Then it is listed, revoked, and listed revoked (its copy written by the revoke)
    assert key.key_id in listed and revoke.status_code == 200
    after = {k["id"]: k for k in client.get("/v1/auth/account/api-keys").json()["data"]}
    assert after[key.key_id]["revoked_at"] is not None
    stored = store.key_by_hash(old.key_hash)
    assert stored is not None and stored.revoked_at is not None
    assert store.key_of(org_id, key.key_id) == stored  # its copy, now written
