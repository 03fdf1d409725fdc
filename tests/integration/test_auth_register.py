"""Registration and agent registration over HTTP, on moto."""

from __future__ import annotations

import pytest

from batchroute.config import Settings
from batchroute_tools.local.provision import LocalStack
from tests.integration.accounts_harness import PASSWORD, Harness, make_harness


@pytest.fixture
def harness(local_aws: LocalStack) -> Harness:
    return make_harness()


def test_register_creates_the_account_and_mails_a_verification_link(harness: Harness) -> None:
    # When someone registers
    response = harness.client.post(
        "/v1/auth/register",
        json={"email": " Ann.Lee@Example.com ", "password": PASSWORD, "full_name": "Ann Lee"},
    )
    # Then 200 with the new ids, the normalized address, and verification required
    assert response.status_code == 200
    body = response.json()
    assert body["org_id"].startswith("org_") and body["user_id"].startswith("user_")
    assert body["email"] == "ann.lee@example.com"
    assert body["email_verification_required"] is True and body["verification_email_sent"] is True
    assert PASSWORD not in response.text
    # And a verification link was mailed
    assert harness.link_to("ann.lee@example.com", "/v1/auth/verify-email?token=").startswith(
        "http://127.0.0.1:8000/v1/auth/verify-email?token="
    )
    # And the owner can sign in (unverified) and sees the org with its signup credit
    account = harness.login("ann.lee@example.com").get("/v1/auth/account").json()
    assert account["org"] == {
        "id": body["org_id"],
        "display_name": "ann.lee",
        "plan": "prepaid",
        "created_at": account["org"]["created_at"],
    }
    assert account["credit_balance"] == {"currency": "usd", "amount": "25.00"}
    [owner] = account["members"]
    assert owner["role"] == "owner" and owner["full_name"] == "Ann Lee" and owner["email_verified"] is False


def test_register_takes_a_display_name_for_the_org(harness: Harness) -> None:
    harness.register("ann@example.com", display_name="Acme Research")
    account = harness.login("ann@example.com").get("/v1/auth/account").json()
    assert account["org"]["display_name"] == "Acme Research"


# Each case in one test: the moto stack costs more to set up than the request to check.
BAD_REGISTRATIONS: list[tuple[dict[str, str], str, str | None]] = [
    ({"email": "not-an-email", "password": PASSWORD}, "invalid_email", None),
    ({"email": "ann@example", "password": PASSWORD}, "invalid_email", None),
    ({"email": "ann@example.com", "password": "seven77"}, "invalid_request", "body.password"),
    ({"email": "ann@example.com", "password": "x" * 257}, "invalid_request", "body.password"),
    ({"email": "ann@example.com"}, "invalid_request", "body.password"),
    ({"password": PASSWORD}, "invalid_request", "body.email"),
    ({"email": "ann@example.com", "password": PASSWORD, "display_name": ""}, "invalid_request", None),
    ({"email": "ann@example.com", "password": PASSWORD, "full_name": "x" * 257}, "invalid_request", None),
]


def test_register_refuses_bad_input_with_400(harness: Harness) -> None:
    for body, code, path in BAD_REGISTRATIONS:
        response = harness.client.post("/v1/auth/register", json=body)
        assert response.status_code == 400, body
        error = response.json()["error"]
        assert error["code"] == code, body
        if path:
            assert path in [issue["path"] for issue in error["details"]["errors"]], body
        assert PASSWORD not in response.text and "seven77" not in response.text
    assert harness.outbox.messages == []


def test_a_taken_address_is_409_in_any_spelling(harness: Harness) -> None:
    harness.register("ann@example.com")
    for spelling in ["ann@example.com", "ANN@Example.COM", "  ann@example.com\t"]:
        response = harness.client.post(
            "/v1/auth/register", json={"email": spelling, "password": "other-pass"}
        )
        assert response.status_code == 409, spelling
        assert response.json()["error"]["code"] == "email_taken"


def test_agent_registration_returns_a_key_that_works_at_once(harness: Harness) -> None:
    # When an agent registers
    body = harness.agent("bot@example.com")
    # Then it gets its org, an owner key shown once, and its credit
    assert body["org_id"].startswith("org_") and body["key_id"].startswith("key_")
    assert body["api_key"].startswith("brk_local_")
    assert body["credit_balance"] == {"currency": "usd", "amount": "25.00"}
    assert body["email_verification_required"] is True
    # And the key authenticates immediately
    account = harness.fresh_client().get(
        "/v1/auth/account", headers={"Authorization": f"Bearer {body['api_key']}"}
    )
    assert account.status_code == 200
    assert account.json()["credit_balance"] == {"currency": "usd", "amount": "25.00"}
    assert account.json()["org"]["id"] == body["org_id"]
    # And it belongs to the user it registered (the account shows that user)
    assert account.json()["user"]["user_id"] == body["user_id"]
    # And a verification email went out too
    assert harness.link_to("bot@example.com", "verify-email?token=")


def test_agent_registration_refuses_taken_addresses_and_short_passwords(harness: Harness) -> None:
    harness.register("ann@example.com")
    taken = harness.client.post(
        "/v1/auth/agent-register", json={"email": "Ann@example.com", "password": PASSWORD}
    )
    assert taken.status_code == 409 and taken.json()["error"]["code"] == "email_taken"
    short = harness.client.post(
        "/v1/auth/agent-register", json={"email": "bot@example.com", "password": "short"}
    )
    assert short.status_code == 400 and "api_key" not in short.text


def test_registration_is_throttled_per_client_ip(local_aws: LocalStack) -> None:
    # Given a registration limit of two per hour
    harness = make_harness(Settings(rate_limit_register_per_ip=2))
    harness.register("one@example.com")
    harness.agent("two@example.com")
    # When a third account is attempted from the same address / Then 429 with Retry-After
    body = {"email": "three@example.com", "password": PASSWORD}
    third = harness.client.post("/v1/auth/register", json=body)
    assert third.status_code == 429 and int(third.headers["retry-after"]) > 0
    assert third.json()["error"]["code"] == "rate_limited"
    assert harness.outbox.to("three@example.com") == []
