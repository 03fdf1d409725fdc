"""Turns a bearer API key or a session cookie into a Principal, or refuses it (401).

Direct chat (docs/chat.md, "One AWS call before the first byte") may take the caller's key
from this process's copy, up to `KEY_COPY_SECONDS` old, instead of reading it: the caller then
gets the key's hash back and MUST confirm it in the write that spends (the hold's transaction
checks the key record still exists, unrevoked), so a revoked key spends nothing and reads
nothing. Every other path reads the key on every request.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime, timedelta
from typing import Final

from batchroute.clock import Clock, isoformat
from batchroute.domain.accounts.access import Principal
from batchroute.domain.accounts.accounts import SESSION_COOKIE as SESSION_COOKIE  # re-exported
from batchroute.domain.accounts.accounts import ApiKey, Session, User
from batchroute.domain.accounts.credentials import key_belongs_to, keyed_hash, same_hash
from batchroute.errors import Unauthenticated
from batchroute.services.accounts.ports import CredentialStore

KEY_COPY_SECONDS: Final = 60
KEY_COPIES_KEPT: Final = 4096


class KeyUnconfirmed(Unauthenticated):
    """A key taken from the process's copy failed its confirmation (revoked or gone since)."""

    def __init__(self, key_hash: str) -> None:
        super().__init__("This API key is no longer valid.", code="invalid_api_key")
        self.key_hash = key_hash


@dataclass(eq=False)
class Authenticator:
    store: CredentialStore
    _: KW_ONLY
    environment: str
    secret: Callable[[], bytes]
    clock: Clock
    _copies: OrderedDict[str, tuple[ApiKey, datetime]] = field(default_factory=OrderedDict, init=False)
    _copies_lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def from_api_key(self, value: str) -> Principal:
        return self._principal(self._read_key(self._key_hash(value)))

    def from_api_key_copy(self, value: str) -> tuple[Principal, str | None]:
        """The key's principal from this process's copy when one is younger than
        KEY_COPY_SECONDS, with the key's hash, which the caller must confirm in its write
        (`forget` it when that fails); else read now, with None: nothing to confirm."""
        wanted = self._key_hash(value)
        now = self.clock.now()
        with self._copies_lock:
            copy = self._copies.get(wanted)
        if copy is not None and timedelta(0) <= now - copy[1] < timedelta(seconds=KEY_COPY_SECONDS):
            return self._principal(copy[0]), wanted
        key = self._read_key(wanted)
        with self._copies_lock:
            self._copies[wanted] = (key, now)
            self._copies.move_to_end(wanted)
            while len(self._copies) > KEY_COPIES_KEPT:
                self._copies.popitem(last=False)
        return self._principal(key), None

    def forget(self, key_hash: str) -> None:
        """Drop a copy its confirmation refused (the key was revoked or deleted)."""
        with self._copies_lock:
            self._copies.pop(key_hash, None)

    def _key_hash(self, value: str) -> str:
        # Another environment's key (or garbage) is refused before any lookup.
        if not key_belongs_to(self.environment, value):
            raise Unauthenticated("Invalid API key.", code="invalid_api_key")
        return keyed_hash(self.secret(), value)

    def _read_key(self, wanted: str) -> ApiKey:
        key = self.store.key_by_hash(wanted)
        if key is None or not same_hash(key.key_hash, wanted):
            raise Unauthenticated("Invalid API key.", code="invalid_api_key")
        if key.revoked_at:
            raise Unauthenticated("This API key has been revoked.", code="api_key_revoked")
        return key

    @staticmethod
    def _principal(key: ApiKey) -> Principal:
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
        live = self.live(token)
        if live is None:
            raise Unauthenticated(
                "The session is invalid or has ended; sign in again.", code="invalid_session"
            )
        session, user = live
        return Principal(
            org_id=user.org_id,
            role=user.role,
            via="session",
            user_id=user.user_id,
            session_id=session.session_id,
        )

    def live(self, token: str) -> tuple[Session, User] | None:
        """The live session behind a cookie value and its user; None when there is none
        (unknown, revoked or expired), its user is gone, or it was signed in under a password
        changed since (`Session.signed_in_as`)."""
        session = self.session(token)
        user = self.store.get_user(session.user_id) if session else None
        if session is None or user is None or not session.signed_in_as(user):
            return None
        return session, user

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
        """A bearer key wins over a cookie; neither gives 401. An `Authorization` header that is
        there is the credential, even empty: a blank one is 401, never a fall back to the cookie
        (the cross-site write check lets a request with the header through as a key's)."""
        if authorization is not None:
            scheme, _, value = authorization.partition(" ")
            if scheme.lower() != "bearer" or not value.strip():
                raise Unauthenticated("Use 'Authorization: Bearer <API key>'.", code="invalid_authorization")
            return self.from_api_key(value.strip())
        if session_cookie:
            return self.from_session(session_cookie)
        raise Unauthenticated(
            "Authentication required: an API key or a signed-in session.", code="authentication_required"
        )
