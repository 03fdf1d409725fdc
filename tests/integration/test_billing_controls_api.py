"""Billing controls over HTTP on moto: defaults, session-only partial updates with audit,
the audit listing, role checks and every 400."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.dynamo.controls import ControlsStore
from batchroute.clock import FixedClock
from batchroute.config import get_settings
from batchroute.domain.accounts.audit import AuditEntry
from batchroute.domain.billing.controls import BillingControls, ConcurrentUpdate
from batchroute.ids import new_id
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from functions.api.deps import get_clock
from tests.integration.dynamo_cuts import QueriesCutShort
from tests.integration.principals import TestOrg, new_org

START = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)
LIMIT_BODY = {"limit_enabled": True, "limit_period": "monthly", "limit_amount": 250}


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(START)


@pytest.fixture
def client(local_aws: LocalStack, clock: FixedClock) -> TestClient:
    identity_store.cache_clear()
    app = create_app()
    app.dependency_overrides[get_clock] = lambda: clock
    return TestClient(app, raise_server_exceptions=False)


@pytest.fixture
def org(local_aws: LocalStack) -> TestOrg:
    identity_store.cache_clear()
    return new_org()


def put(client: TestClient, org: TestOrg, body: Any, role: str = "billing") -> Any:
    return client.put("/v1/billing/controls", json=body, headers=org.session_headers(role))  # type: ignore[arg-type]


def error_of(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    return error


# -- reading -----------------------------------------------------------------------------
@pytest.mark.parametrize("role", ["owner", "admin", "billing"])
def test_unconfigured_controls_read_as_defaults(client: TestClient, org: TestOrg, role: str) -> None:
    # Given a fresh org / When a key with billing:read reads the controls
    response = client.get("/v1/billing/controls", headers=org.key_headers(role))  # type: ignore[arg-type]
    # Then 200 with the defaults, configured=false
    assert response.status_code == 200
    assert response.json() == {
        "controls": {
            "org_id": org.org_id,
            "configured": False,
            "limit_enabled": False,
            "limit_period": None,
            "limit_amount": None,
            "limit_mode": "soft",
            "limit_timezone": "UTC",
            "low_balance_amount": None,
            "alert_thresholds": [],
            "alert_email_enabled": True,
            "alert_webhook_enabled": False,
            "created_at": None,
            "updated_at": None,
        }
    }


def test_a_member_may_not_read_billing_controls(client: TestClient, org: TestOrg) -> None:
    headers = org.key_headers("member")
    assert error_of(client.get("/v1/billing/controls", headers=headers), 403)["code"] == "permission_denied"
    assert (
        error_of(client.get("/v1/billing/controls/audit", headers=headers), 403)["code"]
        == "permission_denied"
    )


def test_anonymous_callers_get_401(client: TestClient) -> None:
    for method, path in [
        ("GET", "/v1/billing/controls"),
        ("PUT", "/v1/billing/controls"),
        ("GET", "/v1/billing/controls/audit"),
    ]:
        assert client.request(method, path, json={}).status_code == 401


# -- updating ----------------------------------------------------------------------------
def test_an_api_key_may_not_update_even_as_owner(client: TestClient, org: TestOrg) -> None:
    response = client.put("/v1/billing/controls", json=LIMIT_BODY, headers=org.key_headers("owner"))
    assert error_of(response, 403)["code"] == "user_session_required"


@pytest.mark.parametrize("role", ["member", "admin"])
def test_sessions_without_billing_manage_may_not_update(client: TestClient, org: TestOrg, role: str) -> None:
    assert error_of(put(client, org, LIMIT_BODY, role), 403)["code"] == "permission_denied"


@pytest.mark.parametrize("role", ["billing", "owner"])
def test_a_billing_session_sets_a_limit_and_reads_it_back(
    client: TestClient, org: TestOrg, clock: FixedClock, role: str
) -> None:
    # When a billing user sets a monthly limit with thresholds
    body = {
        **LIMIT_BODY,
        "limit_timezone": "Europe/Berlin",
        "low_balance_amount": "5.5",
        "alert_thresholds": [{"type": "pct_of_limit", "value": 80}, {"type": "spend_above", "value": 100}],
        "alert_webhook_enabled": True,
    }
    response = put(client, org, body, role)
    # Then 200 with the full controls, money as Money objects
    assert response.status_code == 200, response.text
    controls = response.json()["controls"]
    assert controls["configured"] is True
    assert controls["limit_amount"] == {"currency": "usd", "amount": "250.00"}
    assert controls["low_balance_amount"] == {"currency": "usd", "amount": "5.50"}
    assert controls["limit_mode"] == "soft"  # new limits start soft
    assert controls["alert_thresholds"] == [
        {"type": "pct_of_limit", "value": 80},
        {"type": "spend_above", "value": {"currency": "usd", "amount": "100.00"}},
    ]
    assert controls["created_at"] == controls["updated_at"] == "2026-03-01T09:30:00.000Z"
    # And a key reads the same
    read = client.get("/v1/billing/controls", headers=org.key_headers("billing")).json()
    assert read == {"controls": controls}


def test_only_given_fields_change_and_null_clears(
    client: TestClient, org: TestOrg, clock: FixedClock
) -> None:
    put(client, org, {**LIMIT_BODY, "low_balance_amount": 10, "alert_email_enabled": False})
    clock.advance(hours=1)
    # When only the low-balance level is cleared
    controls = put(client, org, {"low_balance_amount": None}).json()["controls"]
    # Then everything else is as saved
    assert controls["low_balance_amount"] is None
    assert controls["limit_amount"] == {"currency": "usd", "amount": "250.00"}
    assert controls["alert_email_enabled"] is False
    assert controls["created_at"] == "2026-03-01T09:30:00.000Z"
    assert controls["updated_at"] == "2026-03-01T10:30:00.000Z"


def test_limit_enabled_false_removes_the_limit(client: TestClient, org: TestOrg) -> None:
    put(client, org, {**LIMIT_BODY, "limit_mode": "hard"})
    controls = put(client, org, {"limit_enabled": False}).json()["controls"]
    assert (controls["limit_enabled"], controls["limit_period"], controls["limit_amount"]) == (
        False,
        None,
        None,
    )


def test_what_get_returns_can_be_put_back_unchanged(client: TestClient, org: TestOrg) -> None:
    # Given saved controls / When a client PUTs back exactly what it read
    saved = put(
        client, org, {**LIMIT_BODY, "alert_thresholds": [{"type": "balance_below", "value": 3}]}
    ).json()
    response = put(client, org, saved["controls"])
    # Then 200, nothing changed, and no second audit entry
    assert response.status_code == 200 and response.json() == saved
    audit = client.get("/v1/billing/controls/audit", headers=org.key_headers("owner")).json()["data"]
    assert len(audit) == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"limit_enabled": True}, "limit_period"),
        ({"limit_enabled": True, "limit_period": "daily"}, "limit_amount"),
        ({"spend_cap": 5}, "spend_cap"),
        ({"limit_period": "weekly"}, "limit_period"),
        ({"limit_mode": "strict"}, "limit_mode"),
        ({"limit_timezone": "Mars/Olympus_Mons"}, "limit_timezone"),
        ({"limit_amount": -1}, "limit_amount"),
        ({"limit_amount": "12.3456789"}, "limit_amount"),
        ({"limit_amount": "ten"}, "limit_amount"),
        ({"limit_amount": "1e3"}, "limit_amount"),
        ({"low_balance_amount": 2e9}, "low_balance_amount"),
        ({"alert_email_enabled": "false"}, "alert_email_enabled"),
        ({"alert_thresholds": [{"type": "pct_of_limit", "value": 120}]}, "alert_thresholds[0].value"),
        ({"alert_thresholds": [{"type": "pct_of_limit", "value": 1}] * 21}, "alert_thresholds"),
        ({"alert_thresholds": [{"type": "sometimes", "value": 1}]}, "alert_thresholds[0].type"),
    ],
)
def test_invalid_updates_are_400_naming_the_field(
    client: TestClient, org: TestOrg, body: dict[str, Any], field: str
) -> None:
    error = error_of(put(client, org, body), 400)
    assert error["code"] == "invalid_controls"
    assert error["details"]["field"] == field
    # And nothing was saved
    assert (
        client.get("/v1/billing/controls", headers=org.key_headers()).json()["controls"]["configured"]
        is False
    )


def test_bodies_that_are_not_objects_are_400(client: TestClient, org: TestOrg) -> None:
    headers = {**org.session_headers("billing"), "content-type": "application/json"}
    assert (
        error_of(client.put("/v1/billing/controls", content=b"[1]", headers=headers), 400)["code"]
        == "invalid_request"
    )
    assert (
        error_of(client.put("/v1/billing/controls", content=b"{nope", headers=headers), 400)["code"]
        == "invalid_json"
    )


# -- audit -------------------------------------------------------------------------------
def test_every_save_is_audited_newest_first(client: TestClient, org: TestOrg, clock: FixedClock) -> None:
    # Given three saves a minute apart
    put(client, org, LIMIT_BODY)
    clock.advance(minutes=1)
    put(client, org, {"limit_amount": 300})
    clock.advance(minutes=1)
    put(client, org, {"limit_mode": "hard"})
    # When the audit is read
    response = client.get("/v1/billing/controls/audit", headers=org.key_headers("billing"))
    # Then newest first, each holding only its changed fields and who made it from where
    assert response.status_code == 200
    entries = response.json()["data"]
    assert [e["after"] for e in entries] == [
        {"limit_mode": "hard"},
        {"limit_amount": {"currency": "usd", "amount": "300.00"}},
        {
            "limit_enabled": True,
            "limit_period": "monthly",
            "limit_amount": {"currency": "usd", "amount": "250.00"},
        },
    ]
    newest = entries[0]
    assert newest["before"] == {"limit_mode": "soft"}
    assert newest["id"].startswith("aud_") and newest["org_id"] == org.org_id
    assert newest["action"] == "billing_controls.update"
    assert newest["actor_role"] == "billing" and newest["actor_user_id"].startswith("user_")
    assert newest["ip_address"] == "testclient"  # TestClient's client address
    assert newest["created_at"] == "2026-03-01T09:32:00.000Z"
    assert response.json()["next_cursor"] is None
    # And limit trims from the newest, the page's cursor reading on to the oldest
    two = client.get("/v1/billing/controls/audit?limit=2", headers=org.key_headers()).json()
    assert two["data"] == entries[:2] and two["next_cursor"] == entries[1]["id"]
    rest = client.get(
        "/v1/billing/controls/audit",
        params={"limit": 2, "cursor": two["next_cursor"]},
        headers=org.key_headers(),
    ).json()
    assert rest == {"data": entries[2:], "next_cursor": None}
    # And a cursor of another listing is refused
    wrong = client.get("/v1/billing/controls/audit?cursor=batch_1", headers=org.key_headers())
    assert error_of(wrong, 400)["code"] == "invalid_cursor"


@pytest.mark.parametrize("limit", ["0", "201", "-1", "ten"])
def test_audit_limit_out_of_range_is_400(client: TestClient, org: TestOrg, limit: str) -> None:
    response = client.get(f"/v1/billing/controls/audit?limit={limit}", headers=org.key_headers())
    assert error_of(response, 400)["code"] == "invalid_request"


def test_audit_limit_defaults_to_50_and_allows_200(client: TestClient, org: TestOrg) -> None:
    store = ControlsStore(get_settings().table_name("controls"))
    for i in range(55):
        store.save_billing_controls(
            BillingControls(org_id=org.org_id, configured=True, version=i + 1),
            expected_version=i,
            audit=_entry(org.org_id, i),
        )
    assert len(client.get("/v1/billing/controls/audit", headers=org.key_headers()).json()["data"]) == 50
    assert (
        len(client.get("/v1/billing/controls/audit?limit=200", headers=org.key_headers()).json()["data"])
        == 55
    )


def test_orgs_see_only_their_own_controls_and_audit(client: TestClient, org: TestOrg) -> None:
    put(client, org, LIMIT_BODY)
    other = new_org()
    assert (
        client.get("/v1/billing/controls", headers=other.key_headers()).json()["controls"]["configured"]
        is False
    )
    audit = client.get("/v1/billing/controls/audit", headers=other.key_headers()).json()
    assert audit == {"data": [], "next_cursor": None}


# -- the store ---------------------------------------------------------------------------
def test_a_stale_save_writes_neither_controls_nor_audit(local_aws: LocalStack) -> None:
    # Given controls saved at version 1
    store = ControlsStore(get_settings().table_name("controls"))
    store.save_billing_controls(
        BillingControls(org_id="org_x", configured=True, version=1),
        expected_version=0,
        audit=_entry("org_x", 1),
    )
    # When a writer that read version 0 saves / Then 409 and no audit entry for it
    with pytest.raises(ConcurrentUpdate):
        store.save_billing_controls(
            BillingControls(org_id="org_x", configured=True, limit_mode="hard", version=1),
            expected_version=0,
            audit=_entry("org_x", 2),
        )
    assert len(store.audit_entries("org_x", limit=10)) == 1
    stored = store.billing_controls("org_x")
    assert stored is not None and stored.limit_mode == "soft" and stored.version == 1


def _entry(org_id: str, i: int) -> AuditEntry:
    at = datetime(2026, 1, 1, tzinfo=UTC).replace(minute=i % 60, hour=i // 60)
    return AuditEntry(
        id=new_id("aud", at=at),
        org_id=org_id,
        actor_user_id=None,
        actor_role=None,
        action="billing_controls.update",
        before={},
        after={"n": i},
        ip_address=None,
        created_at=at.isoformat(),
    )


def test_the_audit_reads_on_past_a_query_dynamodb_cut_short(
    client: TestClient, org: TestOrg, clock: FixedClock
) -> None:
    # Given four saves, and queries DynamoDB stops after two items (its 1 MB read, large entries)
    for amount in (100, 200, 300, 400):
        put(client, org, {**LIMIT_BODY, "limit_amount": amount})
        clock.advance(minutes=1)
    store = ControlsStore(get_settings().table_name("controls"))
    cut = ControlsStore(store.table_name, dynamodb=QueriesCutShort(store.dynamodb))
    # When three are asked for / Then three come back, newest first, read on past the cut
    amounts = [e.after.get("limit_amount") for e in cut.audit_entries(org.org_id, limit=3)]
    assert amounts == [{"currency": "usd", "amount": f"{n}.00"} for n in (400, 300, 200)]
