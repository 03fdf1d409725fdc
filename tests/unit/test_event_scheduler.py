"""The AWS triggers of recurring schedules (adapters/event_scheduler.py): our expressions as
EventBridge Scheduler's, the target input the sweeper reads back, and create-or-update /
delete against an in-memory scheduler."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.exceptions import ClientError

from batchroute.adapters.event_scheduler import (
    SCHEDULED_TIME,
    EventScheduler,
    fire_request,
    scheduler_expression,
    target_input,
)
from batchroute.domain.schedules.schedules import InputSource, Schedule


def _schedule(expression: str = "30 2 * * *") -> Schedule:
    return Schedule(
        schedule_id="sched_1",
        org_id="org_1",
        name="n",
        description=None,
        state="active",
        version=1,
        expression=expression,
        time_zone="America/New_York",
        input_source=InputSource("file", file_id="file_1"),
        batch_options={},
        golden_set=None,
        created_at="2026-01-01T00:00:00.000Z",
        created_by="key_1",
        updated_at="2026-01-01T00:00:00.000Z",
        updated_by="key_1",
        anchor_at="2026-01-01T00:00:00.000Z",
        next_fire_at="2026-01-01T07:30:00.000Z",
    )


class FakeScheduler:
    def __init__(self) -> None:
        self.schedules: dict[tuple[str, str], dict[str, Any]] = {}

    def _missing(self, operation: str) -> ClientError:
        return ClientError({"Error": {"Code": "ResourceNotFoundException", "Message": "no"}}, operation)

    def create_schedule(self, **request: Any) -> None:
        if (request["GroupName"], request["Name"]) in self.schedules:  # as the service answers
            raise ClientError({"Error": {"Code": "ConflictException", "Message": "exists"}}, "CreateSchedule")
        self.schedules[request["GroupName"], request["Name"]] = request

    def update_schedule(self, **request: Any) -> None:
        if (request["GroupName"], request["Name"]) not in self.schedules:
            raise self._missing("UpdateSchedule")
        self.schedules[request["GroupName"], request["Name"]] = request

    def delete_schedule(self, *, Name: str, GroupName: str) -> None:
        if self.schedules.pop((GroupName, Name), None) is None:
            raise self._missing("DeleteSchedule")


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        ("30 2 * * *", "cron(30 2 * * ? *)"),
        ("0 9 * * mon-fri", "cron(0 9 ? * MON-FRI *)"),
        ("0 9 * * 1", "cron(0 9 ? * MON *)"),  # EventBridge's 1 is Sunday: days go as names
        ("0 9 * * 0", "cron(0 9 ? * SUN *)"),
        ("0 0 1 * *", "cron(0 0 1 * ? *)"),
        ("rate(5 minutes)", "rate(5 minutes)"),
    ],
)
def test_expressions(ours: str, theirs: str) -> None:
    """More, and a property over drawn expressions: tests/unit/test_eventbridge_cron.py."""
    assert scheduler_expression(ours) == theirs


def test_the_target_input_round_trips_through_the_fire_request() -> None:
    payload = json.loads(target_input(_schedule()))["schedule_fire"]
    assert payload == {"org_id": "org_1", "schedule_id": "sched_1", "fire_at": SCHEDULED_TIME}
    delivered = {**payload, "fire_at": "2026-03-08T07:30:00Z"}
    assert fire_request(delivered) == ("org_1", "sched_1", datetime(2026, 3, 8, 7, 30, tzinfo=UTC))


def test_put_creates_then_updates_and_remove_is_idempotent() -> None:
    fake = FakeScheduler()
    triggers = EventScheduler(group_name="g", role_arn="arn:role", target_arn="arn:fn", scheduler=fake)
    triggers.put(_schedule())
    created = fake.schedules["g", "sched_1"]
    assert created["ScheduleExpression"] == "cron(30 2 * * ? *)"
    assert created["ScheduleExpressionTimezone"] == "America/New_York"
    assert created["Target"]["Arn"] == "arn:fn" and created["Target"]["RoleArn"] == "arn:role"
    triggers.put(_schedule("rate(1 hour)"))
    updated = fake.schedules["g", "sched_1"]
    assert updated["ScheduleExpression"] == "rate(1 hour)"
    assert updated["StartDate"] == datetime(2026, 1, 1, tzinfo=UTC)
    triggers.remove("sched_1")
    triggers.remove("sched_1")
    assert fake.schedules == {}


def test_a_put_racing_another_puts_creation_updates_what_the_other_made() -> None:
    # Given a trigger another put creates between this put's update (not found yet) and its create
    fake = FakeScheduler()
    update = fake.update_schedule

    def other_created_meanwhile(**request: Any) -> None:
        fake.update_schedule = update  # type: ignore[method-assign]
        try:
            update(**request)
        finally:
            fake.schedules["g", "sched_1"] = {**request, "ScheduleExpression": "cron(0 0 1 * ? *)"}

    fake.update_schedule = other_created_meanwhile  # type: ignore[method-assign]
    triggers = EventScheduler(group_name="g", role_arn="arn:role", target_arn="arn:fn", scheduler=fake)
    # When this put creates it / Then the create's conflict is no error: its own fields stand
    triggers.put(_schedule())
    assert fake.schedules["g", "sched_1"]["ScheduleExpression"] == "cron(30 2 * * ? *)"
