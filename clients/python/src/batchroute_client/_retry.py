"""The spec's retry guidance: retry network errors, 429 and 5xx with exponential backoff and
jitter, honouring `Retry-After` as the minimum wait; never retry 400, 401, 403 or 409 (nor any
other 4xx but 429). A `Retry-After` longer than `MAX_RETRY_AFTER` is not waited for: the call
gives up at once and its typed error carries the wait asked (`APIError.retry_after`)."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime

RETRYABLE_STATUSES = frozenset({429}) | frozenset(range(500, 600))

# The longest `Retry-After` (seconds) a call sleeps through before retrying: a longer one (a
# locked login, a server asking for hours) raises at once instead of blocking the caller.
MAX_RETRY_AFTER = 60.0


def is_retryable_status(status: int) -> bool:
    return status in RETRYABLE_STATUSES


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a `Retry-After` header (delta-seconds or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - now)


@dataclass
class Backoff:
    """Delay before retry `attempt` (1-based): base * 2**(attempt-1), capped, with jitter
    drawn from [50 %, 100 %] of it; never less than the server's `Retry-After`, which is
    waited for only up to `max_retry_after` seconds (`too_long`: give up instead)."""

    base: float = 0.5
    cap: float = 8.0
    random: Callable[[], float] = field(default=random.random)
    max_retry_after: float = MAX_RETRY_AFTER

    def too_long(self, retry_after: float | None) -> bool:
        return retry_after is not None and not retry_after <= self.max_retry_after

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        exponential = min(self.cap, self.base * (2 ** (attempt - 1)))
        jittered = exponential * (0.5 + 0.5 * self.random())
        return float(max(jittered, retry_after or 0.0))


def wait_before_retry(
    backoff: Backoff,
    attempt: int,
    max_retries: int,
    *,
    status: int | None,
    retry_after: str | None = None,
    now: float = 0.0,
    repeatable: bool = True,
) -> float | None:
    """Seconds to wait before retrying failed attempt `attempt`, or None to give up.

    `status` None is a network error. A request that is not `repeatable` (it may have acted)
    is retried only on 429, which the service answers before doing any work. An answer whose
    `Retry-After` is longer than the backoff's `max_retry_after` is not retried."""
    if attempt > max_retries:
        return None
    if status is None:
        return backoff.delay(attempt) if repeatable else None
    if not is_retryable_status(status) or (not repeatable and status != 429):
        return None
    wait = parse_retry_after(retry_after, now)
    if backoff.too_long(wait):
        return None
    return backoff.delay(attempt, wait)
