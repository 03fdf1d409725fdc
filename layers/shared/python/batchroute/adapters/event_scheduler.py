"""The triggers of recurring schedules on AWS: one EventBridge Scheduler schedule per active
schedule, in the service's schedule group, managed by the API (docs/schedules.md).

Each EventBridge schedule carries the schedule's own expression, translated to EventBridge's
cron (`cron(m h dom mon dow *)`, days of the week as SUN-SAT names) or the same `rate(...)`,
and time zone (`ScheduleExpressionTimezone`) and invokes the
sweeper function with `{"schedule_fire": {org_id, schedule_id, fire_at}}`, where `fire_at`
is the scheduler's `<aws.scheduler.scheduled-time>`; the handler calls the same
`Schedules.fire` as the sweeper's scan of the due index. A paused or deleted schedule's
EventBridge schedule is deleted. The scheduler's own retries (and the sweeper's catch-up)
may deliver a fire twice: `fire` is idempotent per fire time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from batchroute.adapters.aws import shared_client
from batchroute.config import Settings
from batchroute.domain.schedules.eventbridge import eventbridge_expression
from batchroute.domain.schedules.schedules import Schedule

SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"


def scheduler_expression(expression: str) -> str:
    """Ours (`30 2 * * *`, `0 9 * * 1`, `rate(5 minutes)`) as EventBridge Scheduler's
    (`cron(30 2 * * ? *)`, `cron(0 9 ? * MON *)`): six fields, one of day-of-month /
    day-of-week `?`, the days of the week as SUN-SAT names (EventBridge numbers them 1-7 from
    Sunday, croniter 0-7), steps written out (domain/schedules/eventbridge.py). A schedule
    is saved only when its expression translates (`Schedules._checked`)."""
    return eventbridge_expression(expression)


def schedule_name(schedule_id: str) -> str:
    return schedule_id[:64]


def target_input(schedule: Schedule) -> str:
    return json.dumps(
        {
            "schedule_fire": {
                "org_id": schedule.org_id,
                "schedule_id": schedule.schedule_id,
                "fire_at": SCHEDULED_TIME,
            }
        }
    )


def fire_request(event: dict[str, Any]) -> tuple[str, str, datetime]:
    """The (org, schedule, fire time) of a scheduler invocation."""
    fire_at = datetime.fromisoformat(str(event["fire_at"]).replace("Z", "+00:00"))
    return str(event["org_id"]), str(event["schedule_id"]), fire_at


def scheduler_for(settings: Settings) -> EventScheduler | None:
    """The deployment's EventBridge Scheduler triggers, or None where no schedule group is
    configured (locally: the sweeper fires due schedules)."""
    if not (settings.schedule_group_name and settings.schedule_target_arn):
        return None
    return EventScheduler(
        group_name=settings.schedule_group_name,
        role_arn=settings.schedule_role_arn,
        target_arn=settings.schedule_target_arn,
    )


@dataclass(eq=False, repr=False, kw_only=True)
class EventScheduler:
    group_name: str
    role_arn: str
    target_arn: str
    scheduler: Any = shared_client("scheduler")

    def put(self, schedule: Schedule) -> None:
        """Create or update the schedule's trigger (an update replaces every field)."""
        request: dict[str, Any] = {
            "Name": schedule_name(schedule.schedule_id),
            "GroupName": self.group_name,
            "ScheduleExpression": scheduler_expression(schedule.expression),
            "ScheduleExpressionTimezone": schedule.time_zone,
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "State": "ENABLED",
            "Target": {
                "Arn": self.target_arn,
                "RoleArn": self.role_arn,
                "Input": target_input(schedule),
                "RetryPolicy": {"MaximumEventAgeInSeconds": 3600, "MaximumRetryAttempts": 3},
            },
            "ActionAfterCompletion": "NONE",
        }
        if schedule.expression.startswith("rate("):
            request["StartDate"] = datetime.fromisoformat(schedule.anchor_at)
        try:
            self.scheduler.update_schedule(**request)
        except ClientError as exc:
            if _code(exc) != "ResourceNotFoundException":
                raise
            try:
                self.scheduler.create_schedule(**request)
            except ClientError as again:
                if _code(again) != "ConflictException":
                    raise
                # Another put created it since (a racing sync): this one's fields go over it.
                self.scheduler.update_schedule(**request)

    def remove(self, schedule_id: str) -> None:
        try:
            self.scheduler.delete_schedule(Name=schedule_name(schedule_id), GroupName=self.group_name)
        except ClientError as exc:
            if _code(exc) != "ResourceNotFoundException":
                raise


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))
