"""Account lockout: failed sign-ins counted per address across every IP; at
`LockoutPolicy.failures` within the window the address's password sign-in is locked for
`lock_seconds` (429 `rate_limited`, `details.limit = "login_account"`, Retry-After), and the
account's user is emailed once per lockout (docs/rate-limits.md, "Account lockout").

An unknown address is counted and locked exactly like a known one, so neither the 401s nor
the 429 say whether an account exists; only the email, which goes to the account's own
mailbox, depends on it. A successful sign-in resets nothing: an attacker who knows one
password cannot clear the failures counted against another address or IP.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import Protocol

from batchroute.clock import Clock
from batchroute.domain.accounts.accounts import User
from batchroute.domain.billing.rate_limits import position, rolling_count
from batchroute.errors import RateLimited, ServiceError, TransientError
from batchroute.observability import logger
from batchroute.services.billing.rate_limiting import RateCounters, address_digest
from batchroute.services.delivery.ports import Mailer

FAILED = "failed"
LOCK_SUBJECT = "Sign-in to your account was locked"


@dataclass(frozen=True)
class LockoutPolicy:
    failures: int = 10
    window_seconds: int = 900
    lock_seconds: int = 900


class LoginLocks(Protocol):
    def lock(self, account: str, *, now: int, until: int) -> bool: ...

    def locked_until(self, account: str) -> int | None: ...


@dataclass(eq=False)
class LoginLockout:
    counters: RateCounters
    locks: LoginLocks
    mailer: Mailer
    _: KW_ONLY
    policy: LockoutPolicy
    secret: Callable[[], bytes]
    clock: Clock
    public_base_url: str

    def check(self, email: str) -> None:
        """Raises RateLimited while the address's sign-in is locked (before any password work)."""
        account = address_digest(self.secret(), email)
        try:
            until = self.locks.locked_until(account)
        except TransientError:
            logger.warning("login lock check skipped")  # fail open, as the rate limits do
            return
        now = self.clock.now().timestamp()
        if until is not None and until > now:
            raise _locked(math.ceil(until - now))

    def failed(self, email: str, user: User | None) -> None:
        """Counts a failed sign-in; the failure that reaches the threshold takes the lock,
        and the one caller that takes it emails the account (if there is one)."""
        p = self.policy
        account = address_digest(self.secret(), email)
        now = self.clock.now()
        at = position(now, p.window_seconds)
        try:
            counts = self.counters.hit(
                f"login#account#{account}", window_seconds=p.window_seconds, index=at.index, counters=[FAILED]
            )[FAILED]
            if rolling_count(counts, at.fraction) < p.failures - 1e-9:
                return
            epoch = math.floor(now.timestamp())
            taken = self.locks.lock(account, now=epoch, until=epoch + p.lock_seconds)
        except TransientError:
            logger.warning("login failure not counted")
            return
        if not taken:
            return
        logger.warning("login locked", extra={"lock_seconds": p.lock_seconds})
        if user is not None:
            self._tell(user)

    def _tell(self, user: User) -> None:
        p = self.policy
        text = (
            f"Sign-in to your account failed {p.failures} times within {_minutes(p.window_seconds)}, "
            f"so signing in with a password is paused for {_minutes(p.lock_seconds)}. "
            "Your API keys keep working.\n\n"
            "If this was you, wait and try again. If it was not, none of these attempts signed in, "
            "but choose a new password when you can, from the sign-in page:\n"
            f"{self.public_base_url}/console/\n"
        )
        try:
            self.mailer.send(user.email, LOCK_SUBJECT, text)
        except ServiceError:
            logger.warning("lockout email not sent", exc_info=True)


def _minutes(seconds: int) -> str:
    minutes = max(1, round(seconds / 60))
    return "1 minute" if minutes == 1 else f"{minutes} minutes"


def _locked(retry_after_seconds: int) -> RateLimited:
    return RateLimited(
        f"Too many failed sign-ins for this address; retry after {retry_after_seconds} s.",
        details={"limit": "login_account"},
        retry_after_seconds=max(1, retry_after_seconds),
    )
