"""The local EventBridge schedule (batchroute_tools.local.scheduler) fires the sweeper on its
rate with a Scheduled Event; time is moved by an injected clock, never by sleeping."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from batchroute import resources
from batchroute_tools.local.scheduler import DEFAULT_INTERVAL_SECONDS, SweeperSchedule

RULE_ARN = "arn:aws:events:us-east-1:123456789012:rule/batchroute-local-sweeper"


class FakeMonotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class RecordingSweeper:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.events: list[dict[str, Any]] = []

    def __call__(self, event: dict[str, Any], context: Any) -> None:
        self.events.append(event)
        if self.fail:
            raise RuntimeError("sweep failed")


def _schedule(sweeper: RecordingSweeper, clock: FakeMonotonic, interval: float = 60) -> SweeperSchedule:
    return SweeperSchedule(
        handler=sweeper,
        context_factory=object,
        interval_seconds=interval,
        rule_arn=RULE_ARN,
        account="123456789012",
        region="us-east-1",
        monotonic=clock,
        wall_clock=lambda: datetime(2026, 1, 1, 12, 0, tzinfo=UTC),
    )


def test_default_interval_is_the_declared_rate() -> None:
    assert DEFAULT_INTERVAL_SECONDS == resources.SWEEPER_RATE_MINUTES * 60


def test_sweeper_fires_at_start_then_once_per_interval() -> None:
    # Given a schedule with a one-minute rate
    clock, sweeper = FakeMonotonic(), RecordingSweeper()
    schedule = _schedule(sweeper, clock)
    # When the stack starts, then it fires once (lanes get their first heartbeat at once)
    assert schedule.tick() is True
    assert schedule.tick() is False
    assert schedule.seconds_until_due() == 60
    # And again only after another minute
    clock.now += 59
    assert schedule.tick() is False
    clock.now += 1
    assert schedule.tick() is True
    assert len(sweeper.events) == 2
    clock.now += 60
    assert schedule.tick() is True
    assert len(sweeper.events) == 3


def test_sweeper_gets_an_eventbridge_scheduled_event() -> None:
    clock, sweeper = FakeMonotonic(), RecordingSweeper()
    schedule = _schedule(sweeper, clock)
    clock.now += 60
    schedule.tick()
    (event,) = sweeper.events
    assert event["detail-type"] == "Scheduled Event"
    assert event["source"] == "aws.events"
    assert event["resources"] == [RULE_ARN]
    assert event["time"] == "2026-01-01T12:00:00Z"
    assert event["account"] == "123456789012"
    assert event["region"] == "us-east-1"
    assert event["detail"] == {}
    assert event["id"]


def test_missed_runs_do_not_burst() -> None:
    # Given a sweep that ran late by several intervals
    clock, sweeper = FakeMonotonic(), RecordingSweeper()
    schedule = _schedule(sweeper, clock)
    clock.now += 600
    # When it ticks repeatedly, then it fires once and waits a full interval again
    assert [schedule.tick() for _ in range(3)] == [True, False, False]
    assert schedule.seconds_until_due() == 60


def test_a_failing_sweep_does_not_stop_the_schedule() -> None:
    clock, sweeper = FakeMonotonic(), RecordingSweeper(fail=True)
    schedule = _schedule(sweeper, clock)
    clock.now += 60
    assert schedule.tick() is True
    clock.now += 60
    assert schedule.tick() is True
    assert len(sweeper.events) == 2
    clock.now += 60
    assert schedule.tick() is True
    assert len(sweeper.events) == 3


def test_run_returns_when_stopped() -> None:
    # Given a stop already requested, the timer loop ends without firing
    clock, sweeper = FakeMonotonic(), RecordingSweeper()
    stop = threading.Event()
    stop.set()
    _schedule(sweeper, clock).run(stop)
    assert sweeper.events == []


def test_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        _schedule(RecordingSweeper(), FakeMonotonic(), interval=0)


def test_a_rule_with_an_input_delivers_the_input_as_its_event() -> None:
    # Given the daily reconciliation rule, played locally (its input, not a Scheduled Event)
    clock, sweeper = FakeMonotonic(), RecordingSweeper()
    schedule = SweeperSchedule(
        handler=sweeper,
        context_factory=object,
        interval_seconds=resources.RECONCILIATION_RATE_HOURS * 3600,
        rule_arn=RULE_ARN,
        account="123456789012",
        region="us-east-1",
        monotonic=clock,
        rule_input=resources.RECONCILIATION_EVENT,
    )
    # When it fires at start and a day later
    assert schedule.tick() is True
    clock.now += 86_399
    assert schedule.tick() is False
    clock.now += 1
    assert schedule.tick() is True
    # Then the sweeper got the rule's input each time
    assert sweeper.events == [resources.RECONCILIATION_EVENT, resources.RECONCILIATION_EVENT]
