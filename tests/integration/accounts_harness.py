"""Shared set-up of the account integration tests: the real app on moto, with an in-memory
outbox, a movable clock, cheap argon2 parameters and no forgot-password floor."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fastapi.testclient import TestClient

from batchroute.adapters.app_secret import app_secret
from batchroute.adapters.email import MemoryOutbox
from batchroute.clock import FixedClock, isoformat
from batchroute.config import Settings
from batchroute.domain.accounts.accounts import Session, User
from batchroute.domain.accounts.credentials import keyed_hash, new_opaque_token
from batchroute.ids import new_id
from batchroute.services.accounts.authentication import SESSION_COOKIE
from batchroute.services.accounts.password_reset import ResponseFloor
from batchroute.services.accounts.passwords import Argon2Passwords
from functions.api.app import create_app
from functions.api.auth import identity_store
from functions.api.deps import get_clock, get_forgot_floor, get_mailer, get_passwords

PASSWORD = "correct horse battery"
_TOKEN = re.compile(r"token=([A-Za-z0-9_\-]+)")


@dataclass
class Harness:
    client: TestClient
    outbox: MemoryOutbox
    # Starts at the real time: the shared authenticator (B endpoints) reads the system clock.
    clock: FixedClock = field(default_factory=lambda: FixedClock(datetime.now(UTC)))

    def fresh_client(self) -> TestClient:
        """Another browser: same app, its own cookie jar."""
        return TestClient(self.client.app, raise_server_exceptions=False)

    def register(self, email: str, password: str = PASSWORD, **extra: Any) -> dict[str, Any]:
        response = self.client.post("/v1/auth/register", json={"email": email, "password": password, **extra})
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    def agent(self, email: str, password: str = PASSWORD) -> dict[str, Any]:
        response = self.client.post("/v1/auth/agent-register", json={"email": email, "password": password})
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    def login(self, email: str, password: str = PASSWORD) -> TestClient:
        """A new signed-in browser."""
        browser = self.fresh_client()
        response = browser.post("/v1/auth/login", json={"email": email, "password": password})
        assert response.status_code == 200, response.text
        return browser

    def link_to(self, address: str, marker: str) -> str:
        """The newest link containing `marker` mailed to `address`."""
        for message in reversed(self.outbox.to(address)):
            for line in message.text.splitlines():
                if marker in line:
                    return line.strip()
        raise AssertionError(f"no {marker!r} link mailed to {address}")

    def token_in(self, link: str) -> str:
        found = _TOKEN.search(link)
        assert found, link
        return str(found.group(1))


def make_harness(settings: Settings | None = None) -> Harness:
    identity_store.cache_clear()
    app = create_app(settings)
    outbox = MemoryOutbox()
    harness = Harness(client=TestClient(app, raise_server_exceptions=False), outbox=outbox)
    passwords = Argon2Passwords.cheap()
    app.dependency_overrides[get_mailer] = lambda: outbox
    app.dependency_overrides[get_passwords] = lambda: passwords
    app.dependency_overrides[get_forgot_floor] = lambda: ResponseFloor(0)
    app.dependency_overrides[get_clock] = lambda: harness.clock
    return harness


def add_member(org_id: str, role: str, now: datetime) -> tuple[User, str]:
    """Another user of an org with a live session; returns the user and the cookie value."""
    store = identity_store()
    user = User(
        user_id=new_id("user"),
        org_id=org_id,
        email=f"{role}-{new_id('user')[-6:]}@example.com",
        password_hash="unused",
        role=role,  # type: ignore[arg-type]
        created_at=isoformat(now),
    )
    # Written directly: inviting members is not part of the public interface yet.
    store.dynamodb.transact_write_items(TransactItems=[store.user_item(user)])
    token = new_opaque_token()
    store.put_session(
        Session(
            session_id=new_id("sess"),
            token_hash=keyed_hash(app_secret(), token),
            user_id=user.user_id,
            org_id=org_id,
            created_at="2026-01-01T00:00:00.000Z",
            expires_at="2999-01-01T00:00:00.000Z",
        )
    )
    return user, token


def cookie_jar(client: TestClient, token: str) -> TestClient:
    client.cookies.set(SESSION_COOKIE, token)
    return client
