"""Retrying transient provider errors: exponential backoff with full jitter.

After failed attempt n (1-based) the next try waits a uniform random time in
[0, min(cap, base * 2**(n-1))): with the defaults 0.5 s, 1 s, 2 s ceilings for the waits
before attempts 2, 3 and 4. Full jitter spreads the retries of many items that failed
together (AWS Architecture Blog, "Exponential Backoff And Jitter"). A Retry-After from
the provider is the least the wait can be (still capped). `max_attempts` counts every try,
the first included.

The random source and the sleeper are injected, so tests never sleep.
"""

from __future__ import annotations

import random as _random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from batchroute.config import Settings

DEFAULT_MAX_ATTEMPTS = 4
DEFAULT_BASE_SECONDS = 0.5
DEFAULT_CAP_SECONDS = 30.0


def backoff_ceiling(attempt: int, *, base: float, cap: float) -> float:
    """The largest wait after failed attempt `attempt` (1-based)."""
    if attempt < 1:
        raise ValueError("attempt is 1-based")
    # 2**62 already exceeds any cap; bounding the exponent keeps huge attempts finite.
    return float(min(cap, base * 2 ** min(attempt - 1, 62)))


def backoff_delay(attempt: int, unit: float, *, base: float, cap: float) -> float:
    """Full jitter: `unit` in [0, 1) picks the wait within [0, ceiling). Pure."""
    return backoff_ceiling(attempt, base=base, cap=cap) * min(max(unit, 0.0), 1.0)


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    base_seconds: float = DEFAULT_BASE_SECONDS
    cap_seconds: float = DEFAULT_CAP_SECONDS
    random: Callable[[], float] = field(default=_random.random, repr=False, compare=False)
    sleeper: Callable[[float], None] = field(default=time.sleep, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.base_seconds < 0 or self.cap_seconds < 0:
            raise ValueError("backoff times must not be negative")

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        random: Callable[[], float] | None = None,
        sleeper: Callable[[float], None] | None = None,
    ) -> RetryPolicy:
        return cls(
            max_attempts=settings.provider_retry_max_attempts,
            base_seconds=settings.provider_retry_base_seconds,
            cap_seconds=settings.provider_retry_cap_seconds,
            random=random or _random.random,
            sleeper=sleeper or time.sleep,
        )

    def can_retry(self, attempt: int) -> bool:
        """Whether failed attempt `attempt` may be followed by another."""
        return attempt < self.max_attempts

    def next_delay(self, attempt: int, *, retry_after: float | None = None) -> float:
        """The wait after failed attempt `attempt`: jittered, at least `retry_after`, capped."""
        delay = backoff_delay(attempt, self.random(), base=self.base_seconds, cap=self.cap_seconds)
        if retry_after is not None and retry_after > delay:
            delay = min(float(retry_after), self.cap_seconds)
        return delay

    def wait(self, attempt: int, *, retry_after: float | None = None) -> float:
        """Sleeps the wait after failed attempt `attempt`; returns it."""
        delay = self.next_delay(attempt, retry_after=retry_after)
        if delay > 0:
            self.sleeper(delay)
        return delay


def no_sleep(_seconds: float) -> None:
    """A sleeper that does not sleep (tests, benchmarks)."""
