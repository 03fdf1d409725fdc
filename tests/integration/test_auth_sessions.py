"""Sign-in, the session cookie, and GET/DELETE /v1/sessions/current, on moto."""

from __future__ import annotations

import pytest

from batchroute.config import Settings
from batchroute.services.accounts.authentication import SESSION_COOKIE
from batchroute_tools.local.provision import LocalStack
from tests.integration.accounts_harness import PASSWORD, Harness, make_harness


@pytest.fixture
def harness(local_aws: LocalStack) -> Harness:
    return make_harness()


def _cookie_attributes(set_cookie: str) -> dict[str, str]:
    parts = [p.strip() for p in set_cookie.split(";")]
    attributes = {p.split("=", 1)[0].lower(): (p.split("=", 1)[1] if "=" in p else "") for p in parts[1:]}
    attributes["name"] = parts[0].split("=", 1)[0]
    return attributes


def test_login_sets_an_httponly_lax_cookie_for_14_days(harness: Harness) -> None:
    # Given an account whose address is not verified yet
    created = harness.register("ann@example.com")
    # When the user signs in
    response = harness.client.post("/v1/auth/login", json={"email": "ANN@example.com", "password": PASSWORD})
    # Then 200 with the session and the user, and the cookie's attributes
    assert response.status_code == 200
    body = response.json()
    assert body["session"]["user_id"] == created["user_id"] and body["session"]["org_id"] == created["org_id"]
    assert body["session"]["id"].startswith("sess_") and body["session"]["role"] == "owner"
    assert body["user"]["email"] == "ann@example.com" and body["user"]["email_verified"] is False
    assert response.headers["cache-control"] == "no-store"
    cookie = _cookie_attributes(response.headers["set-cookie"])
    assert cookie["name"] == SESSION_COOKIE
    assert "httponly" in cookie and cookie["samesite"].lower() == "lax"
    assert cookie["path"] == "/" and cookie["max-age"] == str(14 * 24 * 3600)
    assert "secure" not in cookie  # local mode serves plain http
    assert response.cookies[SESSION_COOKIE] not in response.text


def test_the_cookie_is_secure_outside_local_mode(local_aws: LocalStack) -> None:
    # Given a test-environment app on the same (local) tables
    harness = make_harness(Settings(environment="test", resource_prefix=local_aws.prefix))
    harness.register("ann@example.com")
    response = harness.client.post("/v1/auth/login", json={"email": "ann@example.com", "password": PASSWORD})
    assert "secure" in _cookie_attributes(response.headers["set-cookie"])


def test_unknown_address_and_wrong_password_get_the_same_401(harness: Harness) -> None:
    harness.register("ann@example.com")
    unknown = harness.client.post(
        "/v1/auth/login", json={"email": "nobody@example.com", "password": PASSWORD}
    )
    wrong = harness.client.post(
        "/v1/auth/login", json={"email": "ann@example.com", "password": "wrong-password"}
    )
    assert unknown.status_code == wrong.status_code == 401
    assert unknown.json() == wrong.json()
    assert unknown.json()["error"]["code"] == "invalid_credentials"
    assert "set-cookie" not in unknown.headers and "set-cookie" not in wrong.headers


def test_login_body_is_validated(harness: Harness) -> None:
    response = harness.client.post("/v1/auth/login", json={"email": "ann@example.com"})
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_request"


def test_current_session_is_null_for_anonymous_forged_and_key_only_callers(harness: Harness) -> None:
    agent = harness.agent("bot@example.com")
    anonymous = harness.fresh_client().get("/v1/sessions/current")
    assert anonymous.status_code == 200 and anonymous.json() == {"session": None}
    forged = harness.fresh_client()
    forged.cookies.set(SESSION_COOKIE, "forged-value")
    assert forged.get("/v1/sessions/current").json() == {"session": None}
    key_only = harness.fresh_client().get(
        "/v1/sessions/current", headers={"Authorization": f"Bearer {agent['api_key']}"}
    )
    assert key_only.status_code == 200 and key_only.json() == {"session": None}


def test_current_session_describes_the_cookie_session(harness: Harness) -> None:
    created = harness.register("ann@example.com")
    browser = harness.login("ann@example.com")
    session = browser.get("/v1/sessions/current").json()["session"]
    assert session["user_id"] == created["user_id"] and session["org_id"] == created["org_id"]
    assert session["email"] == "ann@example.com" and session["role"] == "owner"
    assert session["email_verified"] is False
    assert set(session) == {
        "id",
        "user_id",
        "org_id",
        "role",
        "email",
        "email_verified",
        "created_at",
        "expires_at",
    }


def test_a_session_ends_after_14_days(harness: Harness) -> None:
    harness.register("ann@example.com")
    browser = harness.login("ann@example.com")
    harness.clock.advance(days=14, seconds=1)
    assert browser.get("/v1/sessions/current").json() == {"session": None}


def test_sign_out_revokes_only_that_session(harness: Harness) -> None:
    # Given an agent account with a key, signed in from two browsers
    agent = harness.agent("bot@example.com")
    first, second = harness.login("bot@example.com"), harness.login("bot@example.com")
    # When the first signs out
    response = first.delete("/v1/sessions/current")
    # Then 200 {ok}, the cookie is cleared, and that session is gone
    assert response.status_code == 200 and response.json() == {"ok": True}
    cleared = _cookie_attributes(response.headers["set-cookie"])
    assert cleared["name"] == SESSION_COOKIE and cleared["max-age"] == "0"
    assert first.get("/v1/sessions/current").json() == {"session": None}
    # And the second session and the API key keep working
    assert second.get("/v1/auth/account").status_code == 200
    key = {"Authorization": f"Bearer {agent['api_key']}"}
    assert harness.fresh_client().get("/v1/auth/account", headers=key).status_code == 200


def test_sign_out_without_a_live_session_is_401(harness: Harness) -> None:
    agent = harness.agent("bot@example.com")
    assert harness.fresh_client().delete("/v1/sessions/current").status_code == 401
    with_key = harness.fresh_client().delete(
        "/v1/sessions/current", headers={"Authorization": f"Bearer {agent['api_key']}"}
    )
    assert with_key.status_code == 401
    browser = harness.login("bot@example.com")
    stale = browser.cookies[SESSION_COOKIE]
    assert browser.delete("/v1/sessions/current").status_code == 200
    again = harness.fresh_client()
    again.cookies.set(SESSION_COOKIE, stale)
    assert again.delete("/v1/sessions/current").status_code == 401
    assert again.get("/v1/auth/account").status_code == 401
