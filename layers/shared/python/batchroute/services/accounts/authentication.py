"""Turns a bearer API key or a session cookie into a Principal, or refuses it (401)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from batchroute.clock import Clock, isoformat
from batchroute.domain.access import Principal
from batchroute.domain.accounts import ApiKey, Session, User
from batchroute.domain.credentials import key_belongs_to, keyed_hash, same_hash
from batchroute.errors import Unauthenticated

SESSION_COOKIE = "service_ui_session"


class CredentialStore(Protocol):
    def key_by_hash(self, key_hash: str) -> ApiKey | None: ...

    def session_by_hash(self, token_hash: str) -> Session | None: ...

    def get_user(self, user_id: str) -> User | None: ...


class Authenticator:
    def __init__(
        self, store: CredentialStore, *, environment: str, secret: Callable[[], bytes], clock: Clock
    ) -> None:
        self.store = store
        self.environment = environment
        self.secret = secret
        self.clock = clock

    def from_api_key(self, value: str) -> Principal:
        # Another environment's key (or garbage) is refused before any lookup.
        if not key_belongs_to(self.environment, value):
            raise Unauthenticated("Invalid API key.", code="invalid_api_key")
        wanted = keyed_hash(self.secret(), value)
        key = self.store.key_by_hash(wanted)
        if key is None or not same_hash(key.key_hash, wanted):
            raise Unauthenticated("Invalid API key.", code="invalid_api_key")
        if key.revoked_at:
            raise Unauthenticated("This API key has been revoked.", code="api_key_revoked")
        # A key acts for its org with its role, never as a signed-in user: user-session-only
        # actions refuse it. It may belong to a user (its creator), for that user's own profile.
        return Principal(
            org_id=key.org_id,
            role=key.role,
            via="api_key",
            key_id=key.key_id,
            key_user_id=key.created_by_user_id,
        )

    def from_session(self, token: str) -> Principal:
        session = self.session(token)
        if session is None:
            raise Unauthenticated(
                "The session is invalid or has ended; sign in again.", code="invalid_session"
            )
        user = self.store.get_user(session.user_id)
        if user is None:
            raise Unauthenticated("The session's user no longer exists.", code="invalid_session")
        return Principal(
            org_id=user.org_id,
            role=user.role,
            via="session",
            user_id=user.user_id,
            session_id=session.session_id,
        )

    def session(self, token: str) -> Session | None:
        """The live session behind a cookie value, or None (unknown, revoked or expired)."""
        if not token or len(token) > 256:
            return None
        wanted = keyed_hash(self.secret(), token)
        session = self.store.session_by_hash(wanted)
        if session is None or not same_hash(session.token_hash, wanted):
            return None
        if session.revoked_at or session.expires_at <= isoformat(self.clock.now()):
            return None
        return session

    def authenticate(self, *, authorization: str | None, session_cookie: str | None) -> Principal:
        """A bearer key wins over a cookie; neither gives 401."""
        if authorization:
            scheme, _, value = authorization.partition(" ")
            if scheme.lower() != "bearer" or not value.strip():
                raise Unauthenticated("Use 'Authorization: Bearer <API key>'.", code="invalid_authorization")
            return self.from_api_key(value.strip())
        if session_cookie:
            return self.from_session(session_cookie)
        raise Unauthenticated(
            "Authentication required: an API key or a signed-in session.", code="authentication_required"
        )
