"""Email verification: a single-use link that expires after 48 hours.

The link carries a random token; only its keyed hash is stored (purpose `verify_email`), and
consuming it is one conditional write, so a token works exactly once even when two clicks
race. Earlier links stay valid until they expire or are used.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from datetime import timedelta
from typing import Protocol
from urllib.parse import urlencode

from batchroute.clock import Clock, isoformat
from batchroute.domain.accounts.access import Principal, require_user_session
from batchroute.domain.accounts.accounts import SpentToken, User
from batchroute.domain.accounts.credentials import keyed_hash, new_opaque_token
from batchroute.errors import InvalidRequest, Unauthenticated
from batchroute.services.accounts.ports import UserRecords
from batchroute.services.delivery.ports import Mailer

VERIFY_PURPOSE = "verify_email"
VERIFY_LIFETIME = timedelta(hours=48)
MAX_TOKEN_LENGTH = 256


class TokenStore(UserRecords, Protocol):
    """Single-use link tokens (by keyed hash) and the users they name."""

    def put_token(
        self, *, purpose: str, token_hash: str, user_id: str, expires_at: str, credentials_version: int = 0
    ) -> None: ...

    def consume_token(self, *, purpose: str, token_hash: str, now: str) -> SpentToken | None: ...


def plausible_token(token: str) -> bool:
    """A link token worth looking up (the edge refuses the others already)."""
    return 0 < len(token) <= MAX_TOKEN_LENGTH


def spend_token(
    store: TokenStore, secret: bytes, *, purpose: str, token: str, now: str, current_only: bool = False
) -> User | None:
    """The user a single-use link's `token` names, the token spent in one conditional write
    (it works exactly once, even when two clicks race); None for an unknown, used or expired
    token and, with `current_only`, for one issued before the user's password last changed."""
    if not plausible_token(token):
        return None
    spent = store.consume_token(purpose=purpose, token_hash=keyed_hash(secret, token), now=now)
    if spent is None:
        return None
    user = store.get_user(spent.user_id)
    if user is None or (current_only and spent.credentials_version != user.credentials_version):
        return None
    return user


@dataclass(eq=False)
class EmailVerification:
    store: TokenStore
    mailer: Mailer
    _: KW_ONLY
    secret: Callable[[], bytes]
    clock: Clock
    public_base_url: str

    def send_link(self, user: User) -> None:
        token = new_opaque_token()
        expires = self.clock.now() + VERIFY_LIFETIME
        self.store.put_token(
            purpose=VERIFY_PURPOSE,
            token_hash=keyed_hash(self.secret(), token),
            user_id=user.user_id,
            expires_at=isoformat(expires),
        )
        link = f"{self.public_base_url}/v1/auth/verify-email?{urlencode({'token': token})}"
        self.mailer.send(
            user.email,
            "Confirm your email address",
            "Confirm the email address of your Batch AI Routing account by opening this link:\n\n"
            f"{link}\n\n"
            "The link works once and expires in 48 hours. If you did not create an account, "
            "ignore this message.\n",
        )

    def verify(self, token: str) -> User:
        """Marks the token's user verified; 400 `invalid_token` for a used, expired or unknown token."""
        now = isoformat(self.clock.now())
        user = spend_token(self.store, self.secret(), purpose=VERIFY_PURPOSE, token=token, now=now)
        if user is None:
            raise InvalidRequest("The verification link is invalid or has expired.", code="invalid_token")
        if user.email_verified_at is None:
            self.store.update_user(user.user_id, email_verified_at=now)
        return user

    def resend(self, principal: Principal) -> bool:
        """Emails a fresh link to the signed-in user; False when the address is already verified."""
        require_user_session(principal)
        user = self.store.get_user(principal.user_id or "")
        if user is None:
            raise Unauthenticated("The session's user no longer exists.", code="invalid_session")
        if user.email_verified_at is not None:
            return False
        self.send_link(user)
        return True
