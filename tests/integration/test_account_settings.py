"""GET /v1/auth/account, the profile and the org's delivery webhook, on moto."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from batchroute.adapters.app_secret import app_secret
from batchroute.adapters.aws import client
from batchroute.adapters.kms import KmsSealer
from batchroute.config import get_settings
from batchroute.domain.accounts.accounts import ApiKey
from batchroute.domain.accounts.credentials import issue_api_key
from batchroute.domain.delivery.network import check_public_https_url
from batchroute.domain.delivery.webhooks import webhook_secret_context
from batchroute.ids import new_id
from batchroute_tools.local.provision import LocalStack
from functions.api.auth import identity_store
from functions.api.deps import get_webhook_url_check
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


def test_the_agent_key_sets_the_name_of_the_user_it_registered(
    harness: Harness, owner: dict[str, Any]
) -> None:
    # Given the key agent-register returned (it belongs to the user it registered)
    api = harness.fresh_client()
    # When it renames the org and sets a full name
    response = api.put(
        "/v1/auth/account/profile",
        json={"display_name": "Bots Inc", "full_name": "Robot Owner"},
        headers=owner["key"],
    )
    # Then both apply, and the answer shows the key's user
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["org"]["display_name"] == "Bots Inc"
    assert body["user"]["user_id"] == owner["user_id"] and body["user"]["full_name"] == "Robot Owner"
    # And the signed-in owner sees the same stored name
    assert identity_store().get_user(owner["user_id"]).full_name == "Robot Owner"  # type: ignore[union-attr]
    assert owner["browser"].get("/v1/auth/account").json()["user"]["full_name"] == "Robot Owner"
    # And a blank name through the key clears it
    cleared = api.put("/v1/auth/account/profile", json={"full_name": "  "}, headers=owner["key"])
    assert cleared.status_code == 200 and cleared.json()["user"]["full_name"] is None


def test_a_key_created_in_a_session_sets_its_creators_name_only(
    harness: Harness, owner: dict[str, Any]
) -> None:
    # Given an admin signed in, who creates a member-role key
    admin_user, token = add_member(owner["org_id"], "admin", harness.clock.now())
    admin = cookie_jar(harness.fresh_client(), token)
    created = admin.post("/v1/auth/account/api-keys", json={"label": "ci", "role": "member"})
    assert created.status_code == 201, created.text
    key = {"Authorization": f"Bearer {created.json()['api_key']}"}
    # When the key sets a full name (a member key may: it is the user's own name)
    response = harness.fresh_client().put(
        "/v1/auth/account/profile", json={"full_name": "Ada Admin"}, headers=key
    )
    # Then the admin's name changes, and nobody else's
    assert response.status_code == 200, response.text
    assert response.json()["user"]["user_id"] == admin_user.user_id
    store = identity_store()
    assert store.get_user(admin_user.user_id).full_name == "Ada Admin"  # type: ignore[union-attr]
    assert store.get_user(owner["user_id"]).full_name is None  # type: ignore[union-attr]
    # And the member key still may not rename the org
    refused = harness.fresh_client().put(
        "/v1/auth/account/profile", json={"display_name": "Mine"}, headers=key
    )
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "permission_denied"


def test_a_key_without_a_user_gets_403_and_nothing_is_written(
    harness: Harness, owner: dict[str, Any]
) -> None:
    # Given a key stored without a user (keys from before keys recorded their creator)
    issued = issue_api_key(get_settings().environment, app_secret())
    identity_store().put_key(
        ApiKey(
            key_id=new_id("key"),
            org_id=owner["org_id"],
            key_hash=issued.key_hash,
            label="legacy",
            role="owner",
            display_prefix=issued.display_prefix,
            created_at="2026-01-01T00:00:00.000Z",
        )
    )
    headers = {"Authorization": f"Bearer {issued.value}"}
    api = harness.fresh_client()
    # When it sets a full name together with the org's name
    refused = api.put(
        "/v1/auth/account/profile", json={"display_name": "Half Done", "full_name": "Robot"}, headers=headers
    )
    # Then 403 user_session_required, and the request is refused whole
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "user_session_required"
    account = api.get("/v1/auth/account", headers=headers).json()
    assert account["org"]["display_name"] == "owner" and account["user"] is None
    # And the org's name alone still works through it
    renamed = api.put("/v1/auth/account/profile", json={"display_name": "Bots Inc"}, headers=headers)
    assert renamed.status_code == 200 and renamed.json()["org"]["display_name"] == "Bots Inc"


def test_a_key_whose_user_is_gone_has_no_user(harness: Harness, owner: dict[str, Any]) -> None:
    # Given the agent key, whose user is then deleted
    store = identity_store()
    store.dynamodb.delete_item(
        TableName=store.table_name, Key={"pk": {"S": f"USER#{owner['user_id']}"}, "sk": {"S": "META"}}
    )
    # When it sets a full name / Then 403 as for a key with no user
    refused = harness.fresh_client().put(
        "/v1/auth/account/profile", json={"full_name": "Ghost"}, headers=owner["key"]
    )
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "user_session_required"


def test_billing_controls_stay_session_only_for_a_users_key(harness: Harness, owner: dict[str, Any]) -> None:
    # Given the agent key, which belongs to the owner
    response = harness.fresh_client().put(
        "/v1/billing/controls", json={"limit_enabled": False}, headers=owner["key"]
    )
    # Then changing the billing controls still needs the signed-in user
    assert response.status_code == 403 and response.json()["error"]["code"] == "user_session_required"
    # And creating API keys too
    created = harness.fresh_client().post(
        "/v1/auth/account/api-keys", json={"label": "x"}, headers=owner["key"]
    )
    assert created.status_code == 403 and created.json()["error"]["code"] == "user_session_required"


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
    # A name that is blank or holds control characters (shown in the console and in emails)
    for name in ("   ", "Acme\x00", "Acme\nInc"):
        response = owner["browser"].put("/v1/auth/account/profile", json={"display_name": name})
        assert response.status_code == 400, name
        assert response.json()["error"]["code"] == "invalid_display_name", name


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
