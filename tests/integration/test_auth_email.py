"""Email verification and password reset over HTTP, on moto; the SES mailer and its local
`.eml` outbox."""

from __future__ import annotations

import email
import email.policy
from collections.abc import Callable
from pathlib import Path
from typing import cast
from urllib.parse import urlsplit

import pytest
from fastapi import FastAPI

from batchroute.adapters.aws import client
from batchroute.adapters.dynamo.identity import IdentityStore
from batchroute.config import get_settings
from batchroute.services.accounts.authentication import SESSION_COOKIE
from batchroute.services.accounts.passwords import Argon2Passwords
from batchroute_tools.local.provision import LocalStack
from functions.api.deps import get_mailer, get_passwords
from tests.integration.accounts_harness import PASSWORD, Harness, make_harness

NEW_PASSWORD = "a brand new password"


@pytest.fixture
def harness(local_aws: LocalStack) -> Harness:
    return make_harness()


def _path_of(link: str) -> str:
    parts = urlsplit(link)
    return f"{parts.path}?{parts.query}"


def _verified(harness: Harness, email_address: str) -> bool:
    account = harness.login(email_address).get("/v1/auth/account").json()
    return bool(account["user"]["email_verified"])


# -- verification ------------------------------------------------------------------------
def test_the_mailed_link_verifies_the_address_once(harness: Harness) -> None:
    # Given a new account and the link it was mailed
    harness.register("ann@example.com")
    link = harness.link_to("ann@example.com", "/v1/auth/verify-email?token=")
    # When the link is followed
    first = harness.fresh_client().get(_path_of(link))
    # Then the address is verified
    assert first.status_code == 200 and first.json() == {"ok": True, "email_verified": True}
    assert _verified(harness, "ann@example.com")
    # And the link does not work a second time
    second = harness.fresh_client().get(_path_of(link))
    assert second.status_code == 400 and second.json()["error"]["code"] == "invalid_token"


def test_the_token_can_be_posted_instead(harness: Harness) -> None:
    harness.agent("bot@example.com")
    token = harness.token_in(harness.link_to("bot@example.com", "verify-email?token="))
    response = harness.client.post("/v1/auth/verify-email", json={"token": token})
    assert response.status_code == 200 and response.json()["email_verified"] is True
    again = harness.client.post("/v1/auth/verify-email", json={"token": token})
    assert again.status_code == 400 and again.json()["error"]["code"] == "invalid_token"


def test_unknown_missing_and_expired_tokens_are_400(harness: Harness) -> None:
    harness.register("ann@example.com")
    token = harness.token_in(harness.link_to("ann@example.com", "verify-email?token="))
    unknown = harness.client.get("/v1/auth/verify-email", params={"token": "no-such-token"})
    assert unknown.status_code == 400 and unknown.json()["error"]["code"] == "invalid_token"
    assert harness.client.get("/v1/auth/verify-email").status_code == 400
    assert harness.client.post("/v1/auth/verify-email", json={}).status_code == 400
    # After 48 hours the real link has expired too
    harness.clock.advance(hours=48, seconds=1)
    expired = harness.client.get("/v1/auth/verify-email", params={"token": token})
    assert expired.status_code == 400 and expired.json()["error"]["code"] == "invalid_token"


def test_a_signed_in_user_can_ask_for_a_new_link(harness: Harness) -> None:
    agent = harness.agent("bot@example.com")
    browser = harness.login("bot@example.com")
    # When the user asks again / Then a second, working link is mailed
    response = browser.post("/v1/auth/verify-email/resend")
    assert response.status_code == 200 and response.json() == {
        "ok": True,
        "sent": True,
        "email_verified": False,
    }
    assert len(harness.outbox.to("bot@example.com")) == 2
    link = harness.link_to("bot@example.com", "verify-email?token=")
    assert harness.fresh_client().get(_path_of(link)).status_code == 200
    # Once verified nothing more is sent; an API key or nobody cannot ask
    assert browser.post("/v1/auth/verify-email/resend").json() == {
        "ok": True,
        "sent": False,
        "email_verified": True,
    }
    key = {"Authorization": f"Bearer {agent['api_key']}"}
    refused = harness.fresh_client().post("/v1/auth/verify-email/resend", headers=key)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "user_session_required"
    assert harness.fresh_client().post("/v1/auth/verify-email/resend").status_code == 401


# -- forgot and reset --------------------------------------------------------------------
def test_forgot_answers_alike_and_mails_only_known_addresses(harness: Harness) -> None:
    harness.register("ann@example.com")
    sent_before = len(harness.outbox.messages)
    known = harness.client.post("/v1/auth/password/forgot", json={"email": "Ann@Example.com"})
    unknown = harness.client.post("/v1/auth/password/forgot", json={"email": "nobody@example.com"})
    # Then the same status and the same body
    assert known.status_code == unknown.status_code == 200
    assert known.content == unknown.content == b'{"ok":true}'
    # And only the known address got a reset link
    assert [m.to for m in harness.outbox.messages[sent_before:]] == ["ann@example.com"]
    link = harness.link_to("ann@example.com", "/console/reset-password?token=")
    assert link.startswith("http://127.0.0.1:8000/console/reset-password?token=")


