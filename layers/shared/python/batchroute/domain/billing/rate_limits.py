"""Rate-limit window math: a sliding window estimated from two fixed windows.

Time is cut into fixed windows of `window_seconds`. A counter keeps how many requests fell
in the current window and in the one before; the rolling count at a moment `f` of the way
through the current window is

    previous * (1 - f) + current

which assumes the previous window's requests were spread evenly. It never lets through more
than twice the limit in any span of one window and needs two numbers per counter, so one
DynamoDB item can hold them (see docs/rate-limits.md). Pure: no clock, no storage.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Limit:
    """At most `requests` per rolling `window_seconds`; `name` is what the 429 reports."""

    name: str
    requests: int
    window_seconds: int

    def __post_init__(self) -> None:
        if self.requests < 1 or self.window_seconds < 1:
            raise ValueError("a limit needs at least one request per window of at least one second")


@dataclass(frozen=True)
class WindowCounts:
    """Requests counted in the current window (including the one being decided) and the previous."""

    current: int
    previous: int


@dataclass(frozen=True)
class Decision:
    allowed: bool
    retry_after_seconds: int = 0


@dataclass(frozen=True)
class Rule:
    counter: str
    limit: Limit


@dataclass(frozen=True)
class CallerGate:
    """A caller's rate-limit check as a condition of another write (the chat hold's
    transaction): count one request in each counter of `scope` at window `index` if each
    holds at most `maxima[counter]` now. `exact` says the previous window's counts were
    known; otherwise they were taken at their largest possible value (the limit itself: a
    window never keeps more allowed requests than that), which can refuse a request the
    exact numbers allow, never the reverse; `RateLimiter.recheck` settles such a refusal
    from the counts the refused write returns."""

    scope: str
    window_seconds: int
    index: int
    fraction: float
    rules: tuple[Rule, ...]
    maxima: dict[str, int]
    exact: bool

    @property
    def counters(self) -> list[str]:
        return [rule.counter for rule in self.rules]


@dataclass(frozen=True)
class WindowPosition:
    index: int  # which fixed window: floor(epoch seconds / window_seconds)
    fraction: float  # how far through it, 0 <= fraction < 1


def position(now: datetime, window_seconds: int) -> WindowPosition:
    epoch = now.timestamp()
    index = math.floor(epoch / window_seconds)
    fraction = (epoch - index * window_seconds) / window_seconds
    return WindowPosition(index=index, fraction=min(max(fraction, 0.0), 1.0 - 1e-12))


def rolling_count(counts: WindowCounts, fraction: float) -> float:
    return counts.previous * (1.0 - fraction) + counts.current


def decide(limit: Limit, counts: WindowCounts, fraction: float, *, counted_if_refused: bool) -> Decision:
    """Allow while the rolling count (this request included) stays within the limit.

    `counted_if_refused` says whether a refused request stays counted (anonymous endpoints)
    or is given back (authenticated callers); it changes when the next request fits, hence
    the Retry-After.
    """
    if rolling_count(counts, fraction) <= limit.requests + 1e-9:
        return Decision(allowed=True)
    return Decision(
        allowed=False,
        retry_after_seconds=retry_after(limit, counts, fraction, counted_if_refused=counted_if_refused),
    )


def retry_after(limit: Limit, counts: WindowCounts, fraction: float, *, counted_if_refused: bool) -> int:
    """Whole seconds until one more request would fit, assuming no other traffic meanwhile."""
    window = limit.window_seconds
    # The next request makes the current count this (a refused one given back leaves room).
    next_current = counts.current + (1 if counted_if_refused else 0)
    if next_current <= limit.requests and counts.previous > 0:
        # Same window: wait until the previous window's weight has decayed enough.
        needed = 1.0 - fraction - (limit.requests - next_current) / counts.previous
        wait = window * max(needed, 0.0)
    else:
        # The current window alone is full: wait for the next one, where this window's
        # count becomes the previous and must decay until one more request fits.
        previous_then = next_current - 1
        needed_then = 0.0 if previous_then == 0 else 1.0 - (limit.requests - 1) / previous_then
        wait = window * (1.0 - fraction) + window * max(needed_then, 0.0)
    return max(1, math.ceil(wait - 1e-9))


def expires_at_epoch(index: int, window_seconds: int) -> int:
    """When a counter of window `index` is no longer needed (it serves as 'previous' once)."""
    return (index + 2) * window_seconds + 60


def most_counted_before(limit: Limit, previous: int, fraction: float) -> int:
    """The largest count the current window may already hold for one more request to be
    allowed (`decide` with that request counted): the bound a conditional write asserts,
    so the count and the decision are one atomic write. Negative: nothing more fits."""
    return math.floor(limit.requests - previous * (1.0 - fraction) + 1e-9) - 1
