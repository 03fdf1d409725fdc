"""The EventBridge schedule that fires the sweeper, played locally by a timer thread.

Like a `rate(N minutes)` rule, the first run comes one interval after start, then
one every interval. The clock is injected so tests move time instead of sleeping. A rule with
a constant input (the daily payments reconciliation, docs/payments.md) delivers that input as
the event, as EventBridge does.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from batchroute import resources
from batchroute_tools.local.lambda_runtime import Handler

log = logging.getLogger("local.scheduler")

DEFAULT_INTERVAL_SECONDS = resources.SWEEPER_RATE_MINUTES * 60


class SweeperSchedule:
    def __init__(
        self,
        *,
        handler: Handler,
        context_factory: Callable[[], Any],
        interval_seconds: float,
        rule_arn: str,
        account: str,
        region: str,
        monotonic: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        rule_input: Mapping[str, Any] | None = None,
    ) -> None:
        if interval_seconds <= 0:
            raise ValueError("the sweeper interval must be positive")
        self.handler = handler
        self.context_factory = context_factory
        self.interval_seconds = interval_seconds
        self.rule_arn = rule_arn
        self.account = account
        self.region = region
        self._monotonic = monotonic
        self._wall_clock = wall_clock
        self.rule_input = rule_input
        # EventBridge schedules tick from creation; firing at start also gives lanes their
        # first heartbeat before the first quote.
        self._next_run = monotonic()

    def seconds_until_due(self) -> float:
        return max(0.0, self._next_run - self._monotonic())

    def tick(self) -> bool:
        """Fire the sweeper if it is due; return whether it fired. Never raises for the handler."""
        now = self._monotonic()
        if now < self._next_run:
            return False
        # Schedule from now, not from the missed slot: a slow sweep never causes a burst.
        self._next_run = now + self.interval_seconds
        try:
            self.handler(self.scheduled_event(), self.context_factory())
        except Exception:
            log.exception("the sweeper raised; it runs again in %ss", self.interval_seconds)
        return True

    def scheduled_event(self) -> dict[str, Any]:
        """The event an EventBridge scheduled rule delivers to its Lambda target."""
        if self.rule_input is not None:
            return dict(self.rule_input)
        return {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": "Scheduled Event",
            "source": "aws.events",
            "account": self.account,
            "time": self._wall_clock().astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": self.region,
            "resources": [self.rule_arn],
            "detail": {},
        }

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(self.seconds_until_due()):
            self.tick()

    def start(self, stop: threading.Event) -> threading.Thread:
        thread = threading.Thread(target=self.run, args=(stop,), name="sweeper-schedule", daemon=True)
        thread.start()
        return thread
