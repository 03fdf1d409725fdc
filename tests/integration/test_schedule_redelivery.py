"""EventBridge Scheduler delivers at least once: a fire time delivered again (its own retry, a
Lambda retry, or a delivery that arrives after the sweeper caught the fire up) finds the run
of that fire and makes no batch, for a schedule of any period; a delivery of the next fire a
little early or late (the DST rules of croniter and EventBridge may differ by the hour) is
still that fire (docs/schedules.md, Triggers)."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi.testclient import TestClient

from batchroute.clock import FixedClock
from batchroute.domain.schedules.schedules import ScheduleRun
from tests.integration.batch_pipeline_support import heartbeat_all_lanes
from tests.integration.principals import TestOrg
from tests.integration.principals import clocked_client as clocked_client  # the fixtures
from tests.integration.principals import fixed_clock as fixed_clock
from tests.integration.principals import org as org
from tests.integration.test_schedules_api import _batches, _schedule, _wiring


def _delivered(clock: FixedClock, org: TestOrg, schedule_id: str, fire_at: datetime) -> ScheduleRun:
    """EventBridge's invocation of the sweeper function for `fire_at`, as its handler fires it."""
    heartbeat_all_lanes(clock)
    return _wiring(clock).schedules.fire(org.org_id, schedule_id, fire_at, trigger="scheduler")


def _runs(client: TestClient, org: TestOrg, schedule_id: str) -> list[tuple[str, str, str]]:
    data = client.get(f"/v1/schedules/{schedule_id}/runs?limit=100", headers=org.key_headers()).json()["data"]
    return [(r["fire_at"], r["state"], r["batch_id"]) for r in reversed(data)]


def test_an_hourly_schedule_makes_one_batch_per_fire_time_whatever_is_delivered_again(
    client: TestClient, org: TestOrg, clock: FixedClock
) -> None:
    # Given an hourly schedule created at 12:00 UTC (first fire 13:00)
    sid = _schedule(client, org, expression="0 * * * *", time_zone="UTC").json()["id"]
    made: dict[str, str | None] = {}
    # When EventBridge delivers each of 13:00, 14:00 and 15:00 on time, then again a minute on
    clock.advance(hours=1)
    for hour in (13, 14, 15):
        fire_at = datetime(2026, 3, 7, hour, tzinfo=UTC)
        first = _delivered(clock, org, sid, fire_at)
        clock.advance(minutes=1)
        again = _delivered(clock, org, sid, fire_at)
        # Then the repeat is the same run and batch, labelled with its own fire time
        assert first.state == "created" and first.fire_at == f"2026-03-07T{hour}:00:00.000Z"
        assert (again.fire_at, again.batch_id) == (first.fire_at, first.batch_id)
        made[first.fire_at] = first.batch_id
        clock.advance(minutes=59)
    # When 16:00 is not delivered in time, the sweeper catches it up at 16:11, and then
    # EventBridge's delayed retry for 16:00 arrives at 16:20
    clock.advance(minutes=11)
    heartbeat_all_lanes(clock)
    assert _wiring(clock).schedules.fire_due()["created"] == [sid]
    clock.advance(minutes=9)
    late = _delivered(clock, org, sid, datetime(2026, 3, 7, 16, tzinfo=UTC))
    # Then the retry finds the sweeper's run: no batch of its own, nothing labelled 17:00
    caught_up = _runs(client, org, sid)[-1]
    assert caught_up[:2] == ("2026-03-07T16:00:00.000Z", "created")
    assert (late.fire_at, late.batch_id) == ("2026-03-07T16:00:00.000Z", caught_up[2])
    made[caught_up[0]] = caught_up[2]
    # When 17:00 is delivered on time, and again
    clock.advance(minutes=40)
    on_time = _delivered(clock, org, sid, datetime(2026, 3, 7, 17, tzinfo=UTC))
    again = _delivered(clock, org, sid, datetime(2026, 3, 7, 17, tzinfo=UTC))
    assert on_time.fire_at == again.fire_at == "2026-03-07T17:00:00.000Z"
    made[on_time.fire_at] = on_time.batch_id
    # Then one run and one batch per fire time, each labelled with its own
    runs = _runs(client, org, sid)
    assert [(fire_at, state) for fire_at, state, _ in runs] == [
        (f"2026-03-07T{hour}:00:00.000Z", "created") for hour in range(13, 18)
    ]
    assert {fire_at: batch for fire_at, _, batch in runs} == made
    assert sorted(b["id"] for b in _batches(client, org)) == sorted(str(b) for b in made.values())
    shown = client.get(f"/v1/schedules/{sid}", headers=org.key_headers()).json()
    assert (shown["last_fire_at"], shown["next_fire_at"]) == (
        "2026-03-07T17:00:00.000Z",
        "2026-03-07T18:00:00.000Z",
    )


def test_a_delivery_of_the_next_fire_off_by_up_to_an_hour_is_that_fire(
    client: TestClient, org: TestOrg, clock: FixedClock
) -> None:
    # Given a daily 02:30 New York schedule: ours fires the skipped 02:30 of 2026-03-08 at
    # 07:30 UTC (02:30 EST); say EventBridge fires it at 07:00 UTC (03:00 EDT)
    sid = _schedule(client, org).json()["id"]
    clock.advance(hours=19)
    early = _delivered(clock, org, sid, datetime(2026, 3, 8, 7, 0, tzinfo=UTC))
    # Then it is our 07:30 fire; its repeat, and the sweeper's scan, find it
    assert early.state == "created" and early.fire_at == "2026-03-08T07:30:00.000Z"
    clock.advance(hours=1)
    again = _delivered(clock, org, sid, datetime(2026, 3, 8, 7, 0, tzinfo=UTC))
    assert (again.fire_at, again.batch_id) == (early.fire_at, early.batch_id)
    assert _wiring(clock).schedules.fire_due()["created"] == []
    # And the next day's fire, delivered late, is the next day's
    clock.advance(hours=23, minutes=30)
    next_day = _delivered(clock, org, sid, datetime(2026, 3, 9, 6, 30, tzinfo=UTC))
    assert next_day.state == "created" and next_day.fire_at == "2026-03-09T06:30:00.000Z"
    assert len(_batches(client, org)) == 2