def test_forgot_needs_an_address(harness: Harness) -> None:
    for body in ({}, {"email": "not-an-email"}):
        response = harness.client.post("/v1/auth/password/forgot", json=body)
        assert response.status_code == 400


def test_reset_changes_the_password_and_ends_every_session(harness: Harness) -> None:
    # Given an agent account signed in twice, and a reset link
    agent = harness.agent("bot@example.com")
    browsers = [harness.login("bot@example.com"), harness.login("bot@example.com")]
    harness.client.post("/v1/auth/password/forgot", json={"email": "bot@example.com"})
    token = harness.token_in(harness.link_to("bot@example.com", "reset-password?token="))
    # When the password is reset
    response = harness.client.post("/v1/auth/password/reset", json={"token": token, "password": NEW_PASSWORD})
    # Then 200, every session is over, the old password fails and the new one works
    assert response.status_code == 200 and response.json() == {"ok": True}
    for browser in browsers:
        assert browser.get("/v1/sessions/current").json() == {"session": None}
        assert browser.get("/v1/auth/account").status_code == 401
    old = harness.client.post("/v1/auth/login", json={"email": "bot@example.com", "password": PASSWORD})
    assert old.status_code == 401
    assert harness.login("bot@example.com", NEW_PASSWORD).get("/v1/auth/account").status_code == 200
    # And API keys are not sessions: the agent's key still works
    key = {"Authorization": f"Bearer {agent['api_key']}"}
    assert harness.fresh_client().get("/v1/auth/account", headers=key).status_code == 200
    # And the token works only once
    again = harness.client.post(
        "/v1/auth/password/reset", json={"token": token, "password": "yet another one"}
    )
    assert again.status_code == 401 and again.json()["error"]["code"] == "invalid_token"


class _ResetDuringVerify(Argon2Passwords):
    """Hashing whose first verification lets a password reset land while it runs (a sign-in
    with the old password racing the reset), with hashing parameters other than the stored
    hash's when `rehash` (so the sign-in also upgrades the hash it verified)."""

    def __init__(self, reset: Callable[[], None], *, rehash: bool) -> None:
        super().__init__(time_cost=2 if rehash else 1, memory_cost=8, parallelism=1)
        self._reset: Callable[[], None] | None = reset

    def verify(self, stored_hash: str | None, password: str) -> bool:
        matches = super().verify(stored_hash, password)
        reset, self._reset = self._reset, None
        if reset is not None:
            reset()
        return matches


@pytest.mark.parametrize("rehash", [False, True], ids=["same-parameters", "rehashing"])
def test_a_sign_in_racing_a_reset_keeps_no_session_and_undoes_no_password(
    harness: Harness, rehash: bool
) -> None:
    # Given an account with a reset link, and a sign-in with the old password whose check
    # passes just before the reset lands
    harness.register("ann@example.com")
    harness.client.post("/v1/auth/password/forgot", json={"email": "ann@example.com"})
    token = harness.token_in(harness.link_to("ann@example.com", "reset-password?token="))

    def reset() -> None:
        response = harness.fresh_client().post(
            "/v1/auth/password/reset", json={"token": token, "password": NEW_PASSWORD}
        )
        assert response.status_code == 200, response.text

    app = cast(FastAPI, harness.client.app)
    app.dependency_overrides[get_passwords] = lambda: _ResetDuringVerify(reset, rehash=rehash)
    # When the sign-in ends after the reset (the password it checked was right when checked)
    intruder = harness.fresh_client()
    signed_in = intruder.post("/v1/auth/login", json={"email": "ann@example.com", "password": PASSWORD})
    assert signed_in.status_code == 200
    # Then its session was signed in under a password that is no more: it is not a session
    assert intruder.get("/v1/sessions/current").json() == {"session": None}
    refused = intruder.get("/v1/auth/account")
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_session"
    # And the new password stands (a rehash of the old one did not write it back)
    app.dependency_overrides[get_passwords] = Argon2Passwords.cheap
    old = harness.client.post("/v1/auth/login", json={"email": "ann@example.com", "password": PASSWORD})
    assert old.status_code == 401
    assert harness.login("ann@example.com", NEW_PASSWORD).get("/v1/auth/account").status_code == 200


