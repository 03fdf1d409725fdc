"""Recurring schedules over HTTP (docs/schedules.md): CRUD and versions, validation with field
paths, another org's schedule (404), roles, pause/resume, runs; firing with the injected
clock (a duplicated trigger makes one batch, a DST change in the schedule's zone, a run that
fails for lack of credits), and the golden-set regression that excludes a lane answering
wrongly (`regression_failed` in the next fired batch's plan)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.aws import client as aws_client
from batchroute.adapters.dynamo.schedules import ScheduleStore
from batchroute.clock import FixedClock
from batchroute.config import get_settings
from batchroute.domain.accounts.access import Principal
from batchroute.domain.batches.record import BatchRecord
from batchroute.domain.schedules.schedules import MAX_SCHEDULES_PER_ORG, Schedule
from batchroute.wiring import Wiring, wiring_for
from batchroute_tools.local.lambda_runtime import context_for, load_handler
from tests.integration.batch_pipeline_support import LLAMA, heartbeat_all_lanes
from tests.integration.customer_bucket import BUCKET, CustomerS3
from tests.integration.principals import START, TestOrg, new_org
from tests.integration.principals import clocked_client as clocked_client  # the fixtures
from tests.integration.principals import fixed_clock as fixed_clock
from tests.integration.principals import org as org

WRONG_LANE = f"edge-eu/{LLAMA}"


def fire_in_an_hour(
    client: TestClient, org: TestOrg, clock: FixedClock, schedule_id: str
) -> tuple[BatchRecord, dict[str, str]]:
    """An hour on, the due schedule fires: its batch, and the code of each lane its plan rejected."""
    clock.advance(hours=1)
    heartbeat_all_lanes(clock)
    assert _wiring(clock).schedules.fire_due()["created"] == [schedule_id]
    run = client.get(f"/v1/schedules/{schedule_id}/runs", headers=org.key_headers()).json()["data"][0]
    record = _wiring(clock).batch_records.get(run["batch_id"])
    assert record is not None and record.plan is not None
    rejected = {
        lane["lane_id"]: lane["rejection"]["code"]
        for group in record.plan["groups"]
        for lane in group["rejected_lanes"]
    }
    return record, rejected


def _wiring(clock: FixedClock) -> Wiring:
    return wiring_for(get_settings(), clock)


def _item(n: int, text: str = "Summarize the quarterly report.") -> dict[str, Any]:
    return {
        "customer_item_id": f"item-{n}",
        "operation": "responses",
        "model": LLAMA,
        "input": {"messages": [{"role": "user", "content": text}]},
    }


def _file(client: TestClient, org: TestOrg, lines: int = 2) -> str:
    body = "".join(json.dumps(_item(n)) + "\n" for n in range(lines)).encode()
    response = client.post(
        "/v1/files", files={"file": ("items.jsonl", body, "application/jsonl")}, headers=org.key_headers()
    )
    assert response.status_code in (200, 201), response.text
    return str(response.json()["file"]["id"])


def _schedule(client: TestClient, org: TestOrg, **fields: Any) -> Any:
    role = fields.pop("role", "owner")
    body = {
        "name": "nightly",
        "expression": "30 2 * * *",
        "time_zone": "America/New_York",
        "input_source": {"type": "file", "file_id": fields.pop("file_id", None) or _file(client, org)},
        **fields,
    }
    return client.post("/v1/schedules", json=body, headers=org.key_headers(role))


def _error(response: Any) -> dict[str, Any]:
    return dict(response.json()["error"])


# -- CRUD ------------------------------------------------------------------------------------
def test_create_read_list_and_versions(client: TestClient, org: TestOrg) -> None:
    # Given a daily 02:30 schedule in New York, created on 2026-03-07 at noon UTC
    created = _schedule(client, org, batch_options={"routing_mode": "cheapest", "metadata": {"team": "ops"}})
    # Then 201, version 1, active, its next fire on the spring-forward day (02:30 skipped)
    assert created.status_code == 201, created.text
    schedule = created.json()
    assert schedule["id"].startswith("sched_") and schedule["version"] == 1
    assert schedule["state"] == "active"
    assert schedule["next_fire_at"] == "2026-03-08T07:30:00.000Z"
    assert schedule["created_by"] in org.key_ids.values()  # who created it (a key here)
    fetched = client.get(f"/v1/schedules/{schedule['id']}", headers=org.key_headers("member"))
    assert fetched.status_code == 200 and fetched.json()["name"] == "nightly"
    # When it is changed: a new version, the old one still listed
    changed = client.patch(
        f"/v1/schedules/{schedule['id']}", json={"expression": "rate(6 hours)"}, headers=org.key_headers()
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["version"] == 2 and changed.json()["expression"] == "rate(6 hours)"
    versions = client.get(f"/v1/schedules/{schedule['id']}/versions", headers=org.key_headers()).json()[
        "data"
    ]
    assert [(v["version"], v["expression"]) for v in versions] == [(2, "rate(6 hours)"), (1, "30 2 * * *")]
    # And they page with a cursor too, newest first
    path = f"/v1/schedules/{schedule['id']}/versions"
    newest = client.get(f"{path}?limit=1", headers=org.key_headers()).json()
    assert [v["version"] for v in newest["data"]] == [2] and newest["next_cursor"] == "2"
    oldest = client.get(f"{path}?limit=1&cursor=2", headers=org.key_headers()).json()
    assert [v["version"] for v in oldest["data"]] == [1] and oldest["next_cursor"] is None
    for cursor in ("v2", "²", "0"):  # a superscript is a digit to isdigit(), not to int()
        assert client.get(path, params={"cursor": cursor}, headers=org.key_headers()).status_code == 400
    # And the list pages with a cursor
    file_id = _file(client, org)
    for _ in range(2):
        assert _schedule(client, org, file_id=file_id).status_code == 201
    first = client.get("/v1/schedules?limit=2", headers=org.key_headers()).json()
    assert len(first["data"]) == 2 and first["next_cursor"]
    rest = client.get(
        f"/v1/schedules?limit=2&cursor={first['next_cursor']}", headers=org.key_headers()
    ).json()
    assert len(rest["data"]) == 1 and rest["next_cursor"] is None
    assert schedule["id"] in {s["id"] for s in first["data"] + rest["data"]}
    # When it is deleted, it is gone
    deleted = client.delete(f"/v1/schedules/{schedule['id']}", headers=org.key_headers())
    assert deleted.status_code == 200 and deleted.json()["deleted"] is True
    assert client.get(f"/v1/schedules/{schedule['id']}", headers=org.key_headers()).status_code == 404


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"expression": "* * * * *"}, "expression"),
        ({"expression": "rate(1 minute)"}, "expression"),
        ({"time_zone": "Mars/Olympus"}, "time_zone"),
        ({"name": ""}, "name"),
        ({"batch_options": {"items": []}}, "batch_options.items"),
        ({"batch_options": {"routing_mode": "fastest"}}, "batch_options.routing_mode"),
        (
            {"batch_options": {"webhook": {"url": "http://10.0.0.1/x", "secret": "long-enough"}}},
            "batch_options.webhook.url",
        ),
        (  # a sealed secret is never taken from a body (it skipped the URL check before)
            {"batch_options": {"webhook": {"url": "http://10.0.0.1/x", "secret_sealed": "AQID"}}},
            "batch_options.webhook.secret_sealed",
        ),
        ({"golden_set": {"model": LLAMA, "items": [], "scorer": "exact"}}, "golden_set.items"),
        (
            {"golden_set": {"model": LLAMA, "items": [{"input": "hi", "expected": 3}], "scorer": "exact"}},
            "golden_set.items[0].expected",
        ),
        (
            {"golden_set": {"model": "nope", "items": [{"input": "a", "expected": "b"}], "scorer": "exact"}},
            "golden_set.model",
        ),
        (  # an embeddings model gives no text answer to score: its regression would never run
            {
                "golden_set": {
                    "model": "text-embedding-3-small",
                    "items": [{"input": "a", "expected": "b"}],
                    "scorer": "exact",
                }
            },
            "golden_set.model",
        ),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_validation_errors_name_the_field(
    client: TestClient, org: TestOrg, fields: dict[str, Any], field: str
) -> None:
    response = _schedule(client, org, **fields)
    assert response.status_code == 400, response.text
    error = _error(response)
    assert error["details"]["field"] == field, error


def test_sources_must_exist_in_the_org(client: TestClient, org: TestOrg) -> None:
    missing = client.post(
        "/v1/schedules",
        json={
            "name": "x",
            "expression": "rate(1 hour)",
            "input_source": {"type": "file", "file_id": "file_nope"},
        },
        headers=org.key_headers(),
    )
    assert missing.status_code == 404 and _error(missing)["code"] == "file_not_found"
    bad_source = client.post(
        "/v1/schedules",
        json={"name": "x", "expression": "rate(1 hour)", "input_source": {"type": "ftp"}},
        headers=org.key_headers(),
    )
    assert bad_source.status_code == 400 and _error(bad_source)["details"]["field"] == "input_source.type"
    no_target = client.post(
        "/v1/schedules",
        json={
            "name": "x",
            "expression": "rate(1 hour)",
            "input_source": {"type": "bucket_prefix", "delivery_target_id": "dt_nope", "prefix": "in/"},
        },
        headers=org.key_headers(),
    )
    assert no_target.status_code == 404 and _error(no_target)["code"] == "delivery_target_not_found"


def test_another_orgs_schedule_is_not_found(client: TestClient, org: TestOrg) -> None:
    schedule = _schedule(client, org).json()
    other = new_org(credit_usd="10")
    for method, path in (
        ("GET", f"/v1/schedules/{schedule['id']}"),
        ("PATCH", f"/v1/schedules/{schedule['id']}"),
        ("DELETE", f"/v1/schedules/{schedule['id']}"),
        ("POST", f"/v1/schedules/{schedule['id']}/pause"),
        ("GET", f"/v1/schedules/{schedule['id']}/runs"),
        ("GET", f"/v1/schedules/{schedule['id']}/versions"),
        ("POST", f"/v1/schedules/{schedule['id']}/regression-runs"),
    ):
        body = {"name": "stolen"} if method == "PATCH" else None
        response = client.request(method, path, json=body, headers=other.key_headers())
        assert response.status_code == 404, (method, path, response.text)
        assert _error(response)["code"] == "schedule_not_found"
    # And another org's file cannot be a source
    stolen = _schedule(client, other, file_id=schedule["input_source"]["file_id"])
    assert stolen.status_code == 403


def test_roles(client: TestClient, org: TestOrg) -> None:
    # billing reads batches but may not create them: it reads schedules, never manages them
    assert _schedule(client, org, role="billing").status_code == 403
    made = _schedule(client, org, role="member")
    assert made.status_code == 201
    sid = made.json()["id"]
    assert client.get(f"/v1/schedules/{sid}", headers=org.key_headers("billing")).status_code == 200
    for method, path in (("POST", f"/v1/schedules/{sid}/pause"), ("DELETE", f"/v1/schedules/{sid}")):
        denied = client.request(method, path, headers=org.key_headers("billing"))
        assert denied.status_code == 403 and _error(denied)["code"] == "permission_denied"
    assert client.get("/v1/schedules").status_code == 401


def test_pause_and_resume(client: TestClient, org: TestOrg, clock: FixedClock) -> None:
    sid = _schedule(client, org).json()["id"]
    paused = client.post(f"/v1/schedules/{sid}/pause", headers=org.key_headers())
    assert paused.status_code == 200 and paused.json()["state"] == "paused"
    assert paused.json()["next_fire_at"] is None
    # Nothing fires while paused, even long past the fire time
    clock.advance(days=3)
    heartbeat_all_lanes(clock)
    assert _wiring(clock).schedules.fire_due()["created"] == []
    resumed = client.post(f"/v1/schedules/{sid}/resume", headers=org.key_headers())
    assert resumed.json()["state"] == "active"
    assert resumed.json()["next_fire_at"] == "2026-03-11T06:30:00.000Z"  # from now, not made up
    assert client.get(f"/v1/schedules/{sid}/runs", headers=org.key_headers()).json()["data"] == []


# -- firing ----------------------------------------------------------------------------------
def _batches(client: TestClient, org: TestOrg) -> list[dict[str, Any]]:
    return list(client.get("/v1/batches?limit=100", headers=org.key_headers()).json()["data"])


def test_a_firing_creates_one_batch_even_when_the_trigger_repeats(
    client: TestClient, org: TestOrg, clock: FixedClock
) -> None:
    # Given a daily 02:30 New York schedule
    schedule = _schedule(client, org, batch_options={"metadata": {"source": "nightly"}}).json()
    # When the clock passes its first fire (the spring-forward day) and the sweeper looks
    clock.advance(hours=20)
    heartbeat_all_lanes(clock)
    fired = _wiring(clock).schedules.fire_due()
    # Then one batch is created and the run records it
    assert fired["created"] == [schedule["id"]]
    runs = client.get(f"/v1/schedules/{schedule['id']}/runs", headers=org.key_headers()).json()["data"]
    assert [(r["fire_at"], r["state"], r["version"]) for r in runs] == [
        ("2026-03-08T07:30:00.000Z", "created", 1)
    ]
    batch_id = runs[0]["batch_id"]
    assert [b["id"] for b in _batches(client, org)] == [batch_id]
    assert _batches(client, org)[0]["metadata"] == {"source": "nightly"}
    assert _batches(client, org)[0]["schedule"] == {"id": schedule["id"], "version": 1}
    # When EventBridge delivers the same fire again (and the sweeper scans again)
    again = _wiring(clock).schedules.fire(
        org.org_id, schedule["id"], datetime(2026, 3, 8, 7, 30, tzinfo=UTC), trigger="scheduler"
    )
    assert _wiring(clock).schedules.fire_due()["created"] == []
    # Then it is the same run and batch: still one batch
    assert again.batch_id == batch_id
    assert [b["id"] for b in _batches(client, org)] == [batch_id]
    # And the record says which schedule and version made it
    record = _wiring(clock).batch_records.get(batch_id)
    assert record is not None and (record.schedule_id, record.schedule_version) == (schedule["id"], 1)
    # And the schedule moved on to the next day, 02:30 EDT
    current = client.get(f"/v1/schedules/{schedule['id']}", headers=org.key_headers()).json()
    assert current["next_fire_at"] == "2026-03-09T06:30:00.000Z"
    assert current["last_fire_at"] == "2026-03-08T07:30:00.000Z"


def test_a_schedule_deleted_while_it_fires_leaves_no_run_behind(
    client: TestClient, org: TestOrg, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a schedule due, whose firing is deleted (with its history) while it makes its batch
    sid = _schedule(client, org).json()["id"]
    clock.advance(hours=20)
    heartbeat_all_lanes(clock)
    schedules = _wiring(clock).schedules
    make_batch = schedules._create_batch

    def deleted_meanwhile(schedule: Schedule, fire_at: str) -> str:
        batch_id = make_batch(schedule, fire_at)
        assert client.delete(f"/v1/schedules/{sid}", headers=org.key_headers()).status_code == 200
        return batch_id

    monkeypatch.setattr(schedules, "_create_batch", deleted_meanwhile)
    # When it fires
    (fired,) = schedules.fire_due()["created"]
    # Then its run is not written back under the deleted schedule: nothing of it is left
    assert fired == sid
    assert schedules.store.run(sid, "2026-03-08T07:30:00.000Z") is None
    assert client.get(f"/v1/schedules/{sid}", headers=org.key_headers()).status_code == 404


def test_fires_across_the_dst_change_in_the_schedules_zone(
    client: TestClient, org: TestOrg, clock: FixedClock
) -> None:
    # Given a 02:30 New York schedule and the sweeper running through 2026-03-07..10, every
    # other hour (a run records the time it was due, however late it is swept)
    sid = _schedule(client, org).json()["id"]
    wiring = _wiring(clock)
    for _ in range(3 * 12):
        clock.advance(hours=2)
        heartbeat_all_lanes(clock, rewrite=True)
        wiring.schedules.fire_due()
    runs = client.get(f"/v1/schedules/{sid}/runs", headers=org.key_headers()).json()["data"]
    # Then once a day: the skipped 02:30 fires once at 03:30 EDT, then 02:30 EDT
    assert [r["fire_at"] for r in reversed(runs)] == [
        "2026-03-08T07:30:00.000Z",
        "2026-03-09T06:30:00.000Z",
        "2026-03-10T06:30:00.000Z",
    ]
    assert {r["state"] for r in runs} == {"created"}
    assert len(_batches(client, org)) == 3


def test_a_firing_without_credits_fails_and_the_schedule_goes_on(
    client: TestClient, clock: FixedClock
) -> None:
    poor = new_org(credit_usd="0")
    sid = _schedule(client, poor, expression="rate(1 hour)").json()["id"]
    clock.advance(hours=1)
    heartbeat_all_lanes(clock)
    fired = _wiring(clock).schedules.fire_due()
    assert fired["failed"] == [sid]
    run = client.get(f"/v1/schedules/{sid}/runs", headers=poor.key_headers()).json()["data"][0]
    assert run["state"] == "failed" and run["error"]["code"] == "insufficient_credits"
    assert run["batch_id"] is None
    schedule = client.get(f"/v1/schedules/{sid}", headers=poor.key_headers()).json()
    assert schedule["next_fire_at"] == "2026-03-07T14:00:00.000Z"


def test_the_sweeper_fires_due_schedules(client: TestClient, org: TestOrg, clock: FixedClock) -> None:
    sid = _schedule(client, org, expression="rate(5 minutes)").json()["id"]
    clock.advance(minutes=5)
    outcome = _wiring(clock).sweeper.sweep()
    assert outcome["schedules"]["created"] == [sid]


# -- golden sets -----------------------------------------------------------------------------
def _golden(threshold: float = 1.0) -> dict[str, Any]:
    return {
        "model": LLAMA,
        "items": [
            {"input": f"Say something [simulate:wrong:edge-eu] #{n}", "expected": "Simulated answer"}
            for n in range(3)
        ],
        "scorer": {"type": "contains"},
        "threshold": threshold,
    }


def test_golden_set_excludes_the_lane_that_answers_wrongly(
    client: TestClient, org: TestOrg, clock: FixedClock
) -> None:
    # Given a schedule with a golden set that edge-eu answers wrongly
    created = _schedule(client, org, expression="rate(1 hour)", golden_set=_golden())
    assert created.status_code == 201, created.text
    schedule = created.json()
    # Then the version's regression run scored every candidate lane, edge-eu at 0
    benchmarks = client.get(
        f"/v1/schedules/{schedule['id']}/versions/1/benchmarks", headers=org.key_headers()
    ).json()["data"]
    assert len(benchmarks) == 1 and benchmarks[0]["trigger"] == "version_change"
    # the shares read back as the floats they are, wherever they are shown
    versions = client.get(f"/v1/schedules/{schedule['id']}/versions", headers=org.key_headers()).json()
    assert type(versions["data"][0]["golden_set"]["threshold"]) is float
    assert (
        type(
            client.get(f"/v1/schedules/{schedule['id']}", headers=org.key_headers()).json()["golden_set"][
                "threshold"
            ]
        )
        is float
    )
    assert {type(lane["score"]) for lane in benchmarks[0]["lanes"]} == {float}
    scores = {lane["lane_id"]: (lane["score"], lane["passed"]) for lane in benchmarks[0]["lanes"]}
    assert scores[WRONG_LANE] == (0, False)
    assert all(passed for lane_id, (_, passed) in scores.items() if lane_id != WRONG_LANE)
    assert float(benchmarks[0]["charged"]["amount"]) > 0
    # And edge-eu is excluded from the schedule's routing
    assert [e["lane_id"] for e in schedule["excluded_lanes"]] == [WRONG_LANE]
    # When the schedule fires, its batch routes around edge-eu with `regression_failed`
    record, rejected = fire_in_an_hour(client, org, clock, schedule["id"])
    assert rejected[WRONG_LANE] == "regression_failed"
    selected = [lane["lane_id"] for group in record.plan["groups"] for lane in group["selected_lanes"]]
    assert WRONG_LANE not in selected
    # When the golden set no longer trips edge-eu, a run on demand admits it again
    fixed = {**_golden(), "items": [{"input": "Say something", "expected": "Simulated answer"}]}
    patched = client.patch(
        f"/v1/schedules/{schedule['id']}", json={"golden_set": fixed}, headers=org.key_headers()
    )
    assert patched.status_code == 200 and patched.json()["excluded_lanes"] == []
    clock.advance(seconds=1)  # runs list newest first (their ids sort by time)
    again = client.post(f"/v1/schedules/{schedule['id']}/regression-runs", headers=org.key_headers())
    assert again.status_code == 201 and again.json()["trigger"] == "on_demand"
    v2 = client.get(f"/v1/schedules/{schedule['id']}/versions/2/benchmarks", headers=org.key_headers()).json()
    assert [b["trigger"] for b in v2["data"]] == ["on_demand", "version_change"]


def test_a_patch_that_changes_nothing_makes_no_version_and_runs_no_paid_regression(
    client: TestClient, org: TestOrg
) -> None:
    # Given a schedule with a golden set: version 1 and its version-change run
    schedule = _schedule(client, org, golden_set=_golden(), description="nightly ops").json()
    path = f"/v1/schedules/{schedule['id']}"
    balance = client.get("/v1/usage", headers=org.key_headers()).json()
    # When it is patched with nothing, or with what it already holds
    same = {"name": "nightly", "expression": "30 2 * * *", "description": "nightly ops"}
    for body in ({}, same, {"golden_set": schedule["golden_set"]}):
        patched = client.patch(path, json=body, headers=org.key_headers())
        # Then it is answered as it is: still version 1, one benchmark, nothing more charged
        assert patched.status_code == 200, patched.text
        assert patched.json()["version"] == 1 and patched.json()["updated_at"] == schedule["updated_at"]
    versions = client.get(f"{path}/versions", headers=org.key_headers()).json()["data"]
    assert [v["version"] for v in versions] == [1]
    benchmarks = client.get(f"{path}/versions/1/benchmarks", headers=org.key_headers()).json()["data"]
    assert len(benchmarks) == 1
    assert client.get("/v1/usage", headers=org.key_headers()).json() == balance
    # And a real change still makes version 2
    changed = client.patch(path, json={"description": "nightly"}, headers=org.key_headers())
    assert changed.json()["version"] == 2


def test_a_patch_resending_the_webhook_and_secret_it_holds_makes_no_version(
    client: TestClient, org: TestOrg
) -> None:
    # Given a schedule whose batches call a webhook (its secret stored sealed)
    webhook = {"url": "https://93.184.215.14/batches", "secret": "whsec-long-enough-1"}
    created = _schedule(client, org, batch_options={"webhook": webhook})
    assert created.status_code == 201, created.text
    path = f"/v1/schedules/{created.json()['id']}"
    # When a PATCH sends the same webhook and secret again (a client that resends its form)
    same = client.patch(path, json={"batch_options": {"webhook": webhook}}, headers=org.key_headers())
    # Then nothing changed: still version 1 (sealing it anew must not look like a change)
    assert same.status_code == 200, same.text
    assert same.json()["version"] == 1 and same.json()["updated_at"] == created.json()["updated_at"]
    # And another secret is a change: version 2
    rotated = {"batch_options": {"webhook": {**webhook, "secret": "whsec-long-enough-2"}}}
    assert client.patch(path, json=rotated, headers=org.key_headers()).json()["version"] == 2


def test_a_batch_not_made_by_the_schedule_is_not_excluded(client: TestClient, org: TestOrg) -> None:
    assert _schedule(client, org, golden_set=_golden()).status_code == 201
    batch = client.post(
        "/v1/batches",
        json={"items": [_item(0)]},
        headers={**org.key_headers(), "Idempotency-Key": "plain-batch-1"},
    )
    assert batch.status_code == 202, batch.text
    record = _wiring(FixedClock(START)).batch_records.get(batch.json()["batch"]["id"])
    assert record is not None and record.plan is not None
    codes = {lane["rejection"]["code"] for group in record.plan["groups"] for lane in group["rejected_lanes"]}
    assert "regression_failed" not in codes


def test_regression_run_needs_a_golden_set_and_credits(client: TestClient, clock: FixedClock) -> None:
    poor = new_org(credit_usd="0")
    sid = _schedule(client, poor).json()["id"]
    none = client.post(f"/v1/schedules/{sid}/regression-runs", headers=poor.key_headers())
    assert none.status_code == 409 and _error(none)["code"] == "no_golden_set"
    with_set = client.patch(
        f"/v1/schedules/{sid}", json={"golden_set": _golden()}, headers=poor.key_headers()
    )
    assert with_set.status_code == 200  # the version is saved; its run could not be paid
    unpaid = client.post(f"/v1/schedules/{sid}/regression-runs", headers=poor.key_headers())
    assert unpaid.status_code == 402 and _error(unpaid)["code"] == "insufficient_credits"


def test_the_eventbridge_trigger_fires_through_the_sweeper_function(client: TestClient, org: TestOrg) -> None:
    # Given a schedule, and lanes heartbeating now (the deployed function runs on the system clock)
    sid = _schedule(client, org).json()["id"]
    heartbeat_all_lanes()
    settings = get_settings()
    handler = load_handler("sweeper")
    context = context_for("sweeper", prefix=settings.resource_prefix, region=settings.aws_region, account="1")
    # When EventBridge Scheduler invokes the sweeper function for a fire time, twice
    event = {"schedule_fire": {"org_id": org.org_id, "schedule_id": sid, "fire_at": "2026-03-08T07:30:00Z"}}
    first = handler(event, context)
    second = handler(event, context)
    # Then one run and one batch
    assert first["state"] == "created" and first["fire_at"] == "2026-03-08T07:30:00.000Z"
    assert second["batch_id"] == first["batch_id"]
    assert [b["id"] for b in _batches(client, org)] == [first["batch_id"]]


def test_a_pause_racing_a_regressions_exclusions_keeps_them(
    client: TestClient, org: TestOrg, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a schedule, and a regression run that excludes a lane after a pause read the
    # schedule and before it writes it back
    sid = _schedule(client, org).json()["id"]
    exclusion = {
        "score": 0.2,
        "threshold": 0.9,
        "version": 1,
        "regression_id": "reg_1",
        "at": START.isoformat(),
    }
    write = ScheduleStore.replace
    raced: list[str] = []

    def excluded_first(self: ScheduleStore, schedule: Schedule, **kwargs: Any) -> bool:
        if not raced:
            raced.append(schedule.schedule_id)
            self.set_exclusions(schedule, {WRONG_LANE: exclusion})  # type: ignore[dict-item]
        return write(self, schedule, **kwargs)

    monkeypatch.setattr(ScheduleStore, "replace", excluded_first)
    # When the schedule is paused
    answer = client.post(f"/v1/schedules/{sid}/pause", headers=org.key_headers())
    # Then it is paused, and the lane stays excluded
    assert answer.status_code == 200, answer.text
    assert raced == [sid] and answer.json()["state"] == "paused"
    shown = client.get(f"/v1/schedules/{sid}", headers=org.key_headers()).json()
    assert shown["state"] == "paused"
    assert [lane["lane_id"] for lane in shown["excluded_lanes"]] == [WRONG_LANE]
    assert [lane["lane_id"] for lane in answer.json()["excluded_lanes"]] == [WRONG_LANE]


def test_a_schedule_written_before_revisions_is_changed_and_endless_interference_is_a_409(
    client: TestClient, org: TestOrg, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a schedule stored before its item counted revisions
    sid = _schedule(client, org).json()["id"]
    store = _wiring(FixedClock(START)).schedule_store
    key = {"pk": {"S": f"ORG#{org.org_id}"}, "sk": {"S": f"SCHEDULE#{sid}"}}
    store.dynamodb.update_item(TableName=store.table_name, Key=key, UpdateExpression="REMOVE revision")
    # When it is paused / Then the pause is written, and counted
    assert client.post(f"/v1/schedules/{sid}/pause", headers=org.key_headers()).status_code == 200
    stored = store.get(org.org_id, sid)
    assert stored is not None and (stored.state, stored.revision) == ("paused", 1)
    # When every write of a resume finds another write came first
    attempts: list[int] = []

    def always_raced(self: ScheduleStore, schedule: Schedule, **kwargs: Any) -> bool:
        attempts.append(schedule.revision)
        return False

    monkeypatch.setattr(ScheduleStore, "replace", always_raced)
    answer = client.post(f"/v1/schedules/{sid}/resume", headers=org.key_headers())
    # Then it is tried three times on a fresh read, then answered a retryable 409
    assert answer.status_code == 409 and answer.json()["error"]["code"] == "concurrent_update"
    assert attempts == [1, 1, 1]


def test_an_eventbridge_trigger_that_outlived_its_schedule_removes_itself_when_it_fires(
    client: TestClient, org: TestOrg
) -> None:
    # Given a deleted schedule whose EventBridge trigger is still there (its delete died before
    # removing it, or an update put it back after the delete)
    sid = _schedule(client, org).json()["id"]
    assert client.delete(f"/v1/schedules/{sid}", headers=org.key_headers()).status_code == 200
    removed: list[str] = []

    class Triggers:
        def put(self, schedule: Schedule) -> None:
            raise AssertionError(f"no trigger is put for {schedule.schedule_id}")

        def remove(self, schedule_id: str) -> None:
            removed.append(schedule_id)

    schedules = replace(_wiring(FixedClock(START)).schedules, triggers=Triggers())
    # When it fires
    fire_at = datetime(2026, 3, 8, 7, 30, tzinfo=UTC)
    run = schedules.fire(org.org_id, sid, fire_at, trigger="scheduler")
    # Then nothing runs, and the trigger is removed
    assert run.state == "skipped" and run.batch_id is None and removed == [sid]
    assert _batches(client, org) == []
    # while the sweeper's catch-up (which fires only what the schedules' index holds) removes none
    assert schedules.fire(org.org_id, sid, fire_at, trigger="sweeper").state == "skipped"
    assert removed == [sid]


def test_an_org_keeps_at_most_its_limit_of_schedules(
    client: TestClient, org: TestOrg, clock: FixedClock
) -> None:
    schedules = _wiring(clock).schedules
    schedules.max_schedules = 2
    try:
        # Given an org with two schedules, its limit
        first = _schedule(client, org).json()["id"]
        assert _schedule(client, org, name="second").status_code == 201
        # When it creates a third / Then 409 schedule_limit, naming the limit, and nothing is kept
        full = _schedule(client, org, name="third")
        assert full.status_code == 409, full.text
        assert _error(full) == {**_error(full), "code": "schedule_limit", "details": {"limit": 2}}
        listed = client.get("/v1/schedules", headers=org.key_headers()).json()["data"]
        assert sorted(s["name"] for s in listed) == ["nightly", "second"]
        # And a deleted schedule frees its place
        assert client.delete(f"/v1/schedules/{first}", headers=org.key_headers()).status_code == 200
        assert _schedule(client, org, name="third").status_code == 201
    finally:
        schedules.max_schedules = MAX_SCHEDULES_PER_ORG


def test_a_schedule_made_before_schedules_were_counted_is_deleted(client: TestClient, org: TestOrg) -> None:
    # Given a schedule whose org has no count yet (made before the limit was kept)
    sid = _schedule(client, org).json()["id"]
    controls = aws_client("dynamodb")
    table = get_settings().table_name("controls")
    controls.delete_item(TableName=table, Key={"pk": {"S": f"ORG#{org.org_id}"}, "sk": {"S": "SCHEDULES"}})
    # When it is deleted / Then it is gone, and the org counts from zero again
    assert client.delete(f"/v1/schedules/{sid}", headers=org.key_headers()).status_code == 200
    assert client.get(f"/v1/schedules/{sid}", headers=org.key_headers()).status_code == 404
    assert client.delete(f"/v1/schedules/{sid}", headers=org.key_headers()).status_code == 404
    assert _schedule(client, org).status_code == 201


class LiveTriggers:
    """EventBridge Scheduler as the service sees it: the triggers there are now. `on_remove`
    runs before the first remove lands (another request's write and sync in between)."""

    def __init__(self) -> None:
        self.live: dict[str, Schedule] = {}
        self.on_remove: Callable[[], None] | None = None

    def put(self, schedule: Schedule) -> None:
        self.live[schedule.schedule_id] = schedule

    def remove(self, schedule_id: str) -> None:
        before, self.on_remove = self.on_remove, None
        if before is not None:
            before()
        self.live.pop(schedule_id, None)


def test_a_pause_whose_trigger_removal_lands_after_a_resume_leaves_the_trigger_on(
    client: TestClient, org: TestOrg
) -> None:
    # Given an active schedule with its trigger
    sid = _schedule(client, org).json()["id"]
    triggers = LiveTriggers()
    schedules = replace(_wiring(FixedClock(START)).schedules, triggers=triggers)
    owner = Principal(org_id=org.org_id, role="owner", via="api_key", key_id="key_test")
    # When a pause is written, and a resume is written and synced before the pause's removal
    # of the trigger reaches EventBridge
    triggers.on_remove = lambda: schedules.set_state(owner, sid, "active")
    schedules.set_state(owner, sid, "paused")
    # Then the schedule is active, and so is its trigger
    stored = schedules.store.get(org.org_id, sid)
    assert stored is not None and stored.state == "active"
    assert sid in triggers.live and triggers.live[sid].expression == stored.expression


# -- a bucket prefix as the input source -------------------------------------------------------
@pytest.fixture(scope="module")
def customer() -> Iterator[CustomerS3]:
    with CustomerS3.start() as server:
        yield server


def test_only_a_caller_who_may_manage_delivery_targets_points_a_schedule_at_one(
    client: TestClient, org: TestOrg, customer: CustomerS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the org's delivery target (registered by an owner)
    monkeypatch.setenv("ALLOW_LOOPBACK_WEBHOOKS", "1")
    get_settings.cache_clear()
    target = client.post("/v1/delivery-targets", json=customer.target_body(), headers=org.key_headers())
    assert target.status_code == 201, target.text
    source = {"type": "bucket_prefix", "delivery_target_id": target.json()["id"], "prefix": "inputs/"}
    body = {"name": "from the bucket", "expression": "rate(1 hour)", "input_source": source}
    # When a member (who may make schedules, not manage targets) points a schedule at it
    refused = client.post("/v1/schedules", json=body, headers=org.key_headers("member"))
    # Then it is refused: reading the org's bucket is the target's power (docs/schedules.md)
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "permission_denied"
    assert refused.json()["error"]["details"]["permission"] == "delivery:manage"
    # while an admin may
    made = client.post("/v1/schedules", json=body, headers=org.key_headers("admin"))
    assert made.status_code == 201, made.text
    # and a member may change the schedule's other fields, not point its input elsewhere
    path = f"/v1/schedules/{made.json()['id']}"
    renamed = client.patch(path, json={"name": "renamed"}, headers=org.key_headers("member"))
    assert renamed.status_code == 200, renamed.text
    moved = {"input_source": {**source, "prefix": "elsewhere/"}}
    assert client.patch(path, json=moved, headers=org.key_headers("member")).status_code == 403


def test_a_bucket_prefix_source_reads_every_input_file_under_it(
    client: TestClient, org: TestOrg, clock: FixedClock, customer: CustomerS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the org's delivery target on a customer's bucket (a loopback S3 endpoint, admitted
    # outside production) with two JSONL files under `inputs/`, and one elsewhere
    monkeypatch.setenv("ALLOW_LOOPBACK_WEBHOOKS", "1")
    get_settings.cache_clear()
    target = client.post("/v1/delivery-targets", json=customer.target_body(), headers=org.key_headers())
    assert target.status_code == 201, target.text
    s3 = customer.client()
    for key, numbers in (("inputs/a.jsonl", (0, 1)), ("inputs/b.jsonl", (2,)), ("other/c.jsonl", (3,))):
        body = "".join(json.dumps(_item(n)) + "\n" for n in numbers).encode()
        s3.put_object(Bucket=BUCKET, Key=key, Body=body)
    source = {"type": "bucket_prefix", "delivery_target_id": target.json()["id"], "prefix": "inputs/"}
    created = client.post(
        "/v1/schedules",
        json={"name": "from the bucket", "expression": "rate(1 hour)", "input_source": source},
        headers=org.key_headers(),
    )
    assert created.status_code == 201, created.text
    # When it fires
    clock.advance(hours=1)
    heartbeat_all_lanes(clock)
    assert _wiring(clock).schedules.fire_due()["created"] == [created.json()["id"]]
    # Then its batch holds the three items under the prefix, in key order
    run = client.get(f"/v1/schedules/{created.json()['id']}/runs", headers=org.key_headers()).json()["data"][
        0
    ]
    items = client.get(f"/v1/batches/{run['batch_id']}/items", headers=org.key_headers()).json()["data"]
    assert [i["customer_item_id"] for i in items] == ["item-0", "item-1", "item-2"]
    # And an empty prefix makes a failed run, not a batch
    s3.delete_object(Bucket=BUCKET, Key="inputs/a.jsonl")
    s3.delete_object(Bucket=BUCKET, Key="inputs/b.jsonl")
    clock.advance(hours=1)
    heartbeat_all_lanes(clock)
    assert _wiring(clock).schedules.fire_due()["failed"] == [created.json()["id"]]
    latest = client.get(f"/v1/schedules/{created.json()['id']}/runs", headers=org.key_headers()).json()[
        "data"
    ][0]
    assert latest["error"]["code"] == "schedule_input_empty"
    get_settings.cache_clear()
