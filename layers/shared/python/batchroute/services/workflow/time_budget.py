"""How long the current invocation may still run.

The SQS worker (`batchroute/worker.py`) publishes the Lambda context's remaining-time
function for the duration of each record; steps that budget their work (RunLane) read it
through `TimeBudget`. Outside a Lambda invocation (unit tests, direct calls) the budget
counts down from a fallback deadline instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

RemainingMillis = Callable[[], int]

_remaining: ContextVar[RemainingMillis | None] = ContextVar("lambda_remaining_millis", default=None)


@contextmanager
def invocation(context: Any) -> Iterator[None]:
    """Publish the Lambda context's remaining time while a record is handled."""
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    token = _remaining.set(remaining if callable(remaining) else None)
    try:
        yield
    finally:
        _remaining.reset(token)


class TimeBudget:
    """Seconds left: the Lambda's figure when one is published, else `fallback_seconds`
    from when this budget was made."""

    def __init__(
        self,
        fallback_seconds: float,
        *,
        remaining_millis: RemainingMillis | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._remaining_millis = remaining_millis or _remaining.get()
        self._monotonic = monotonic
        self._deadline = monotonic() + fallback_seconds

    def remaining(self) -> float:
        if self._remaining_millis is not None:
            return self._remaining_millis() / 1000.0
        return max(0.0, self._deadline - self._monotonic())
