"""GET /v1/auth/account, the profile and the org's delivery webhook, on moto."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from batchroute.adapters.aws import client
from batchroute.adapters.kms import KmsSealer
from batchroute.config import get_settings
from batchroute.domain.network import check_public_https_url
from batchroute.services.accounts.settings import webhook_secret_context
from batchroute_tools.local.provision import LocalStack
from functions.api.account_services import get_webhook_url_check
from functions.api.auth import identity_store
from tests.integration.accounts_harness import Harness, add_member, cookie_jar, make_harness

SECRET = "whsec-0123456789"


@pytest.fixture
def harness(local_aws: LocalStack) -> Harness:
    return make_harness()


@pytest.fixture
def owner(harness: Harness) -> dict[str, Any]:
    """An agent-registered org: its ids, its owner key's header, a signed-in owner browser."""
    body = harness.agent("owner@example.com")
    body["key"] = {"Authorization": f"Bearer {body['api_key']}"}
    body["browser"] = harness.login("owner@example.com")
    return body


def _member_browser(harness: Harness, org_id: str, role: str) -> Any:
    _, token = add_member(org_id, role, harness.clock.now())
    return cookie_jar(harness.fresh_client(), token)


# -- account -----------------------------------------------------------------------------
def test_the_account_shows_org_plan_balance_and_members(harness: Harness, owner: dict[str, Any]) -> None:
    member = _member_browser(harness, owner["org_id"], "member")
    body = member.get("/v1/auth/account").json()
    assert body["org"]["id"] == owner["org_id"] and body["org"]["display_name"] == "owner"
    assert body["plan"] == "prepaid" and body["credit_balance"] == {"currency": "usd", "amount": "25.00"}
    assert {m["role"] for m in body["members"]} == {"owner", "member"}
    assert body["user"]["role"] == "member" and body["delivery_webhook"] is None
    assert "password" not in str(body)


def test_the_account_needs_credentials(harness: Harness) -> None:
    response = harness.fresh_client().get("/v1/auth/account")
    assert response.status_code == 401 and "error" in response.json()
    bad_key = harness.fresh_client().get(
        "/v1/auth/account", headers={"Authorization": "Bearer brk_local_nope"}
    )
    assert bad_key.status_code == 401


# -- profile -----------------------------------------------------------------------------
def test_the_owner_edits_the_org_name_and_their_own_name(harness: Harness, owner: dict[str, Any]) -> None:
    response = owner["browser"].put(
        "/v1/auth/account/profile", json={"display_name": "Acme Research", "full_name": "Olive Owner"}
    )
    assert response.status_code == 200
    body = response.json()
    assert body["org"]["display_name"] == "Acme Research" and body["user"]["full_name"] == "Olive Owner"
    # An empty body changes nothing and answers the account
    assert (
        owner["browser"].put("/v1/auth/account/profile", json={}).json()["org"]["display_name"]
        == "Acme Research"
    )


def test_a_member_may_set_only_their_own_name(harness: Harness, owner: dict[str, Any]) -> None:
    member = _member_browser(harness, owner["org_id"], "member")
    refused = member.put("/v1/auth/account/profile", json={"display_name": "Taken Over"})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "permission_denied"
    allowed = member.put("/v1/auth/account/profile", json={"full_name": "Mo Member"})
    assert allowed.status_code == 200 and allowed.json()["user"]["full_name"] == "Mo Member"
    assert allowed.json()["org"]["display_name"] == "owner"


def test_an_api_key_renames_the_org_but_has_no_full_name(harness: Harness, owner: dict[str, Any]) -> None:
    api = harness.fresh_client()
    renamed = api.put("/v1/auth/account/profile", json={"display_name": "Bots Inc"}, headers=owner["key"])
    assert renamed.status_code == 200 and renamed.json()["org"]["display_name"] == "Bots Inc"
    refused = api.put("/v1/auth/account/profile", json={"full_name": "Robot"}, headers=owner["key"])
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "user_session_required"


def test_profile_input_is_validated(harness: Harness, owner: dict[str, Any]) -> None:
    bad = [
        {"display_name": ""},
        {"display_name": "x" * 129},
        {"full_name": "x" * 257},
        {"email": "n@example.com"},
    ]
    for body in bad:
        response = owner["browser"].put("/v1/auth/account/profile", json=body)
        assert response.status_code == 400, body
        assert response.json()["error"]["code"] == "invalid_request", body


def test_profile_needs_credentials(harness: Harness) -> None:
    assert (
        harness.fresh_client().put("/v1/auth/account/profile", json={"display_name": "x"}).status_code == 401
    )


