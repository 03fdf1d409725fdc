"""One injectable clock: SLA expiry, rate-limit windows and debouncing are tested without sleeping."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class FixedClock:
    """A clock that moves only when told to (tests, benchmarks)."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        return self._now

    def advance(self, **delta: float) -> datetime:
        self._now += timedelta(**delta)
        return self._now


def isoformat(moment: datetime) -> str:
    """ISO 8601 in UTC with a Z suffix, millisecond precision."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def epoch_seconds(iso: str) -> int:
    """An ISO 8601 moment (`isoformat`'s, or with an offset) as whole Unix seconds: what a
    DynamoDB TTL holds."""
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp())
