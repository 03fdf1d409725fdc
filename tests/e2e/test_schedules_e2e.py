"""Recurring schedules on the local stack (docs/schedules.md): a golden set run through the
vendor emulators, where one lane is made to answer wrongly (`[simulate:wrong:edge-eu]`,
docs/emulators.md), excludes that lane; the next batch the schedule fires (fired by the
runner's sweeper from the due index) is routed around it, and its receipt says
`regression_failed`.

The test plays the clock the way the injected clock does in the in-process suites: it moves
the schedule's next fire time (and its due-index key) to now in the stack's table, so the
sweeper's next tick fires it instead of five minutes later."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import boto3
import httpx
import pytest

from tests.e2e.local_stack import RunningStack

pytestmark = pytest.mark.e2e

LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"
WRONG_LANE = f"edge-eu/{LLAMA_8B}"
FIRE_TIMEOUT_SECONDS = 60.0  # the e2e stack's sweeper ticks every 10 s (local_stack.py)
BATCH_TIMEOUT_SECONDS = 90.0
POLL_SECONDS = 0.5


def _agent_key(api: httpx.Client) -> tuple[dict[str, str], str]:
    address = f"schedules-{uuid.uuid4().hex[:10]}@example.com"
    created = api.post(
        "/v1/auth/agent-register", json={"email": address, "password": "correct horse battery"}
    )
    assert created.status_code == 200, created.text
    return {"Authorization": f"Bearer {created.json()['api_key']}"}, str(created.json()["org_id"])


def _item(n: int) -> dict[str, Any]:
    return {
        "customer_item_id": f"item-{n}",
        "operation": "responses",
        "model": LLAMA_8B,
        "input": {"messages": [{"role": "user", "content": f"Summarize report {n}."}]},
    }


def _finished_runs(api: httpx.Client, key: dict[str, str], schedule_id: str) -> list[dict[str, Any]]:
    """The schedule's runs once none is still `firing` (creating its batch)."""
    runs: list[dict[str, Any]] = api.get(f"/v1/schedules/{schedule_id}/runs", headers=key).json()["data"]
    return [] if any(run["state"] == "firing" for run in runs) else runs


def _dynamodb(stack: dict[str, Any]) -> Any:
    make_client: Any = boto3.client
    return make_client(
        "dynamodb",
        endpoint_url=stack["endpoint_url"],
        region_name=stack["region"],
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def _settled_and_ended(batch: dict[str, Any]) -> bool:
    return batch["settled_at"] is not None and batch["state"] != "finalizing"


def _due_now(stack: dict[str, Any], org_id: str, schedule_id: str) -> str:
    """Move the schedule's next fire to now (the due index's key with it)."""
    now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    _dynamodb(stack).update_item(
        TableName=stack["tables"]["controls"],
        Key={"pk": {"S": f"ORG#{org_id}"}, "sk": {"S": f"SCHEDULE#{schedule_id}"}},
        UpdateExpression="SET next_fire_at = :at, gsi1sk = :sort",
        ExpressionAttributeValues={":at": {"S": now}, ":sort": {"S": f"{now}#{schedule_id}"}},
    )
    return now


def test_a_lane_that_fails_the_golden_set_is_routed_around(
    local_stack: RunningStack, api: httpx.Client
) -> None:
    key, org_id = _agent_key(api)
    # Given an input file and a schedule whose golden set edge-eu answers wrongly
    lines = "".join(json.dumps(_item(n)) + "\n" for n in range(3)).encode()
    uploaded = api.post("/v1/files", files={"file": ("items.jsonl", lines, "application/jsonl")}, headers=key)
    assert uploaded.status_code == 201, uploaded.text
    golden = {
        "model": LLAMA_8B,
        "items": [
            {"input": f"Describe routing {n}. [simulate:wrong:edge-eu]", "expected": "Simulated answer"}
            for n in range(2)
        ],
        "scorer": {"type": "contains"},
        "threshold": 1.0,
    }
    created = api.post(
        "/v1/schedules",
        json={
            "name": "e2e golden",
            "expression": "rate(5 minutes)",
            "time_zone": "Europe/Paris",
            "input_source": {"type": "file", "file_id": uploaded.json()["file"]["id"]},
            "golden_set": golden,
        },
        headers=key,
    )
    assert created.status_code == 201, created.text
    schedule = created.json()
    # Then the regression run answered through the emulators: edge-eu scored 0, the rest 1
    benchmarks = api.get(f"/v1/schedules/{schedule['id']}/versions/1/benchmarks", headers=key).json()["data"]
    lanes = {lane["lane_id"]: lane for lane in benchmarks[0]["lanes"]}
    assert lanes[WRONG_LANE]["score"] == 0 and lanes[WRONG_LANE]["passed"] is False
    others = [lane for lane_id, lane in lanes.items() if lane_id != WRONG_LANE]
    assert others and all(lane["score"] == 1 for lane in others), lanes
    assert all(lane["usage"]["completion_tokens"] > 0 for lane in lanes.values())
    assert [e["lane_id"] for e in schedule["excluded_lanes"]] == [WRONG_LANE]

    # When the schedule comes due and the runner's sweeper fires it
    fire_at = _due_now(local_stack.describe(), org_id, schedule["id"])
    deadline = time.monotonic() + FIRE_TIMEOUT_SECONDS
    while not (runs := _finished_runs(api, key, schedule["id"])):
        assert time.monotonic() < deadline, f"the schedule did not fire:\n{local_stack.log_tail()}"
        time.sleep(POLL_SECONDS)
    run = runs[0]
    assert run["fire_at"] == fire_at and run["state"] == "created", run
    # Then its batch runs to completion without edge-eu
    batch_id = run["batch_id"]
    deadline = time.monotonic() + BATCH_TIMEOUT_SECONDS
    # Settle writes `settled_at`, then moves a finalizing batch to completed: wait for both
    while not _settled_and_ended(batch := api.get(f"/v1/batches/{batch_id}", headers=key).json()["batch"]):
        assert time.monotonic() < deadline, f"batch not settled: {batch}\n{local_stack.log_tail()}"
        time.sleep(POLL_SECONDS)
    assert batch["state"] == "completed" and batch["counts"]["completed"] == 3, batch
    # And its receipt names the rejection
    receipt = httpx.get(batch["receipt_url"], timeout=10).json()
    rejected = {lane["lane_id"]: lane["rejection"] for lane in receipt["rejected_lanes"]}
    assert rejected[WRONG_LANE]["code"] == "regression_failed", rejected
    assert rejected[WRONG_LANE]["details"]["schedule_id"] == schedule["id"]
    served = {lane["lane_id"] for lane in receipt["provider_lanes"]}
    assert served and WRONG_LANE not in served
