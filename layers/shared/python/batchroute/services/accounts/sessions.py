"""Signing in and out: password login creates a cookie session; sessions are looked up and
revoked by the keyed hash of the cookie value, which is the only form ever stored.

A failed sign-in says the same thing, and costs the same argon2 verification, whether the
address is unknown or the password is wrong. An unverified address may sign in. With a
`LoginLockout`, failures count per address across IPs and lock its password sign-in
(services/accounts/login_lockout.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, InitVar, dataclass, field
from datetime import timedelta
from typing import Protocol

from batchroute.clock import Clock, isoformat
from batchroute.domain.accounts.accounts import Session, User, normalize_email
from batchroute.domain.accounts.credentials import keyed_hash, new_opaque_token
from batchroute.errors import Unauthenticated
from batchroute.ids import new_id
from batchroute.services.accounts.authentication import Authenticator
from batchroute.services.accounts.login_lockout import LoginLockout
from batchroute.services.accounts.passwords import Argon2Passwords
from batchroute.services.accounts.ports import CredentialStore, UserRecords

SESSION_LIFETIME = timedelta(days=14)


class SessionStore(CredentialStore, UserRecords, Protocol):
    def put_session(self, session: Session) -> None: ...

    def revoke_session(self, token_hash: str, at: str) -> None: ...

    def rehash_password(self, user_id: str, *, old_hash: str, new_hash: str) -> bool: ...


@dataclass(frozen=True)
class LiveSession:
    session: Session
    user: User


@dataclass(frozen=True)
class SignedIn(LiveSession):
    """A session just begun: with its token, which the sign-in answers once."""

    token: str = field(repr=False)  # the cookie value; never stored


@dataclass(eq=False)
class Sessions:
    store: SessionStore
    passwords: Argon2Passwords
    _: KW_ONLY
    environment: InitVar[str]
    secret: Callable[[], bytes]
    clock: Clock
    lockout: LoginLockout  # repeated failed sign-ins lock the address (docs/rate-limits.md)
    _authenticator: Authenticator = field(init=False, repr=False)

    def __post_init__(self, environment: str) -> None:
        self._authenticator = Authenticator(
            self.store, environment=environment, secret=self.secret, clock=self.clock
        )

    def login(self, email: str, password: str) -> SignedIn:
        address = normalize_email(email)
        self.lockout.check(address)  # a locked address is refused before any password work
        user = self.store.user_by_email(address)
        # Verified against a dummy hash when the user is unknown: same work, same answer.
        matches = self.passwords.verify(user.password_hash if user else None, password)
        if user is None or not matches:
            self.lockout.failed(address, user)
            raise Unauthenticated("The email or password is incorrect.", code="invalid_credentials")
        if self.passwords.needs_rehash(user.password_hash):
            # Only over the hash just verified: a reset since keeps its new password.
            self.store.rehash_password(
                user.user_id, old_hash=user.password_hash, new_hash=self.passwords.hash(password)
            )
        now = self.clock.now()
        token = new_opaque_token()
        session = Session(
            session_id=new_id("sess", now),
            token_hash=keyed_hash(self.secret(), token),
            user_id=user.user_id,
            org_id=user.org_id,
            created_at=isoformat(now),
            expires_at=isoformat(now + SESSION_LIFETIME),
            credentials_version=user.credentials_version,
        )
        self.store.put_session(session)
        return SignedIn(token=token, session=session, user=user)

    def current(self, token: str | None) -> LiveSession | None:
        """The live session behind a cookie value, or None (absent, unknown, revoked, expired)."""
        live = self._authenticator.live(token or "")
        return None if live is None else LiveSession(*live)

    def logout(self, token: str | None) -> None:
        """Revokes the cookie's session only; other sessions and API keys are untouched."""
        live = self.current(token)
        if live is None:
            raise Unauthenticated("No signed-in session to end.", code="invalid_session")
        self.store.revoke_session(live.session.token_hash, isoformat(self.clock.now()))