def test_a_reset_ends_a_session_its_revocation_did_not_see(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a signed-in browser whose session the reset's revocation will not find (the
    # user's sessions are listed from an index that may lag a session just written)
    harness.register("ann@example.com")
    browser = harness.login("ann@example.com")
    monkeypatch.setattr(IdentityStore, "revoke_user_sessions", lambda *_args, **_kwargs: 0)
    harness.client.post("/v1/auth/password/forgot", json={"email": "ann@example.com"})
    token = harness.token_in(harness.link_to("ann@example.com", "reset-password?token="))
    # When the password is reset
    response = harness.client.post("/v1/auth/password/reset", json={"token": token, "password": NEW_PASSWORD})
    assert response.status_code == 200
    # Then the session is over all the same
    assert browser.get("/v1/sessions/current").json() == {"session": None}
    assert browser.get("/v1/auth/account").status_code == 401


def test_a_reset_ends_the_other_reset_links(harness: Harness) -> None:
    # Given two reset links mailed to one account
    harness.register("ann@example.com")
    tokens = []
    for _ in range(2):
        harness.client.post("/v1/auth/password/forgot", json={"email": "ann@example.com"})
        tokens.append(harness.token_in(harness.link_to("ann@example.com", "reset-password?token=")))
    assert tokens[0] != tokens[1]
    # When the newer one resets the password
    reset = harness.client.post(
        "/v1/auth/password/reset", json={"token": tokens[1], "password": NEW_PASSWORD}
    )
    assert reset.status_code == 200
    # Then the older one no longer works, and the password stays as reset
    older = harness.client.post(
        "/v1/auth/password/reset", json={"token": tokens[0], "password": "another one!"}
    )
    assert older.status_code == 401 and older.json()["error"]["code"] == "invalid_token"
    assert harness.login("ann@example.com", NEW_PASSWORD).get("/v1/auth/account").status_code == 200


def test_reset_refuses_bad_tokens_and_short_passwords(harness: Harness) -> None:
    harness.register("ann@example.com")
    harness.client.post("/v1/auth/password/forgot", json={"email": "ann@example.com"})
    token = harness.token_in(harness.link_to("ann@example.com", "reset-password?token="))
    short = harness.client.post("/v1/auth/password/reset", json={"token": token, "password": "short"})
    assert short.status_code == 400 and short.json()["error"]["code"] == "invalid_request"
    unknown = harness.client.post("/v1/auth/password/reset", json={"token": "nope", "password": NEW_PASSWORD})
    assert unknown.status_code == 401 and unknown.json()["error"]["code"] == "invalid_token"
    # The short-password attempt did not spend the token, but an hour does
    harness.clock.advance(hours=1)
    expired = harness.client.post("/v1/auth/password/reset", json={"token": token, "password": NEW_PASSWORD})
    assert expired.status_code == 401


def test_a_verification_token_is_no_reset_token(harness: Harness) -> None:
    harness.register("ann@example.com")
    token = harness.token_in(harness.link_to("ann@example.com", "verify-email?token="))
    response = harness.client.post("/v1/auth/password/reset", json={"token": token, "password": NEW_PASSWORD})
    assert response.status_code == 401


# -- the SES mailer and the local outbox -------------------------------------------------
def test_local_mode_sends_through_ses_and_writes_an_eml(
    local_aws: LocalStack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given local mode with the outbox in a temporary folder, and the real mailer
    monkeypatch.setenv("LOCAL_OUTBOX_DIR", str(tmp_path / "outbox"))
    get_settings.cache_clear()
    harness = make_harness()
    del harness.client.app.dependency_overrides[get_mailer]  # type: ignore[attr-defined]
    # When someone registers
    body = harness.register("ann@example.com")
    # Then SES accepted the message
    assert body["verification_email_sent"] is True
    assert client("ses").get_send_quota()["SentLast24Hours"] == 1
    # And an RFC 5322 copy with a working link lies in the outbox
    [path] = sorted((tmp_path / "outbox").glob("*.eml"))
    message = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
    assert message["To"] == "ann@example.com" and message["From"] == get_settings().email_sender
    assert message["Subject"] == "Confirm your email address" and message["Message-ID"]
    text = message.get_content()  # type: ignore[attr-defined]
    link = next(line for line in text.splitlines() if "verify-email?token=" in line)
    assert harness.fresh_client().get(_path_of(link)).status_code == 200


def test_a_refused_email_does_not_fail_registration(
    local_aws: LocalStack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a sender SES has not verified
    monkeypatch.setenv("LOCAL_OUTBOX_DIR", str(tmp_path / "outbox"))
    monkeypatch.setenv("EMAIL_SENDER", "unverified@nowhere.example")
    get_settings.cache_clear()
    harness = make_harness()
    del harness.client.app.dependency_overrides[get_mailer]  # type: ignore[attr-defined]
    # When someone registers / Then the account exists and says the email was not sent
    body = harness.register("ann@example.com")
    assert body["verification_email_sent"] is False
    assert harness.login("ann@example.com").cookies.get(SESSION_COOKIE)
    # And the local copy was still written
    assert list((tmp_path / "outbox").glob("*.eml"))
