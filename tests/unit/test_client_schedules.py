"""The client's schedules calls (docs/client.md, docs/schedules.md) against
`httpx.MockTransport`: the method, path, query and JSON body each sends (no `Idempotency-Key`:
the routes honour none), the typed models read from the service's documents (extra fields
kept in `raw`), listings followed to their last page, the retries each write allows (a create
and a paid regression run are never repeated after a lost answer; a delete whose answer was
lost is done), sync and async."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from batchroute_client import (
    ExcludedLane,
    InternalServerError,
    Money,
    NotFoundError,
    RegressionRun,
    Schedule,
    ScheduleDeleted,
    ScheduleRun,
    ScheduleVersion,
)

from tests.unit.test_client_async import make as make_async
from tests.unit.test_client_sdk import Recorder, error
from tests.unit.test_client_settings import AT, LATER, client_for, money, ok, sent

SOURCE = {"type": "file", "file_id": "file_1"}
DEFINITION = {
    "name": "nightly",
    "description": None,
    "expression": "30 2 * * *",
    "time_zone": "America/New_York",
    "input_source": SOURCE,
    "batch_options": {"routing_mode": "cheapest"},
    "golden_set": None,
}


def schedule(schedule_id: str = "sched_1", *, state: str = "active", version: int = 1) -> dict[str, Any]:
    excluded = {
        "lane_id": "edge-eu/llama",
        "score": 0.0,
        "threshold": 1.0,
        "version": 1,
        "regression_id": "regr_1",
        "at": AT,
    }
    return {
        "id": schedule_id,
        "object": "schedule",
        **DEFINITION,
        "state": state,
        "version": version,
        "next_fire_at": None if state == "paused" else "2026-04-02T06:30:00.000Z",
        "last_fire_at": None,
        "excluded_lanes": [excluded],
        "created_at": AT,
        "created_by": "user_1",
        "updated_at": AT,
        "updated_by": "user_1",
        **LATER,
    }


def run(fire_at: str, *, batch_id: str | None = None) -> dict[str, Any]:
    failed = {"code": "insufficient_credits", "message": "Not enough credit."}
    return {
        "object": "schedule.run",
        "schedule_id": "sched_1",
        "fire_at": fire_at,
        "version": 1,
        "state": "created" if batch_id else "failed",
        "batch_id": batch_id,
        "error": None if batch_id else failed,
        "trigger": "sweeper",
        "created_at": fire_at,
    }


def version(number: int) -> dict[str, Any]:
    return {
        "object": "schedule.version",
        "schedule_id": "sched_1",
        "version": number,
        **DEFINITION,
        "created_at": AT,
        "created_by": "user_1",
    }


def regression() -> dict[str, Any]:
    lane = {
        "lane_id": "together/llama",
        "provider": "together",
        "model": "llama",
        "score": 1.0,
        "passed": True,
        "items_passed": 3,
        "items_total": 3,
        "errors": [],
        "usage": {"prompt_tokens": 30, "completion_tokens": 12},
        "cost": money("0.000042"),
    }
    return {
        "object": "schedule.regression_run",
        "schedule_id": "sched_1",
        "regression_id": "regr_2",
        "version": 1,
        "trigger": "on_demand",
        "scorer": {"type": "exact"},
        "threshold": 1.0,
        "created_at": AT,
        "completed_at": AT,
        "lanes": [lane],
        "charged": money("0.000042"),
    }


def test_schedules_create_read_list_change_pause_resume_and_delete() -> None:
    client, recorder = client_for(
        ok(schedule(), 201),
        ok(schedule()),
        ok({"object": "list", "data": [schedule()], "next_cursor": "sched_1"}),
        ok({"object": "list", "data": [schedule("sched_2")], "next_cursor": None}),
        ok(schedule(version=2)),
        ok(schedule(state="paused", version=2)),
        ok(schedule(version=2)),
        ok({"id": "sched_1", "object": "schedule", "deleted": True}),
    )
    created = client.schedules.create(
        name="nightly",
        expression="30 2 * * *",
        input_source=SOURCE,
        time_zone="America/New_York",
        batch_options={"routing_mode": "cheapest"},
    )
    got = client.schedules.get("sched_1")
    listed = list(client.schedules.list(page_size=1))
    changed = client.schedules.update("sched_1", expression="rate(6 hours)", description=None)
    paused = client.schedules.pause("sched_1")
    resumed = client.schedules.resume("sched_1")
    deleted = client.schedules.delete("sched_1")
    assert [sent(r) for r in recorder.requests] == [
        (
            "POST",
            "/v1/schedules",
            {},
            {
                "name": "nightly",
                "expression": "30 2 * * *",
                "input_source": SOURCE,
                "time_zone": "America/New_York",
                "batch_options": {"routing_mode": "cheapest"},
            },
        ),
        ("GET", "/v1/schedules/sched_1", {}, None),
        ("GET", "/v1/schedules", {"limit": "1"}, None),
        ("GET", "/v1/schedules", {"limit": "1", "cursor": "sched_1"}, None),
        ("PATCH", "/v1/schedules/sched_1", {}, {"expression": "rate(6 hours)", "description": None}),
        ("POST", "/v1/schedules/sched_1/pause", {}, None),
        ("POST", "/v1/schedules/sched_1/resume", {}, None),
        ("DELETE", "/v1/schedules/sched_1", {}, None),
    ]
    assert all("idempotency-key" not in r.headers for r in recorder.requests)
    assert isinstance(created, Schedule) and created == got and created.is_active
    assert created.excluded_lanes == [
        ExcludedLane(
            lane_id="edge-eu/llama", score=0.0, threshold=1.0, version=1, regression_id="regr_1", at=AT
        )
    ]
    assert created.raw["added_later"] == LATER["added_later"]
    assert [s.id for s in listed] == ["sched_1", "sched_2"]
    assert changed.version == 2 and not paused.is_active and paused.next_fire_at is None
    assert resumed.is_active and deleted == ScheduleDeleted(id="sched_1", deleted=True)


def test_runs_and_versions_are_read_to_their_last_page_and_benchmarks_and_regressions_typed() -> None:
    client, recorder = client_for(
        ok(
            {
                "object": "list",
                "data": [run("2026-04-02T06:30:00.000Z", batch_id="batch_1")],
                "next_cursor": "c1",
            }
        ),
        ok({"object": "list", "data": [run("2026-04-01T06:30:00.000Z")], "next_cursor": None}),
        ok({"object": "list", "data": [version(2)], "next_cursor": "2"}),
        ok({"object": "list", "data": [version(1)], "next_cursor": None}),
        ok({"object": "list", "data": [regression()]}),
        ok(regression(), 201),
    )
    runs = list(client.schedules.runs("sched_1"))
    versions = list(client.schedules.versions("sched_1", page_size=1))
    benchmarks = client.schedules.benchmarks("sched_1", 1)
    regressed = client.schedules.regress("sched_1")
    assert [sent(r)[:3] for r in recorder.requests] == [
        ("GET", "/v1/schedules/sched_1/runs", {}),
        ("GET", "/v1/schedules/sched_1/runs", {"cursor": "c1"}),
        ("GET", "/v1/schedules/sched_1/versions", {"limit": "1"}),
        ("GET", "/v1/schedules/sched_1/versions", {"limit": "1", "cursor": "2"}),
        ("GET", "/v1/schedules/sched_1/versions/1/benchmarks", {}),
        ("POST", "/v1/schedules/sched_1/regression-runs", {}),
    ]
    assert all(isinstance(r, ScheduleRun) for r in runs)
    assert [(r.state, r.batch_id) for r in runs] == [("created", "batch_1"), ("failed", None)]
    assert runs[1].error is not None and runs[1].error.code == "insufficient_credits"
    assert [v.version for v in versions] == [2, 1] and isinstance(versions[0], ScheduleVersion)
    (benchmark,) = benchmarks
    assert isinstance(benchmark, RegressionRun) and benchmark == regressed
    (lane,) = regressed.lanes
    assert lane.passed and lane.usage.prompt_tokens == 30 and lane.cost == Money("usd", "0.000042")
    assert regressed.charged.text == "0.000042 USD"


@pytest.mark.parametrize("call", ["create", "regress"])
def test_a_create_or_a_paid_regression_run_is_not_repeated_after_a_lost_answer(call: str) -> None:
    answer = ok(schedule(), 201) if call == "create" else ok(regression(), 201)
    client, recorder = client_for(error(502, "bad_gateway"), answer)
    calls = {
        "create": lambda: client.schedules.create(name="n", expression="rate(1 hour)", input_source=SOURCE),
        "regress": lambda: client.schedules.regress("sched_1"),
    }
    with pytest.raises(InternalServerError):
        calls[call]()
    assert len(recorder.requests) == 1  # a repeat would make a second schedule, or charge again


def test_a_delete_whose_answer_was_lost_is_done_and_a_first_404_raises() -> None:
    client, recorder = client_for(httpx.ReadError("reset"), error(404, "schedule_not_found"))
    assert client.schedules.delete("sched_1") == ScheduleDeleted(id="sched_1", deleted=True)
    assert len(recorder.requests) == 2
    client, recorder = client_for(error(404, "schedule_not_found"))
    with pytest.raises(NotFoundError) as missing:
        client.schedules.delete("sched_9")
    assert missing.value.code == "schedule_not_found" and len(recorder.requests) == 1


def test_the_async_client_awaits_the_same_calls_and_iterates_the_listings() -> None:
    recorder = Recorder(
        ok(schedule()),
        ok(
            {
                "object": "list",
                "data": [run("2026-04-02T06:30:00.000Z", batch_id="batch_1")],
                "next_cursor": None,
            }
        ),
    )

    async def scenario() -> tuple[Schedule, list[ScheduleRun]]:
        async with make_async(recorder, []) as client:
            paused = await client.schedules.pause("sched_1")
            runs = [r async for r in client.schedules.runs("sched_1")]
            return paused, runs

    paused, runs = asyncio.run(scenario())
    assert paused.id == "sched_1" and [r.batch_id for r in runs] == ["batch_1"]
    assert [sent(r)[:2] for r in recorder.requests] == [
        ("POST", "/v1/schedules/sched_1/pause"),
        ("GET", "/v1/schedules/sched_1/runs"),
    ]