# -- delivery webhook --------------------------------------------------------------------
def test_the_webhook_is_stored_sealed_and_its_secret_never_returned(
    harness: Harness, owner: dict[str, Any]
) -> None:
    # When the owner sets a public HTTPS webhook
    response = owner["browser"].put(
        "/v1/auth/account/delivery-webhook", json={"url": "https://8.8.8.8/hooks/batch", "secret": SECRET}
    )
    # Then 200 with the url and no secret
    assert response.status_code == 200
    body = response.json()
    assert body["url"] == "https://8.8.8.8/hooks/batch" and body["configured"] is True and body["updated_at"]
    assert SECRET not in response.text
    # And the account shows the same, still without the secret
    account = owner["browser"].get("/v1/auth/account")
    assert account.json()["delivery_webhook"] == body and SECRET not in account.text
    # And what is stored is a KMS ciphertext bound to the org, never the secret
    org = identity_store().get_org(owner["org_id"])
    assert org is not None and org.delivery_webhook is not None
    assert SECRET not in str(org.delivery_webhook)
    sealed = org.delivery_webhook["secret_ciphertext"]
    sealer = KmsSealer(get_settings().kms_key_id)
    assert sealer.unseal(sealed, context=webhook_secret_context(owner["org_id"])) == SECRET
    with pytest.raises(client("kms").exceptions.InvalidCiphertextException):
        sealer.unseal(sealed, context=webhook_secret_context("org_someone_else"))


def test_an_owner_key_may_set_it_but_a_member_may_not(harness: Harness, owner: dict[str, Any]) -> None:
    ok = harness.fresh_client().put(
        "/v1/auth/account/delivery-webhook",
        json={"url": "https://8.8.4.4/h", "secret": SECRET},
        headers=owner["key"],
    )
    assert ok.status_code == 200
    member = _member_browser(harness, owner["org_id"], "member")
    refused = member.put(
        "/v1/auth/account/delivery-webhook", json={"url": "https://8.8.4.4/h", "secret": SECRET}
    )
    assert refused.status_code == 403
    anonymous = harness.fresh_client().put(
        "/v1/auth/account/delivery-webhook", json={"url": "https://8.8.4.4/h", "secret": SECRET}
    )
    assert anonymous.status_code == 401


UNSAFE_URLS = [
    ("http://8.8.8.8/hook", "https_required"),
    ("ftp://8.8.8.8/hook", "https_required"),
    ("https://127.0.0.1/hook", "unsafe_url"),
    ("https://localhost/hook", "unsafe_url"),
    ("https://[::1]/hook", "unsafe_url"),
    ("https://10.0.0.7/hook", "unsafe_url"),
    ("https://192.168.1.1/hook", "unsafe_url"),
    ("https://169.254.169.254/latest/meta-data", "unsafe_url"),
    ("https://user:pw@8.8.8.8/hook", "unsafe_url"),
]


def test_unsafe_webhook_urls_are_refused(harness: Harness, owner: dict[str, Any]) -> None:
    for url, code in UNSAFE_URLS:
        response = owner["browser"].put(
            "/v1/auth/account/delivery-webhook", json={"url": url, "secret": SECRET}
        )
        assert response.status_code == 400, url
        assert response.json()["error"]["code"] == code, url
        assert SECRET not in response.text
    assert owner["browser"].get("/v1/auth/account").json()["delivery_webhook"] is None


def test_host_names_are_checked_by_what_they_resolve_to(harness: Harness, owner: dict[str, Any]) -> None:
    # Given a resolver that maps one name to a public and one to a private address
    answers = {"hooks.example.com": ["93.184.215.14"], "internal.example.com": ["10.1.2.3"]}
    check = partial(check_public_https_url, allow_loopback=False, resolve=lambda host, port: answers[host])
    harness.client.app.dependency_overrides[get_webhook_url_check] = lambda: check  # type: ignore[attr-defined]
    put = partial(owner["browser"].put, "/v1/auth/account/delivery-webhook")
    assert put(json={"url": "https://hooks.example.com/h", "secret": SECRET}).status_code == 200
    refused = put(json={"url": "https://internal.example.com/h", "secret": SECRET})
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "unsafe_url"


def test_webhook_body_is_validated(harness: Harness, owner: dict[str, Any]) -> None:
    bad = [
        {"url": "https://8.8.8.8/h", "secret": "short"},
        {"url": "https://8.8.8.8/h", "secret": "x" * 257},
        {"url": "https://8.8.8.8/h"},
        {"secret": SECRET},
        {"url": "https://8.8.8.8/" + "x" * 2048, "secret": SECRET},
    ]
    for body in bad:
        response = owner["browser"].put("/v1/auth/account/delivery-webhook", json=body)
        assert response.status_code == 400, body
        assert response.json()["error"]["code"] == "invalid_request", body
