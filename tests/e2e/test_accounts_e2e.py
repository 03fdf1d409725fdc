"""Accounts as `make run` serves them: agent registration, the local email outbox, cookie
sign-in, and an API key created and revoked over HTTP."""

from __future__ import annotations

import email
import email.policy
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.e2e.local_stack import RunningStack

pytestmark = pytest.mark.e2e

PASSWORD = "correct horse battery"


def _verification_link(outbox: Path, address: str) -> str:
    for path in sorted(outbox.glob("*.eml"), reverse=True):
        message = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
        if message["To"] == address:
            text = message.get_content()  # type: ignore[attr-defined]
            return next(line.strip() for line in text.splitlines() if "/v1/auth/verify-email?token=" in line)
    raise AssertionError(f"no verification email for {address} in {outbox}")


def test_agent_signs_up_verifies_signs_in_and_manages_keys(
    local_stack: RunningStack, api: httpx.Client
) -> None:
    address = f"agent-{uuid.uuid4().hex[:10]}@example.com"
    # Given an agent that registers over HTTP
    created = api.post("/v1/auth/agent-register", json={"email": address, "password": PASSWORD})
    assert created.status_code == 200, created.text
    agent = created.json()
    agent_key = {"Authorization": f"Bearer {agent['api_key']}"}
    # Then its key works at once, with the local signup credit
    account = api.get("/v1/auth/account", headers=agent_key)
    assert account.status_code == 200
    assert account.json()["credit_balance"] == {"currency": "usd", "amount": "25.00"}
    # And the verification email lies in the local outbox; its link verifies the address once
    # (start_stack points LOCAL_OUTBOX_DIR at <workdir>/outbox, next to the stack file)
    link = _verification_link(local_stack.stack_file.parent / "outbox", address)
    parts = urlsplit(link)
    assert api.get(f"{parts.path}?{parts.query}").json() == {"ok": True, "email_verified": True}
    assert api.get(f"{parts.path}?{parts.query}").status_code == 400

    # When the agent's user signs in with a cookie
    with httpx.Client(base_url=local_stack.base_url, timeout=10) as browser:
        login = browser.post("/v1/auth/login", json={"email": address, "password": PASSWORD})
        assert login.status_code == 200
        assert "HttpOnly" in login.headers["set-cookie"]
        session = browser.get("/v1/sessions/current").json()["session"]
        assert session["org_id"] == agent["org_id"] and session["email_verified"] is True
        # And creates an API key with the session
        made = browser.post("/v1/auth/account/api-keys", json={"label": "ci", "role": "member"})
        assert made.status_code == 201, made.text
        new_key = {"Authorization": f"Bearer {made.json()['api_key']}"}
        assert api.get("/v1/auth/account", headers=new_key).status_code == 200
        # And revokes it
        key_id = made.json()["key"]["id"]
        revoked = browser.post(f"/v1/auth/account/api-keys/{key_id}/revoke")
        assert revoked.status_code == 200 and revoked.json() == {"ok": True}
        # Then the revoked key is refused, the agent's own key still works
        assert api.get("/v1/auth/account", headers=new_key).status_code == 401
        assert api.get("/v1/auth/account", headers=agent_key).status_code == 200
        # And signing out ends the cookie session only
        assert browser.delete("/v1/sessions/current").json() == {"ok": True}
        assert browser.get("/v1/sessions/current").json() == {"session": None}
    assert api.get("/v1/auth/account", headers=agent_key).status_code == 200
