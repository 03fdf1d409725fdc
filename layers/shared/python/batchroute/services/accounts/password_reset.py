"""Forgotten passwords: a single-use reset link (1 hour), then a new password that ends
every session of the user and every other reset link it had.

`forgot` must not reveal whether an address has an account: the answer is always the same,
errors after the lookup are swallowed (logged), and every call is held to the same minimum
duration, which covers the extra token write and email send of a known address.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from datetime import timedelta
from types import TracebackType
from typing import Protocol
from urllib.parse import urlencode

from batchroute.clock import Clock, isoformat
from batchroute.domain.accounts.accounts import User
from batchroute.domain.accounts.credentials import keyed_hash, new_opaque_token
from batchroute.domain.accounts.passwords import check_password, checked_email
from batchroute.errors import Unauthenticated
from batchroute.observability import logger
from batchroute.services.accounts.passwords import Argon2Passwords
from batchroute.services.accounts.verification import TokenStore, plausible_token, spend_token
from batchroute.services.delivery.ports import Mailer

RESET_PURPOSE = "password_reset"
RESET_LIFETIME = timedelta(hours=1)
# Above the usual DynamoDB write + SES send (~100-200 ms), so both paths end at the floor.
FORGOT_FLOOR_SECONDS = 0.6


class ResetStore(TokenStore, Protocol):
    def set_password(self, user_id: str, password_hash: str, *, verified_at: str) -> None: ...

    def revoke_user_sessions(self, user_id: str, at: str, *, keep_token_hash: str | None = None) -> int: ...


@dataclass(eq=False)
class ResponseFloor:
    """A `with` block that lasts at least `seconds` of wall time (sleeping out the rest)."""

    seconds: float
    _: KW_ONLY
    monotonic: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    _started: float = field(default=0.0, init=False)

    def __enter__(self) -> ResponseFloor:
        self._started = self.monotonic()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        remaining = self.seconds - (self.monotonic() - self._started)
        if remaining > 0:
            self.sleep(remaining)


@dataclass(eq=False)
class PasswordReset:
    store: ResetStore
    mailer: Mailer
    passwords: Argon2Passwords
    _: KW_ONLY
    secret: Callable[[], bytes]
    clock: Clock
    public_base_url: str
    floor: ResponseFloor = field(default_factory=lambda: ResponseFloor(FORGOT_FLOOR_SECONDS))

    def forgot(self, email: str) -> None:
        """Emails a reset link when the address has an account; the same outcome either way."""
        address = checked_email(email)  # a malformed address is 400 whoever asks
        with self.floor:
            # Minted and hashed for every caller: the unknown path skips only the write and send.
            token = new_opaque_token()
            token_hash = keyed_hash(self.secret(), token)
            user = self.store.user_by_email(address)
            if user is None:
                return
            try:
                self._send_link(user, token, token_hash)
            except Exception:
                # A failure here must not change the answer (that would reveal the account).
                logger.exception("password reset email not sent", extra={"user_id": user.user_id})

    def _send_link(self, user: User, token: str, token_hash: str) -> None:
        self.store.put_token(
            purpose=RESET_PURPOSE,
            token_hash=token_hash,
            user_id=user.user_id,
            expires_at=isoformat(self.clock.now() + RESET_LIFETIME),
            credentials_version=user.credentials_version,
        )
        link = f"{self.public_base_url}/console/reset-password?{urlencode({'token': token})}"
        self.mailer.send(
            user.email,
            "Reset your password",
            "Someone asked to reset the password of your Batch AI Routing account. "
            "To choose a new password, open this link:\n\n"
            f"{link}\n\n"
            "The link works once and expires in 1 hour. If you did not ask for this, ignore "
            "this message: your password stays as it is.\n",
        )

    def reset(self, token: str, password: str) -> None:
        """Sets the new password and signs the user out everywhere; 401 `invalid_token` for a
        used, expired or unknown token."""
        check_password(password)
        invalid = Unauthenticated("The reset link is invalid or has expired.", code="invalid_token")
        if not plausible_token(token):
            raise invalid
        # Hashed first: once the token is spent, only the update stands between it and the new password.
        new_hash = self.passwords.hash(password)
        now = isoformat(self.clock.now())
        # A link issued before the password last changed (by another link) is no good.
        user = spend_token(
            self.store, self.secret(), purpose=RESET_PURPOSE, token=token, now=now, current_only=True
        )
        if user is None:
            raise invalid
        # The link reached the inbox, which proves the address as well as a verification link.
        # The write counts a new credentials_version, which ends every session signed in
        # under the old password, including one a sign-in racing this reset writes after it
        # (Session.signed_in_as); the revocation marks the ones there are as ended.
        self.store.set_password(user.user_id, new_hash, verified_at=now)
        self.store.revoke_user_sessions(user.user_id, now)
