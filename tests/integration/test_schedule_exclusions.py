"""Lane exclusions last only as long as the golden set that can lift them (docs/schedules.md,
Exclusion): a new version with no golden set (its own removed, or its preset's gone) clears
them, and one whose golden set is on another model drops those of the old model's lanes; so
no lane stays rejected with `regression_failed` by a run nothing can repeat."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from batchroute.clock import FixedClock
from batchroute.config import get_settings
from tests.integration.batch_pipeline_support import GPT, LLAMA
from tests.integration.customer_bucket import BUCKET, CustomerS3
from tests.integration.principals import TestOrg
from tests.integration.principals import clocked_client as clocked_client  # the fixtures
from tests.integration.principals import fixed_clock as fixed_clock
from tests.integration.principals import org as org
from tests.integration.test_schedules_api import WRONG_LANE, _golden, _schedule, fire_in_an_hour


@pytest.fixture(scope="module")
def customer() -> Iterator[CustomerS3]:
    with CustomerS3.start() as server:
        yield server


def _excluded(schedule: dict[str, Any]) -> list[str]:
    return [lane["lane_id"] for lane in schedule["excluded_lanes"]]


def _patch(client: TestClient, org: TestOrg, schedule_id: str, body: dict[str, Any]) -> dict[str, Any]:
    patched = client.patch(f"/v1/schedules/{schedule_id}", json=body, headers=org.key_headers())
    assert patched.status_code == 200, patched.text
    return dict(patched.json())


def _excluding_schedule(client: TestClient, org: TestOrg) -> str:
    """A schedule whose golden set excluded edge-eu."""
    created = _schedule(client, org, expression="rate(1 hour)", golden_set=_golden()).json()
    assert _excluded(created) == [WRONG_LANE]
    return str(created["id"])


def test_removing_the_golden_set_lifts_its_exclusions(
    client: TestClient, org: TestOrg, clock: FixedClock
) -> None:
    sid = _excluding_schedule(client, org)
    # When the golden set is removed (version 2 has none)
    patched = _patch(client, org, sid, {"golden_set": None})
    # Then nothing is excluded any more, and the next firing routes on edge-eu again
    assert patched["golden_set"] is None and patched["version"] == 2
    assert _excluded(patched) == []
    record, rejected = fire_in_an_hour(client, org, clock, sid)
    assert record.schedule_version == 2
    assert "regression_failed" not in rejected.values()


def test_a_golden_set_on_another_model_drops_the_old_models_exclusions(
    client: TestClient, org: TestOrg, clock: FixedClock
) -> None:
    sid = _excluding_schedule(client, org)
    # When the golden set moves to another model
    other = {
        "model": GPT,
        "items": [{"input": "Say something", "expected": "Simulated answer"}],
        "scorer": "contains",
    }
    patched = _patch(client, org, sid, {"golden_set": other})
    # Then the exclusions of the old model's lanes are gone (the new run decides the new model's)
    assert patched["golden_set"]["model"] == GPT
    assert [lane for lane in _excluded(patched) if not lane.endswith(f"/{GPT}")] == []
    _, rejected = fire_in_an_hour(client, org, clock, sid)
    assert rejected.get(WRONG_LANE) != "regression_failed"


def test_a_change_that_keeps_the_golden_sets_model_keeps_its_exclusions(
    client: TestClient, org: TestOrg
) -> None:
    sid = _excluding_schedule(client, org)
    patched = _patch(client, org, sid, {"name": "renamed"})
    assert _excluded(patched) == [WRONG_LANE]


def test_a_preset_golden_set_gone_lifts_the_exclusions_at_the_next_version(
    client: TestClient, org: TestOrg, customer: CustomerS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a schedule with no golden set of its own, reading a bucket prefix through a preset
    # whose golden set excluded edge-eu
    monkeypatch.setenv("ALLOW_LOOPBACK_WEBHOOKS", "1")
    get_settings.cache_clear()
    preset = {
        "name": "triage",
        "model": LLAMA,
        "golden_set": {k: v for k, v in _golden().items() if k != "model"},
    }
    assert client.post("/v1/presets", json=preset, headers=org.key_headers()).status_code == 201
    target = client.post("/v1/delivery-targets", json=customer.target_body(), headers=org.key_headers())
    assert target.status_code == 201, target.text
    item = {
        "customer_item_id": "item-0",
        "operation": "responses",
        "input": {"messages": [{"role": "user", "content": "Summarize the quarterly report."}]},
    }
    customer.client().put_object(
        Bucket=BUCKET, Key="through/a.jsonl", Body=(json.dumps(item) + "\n").encode()
    )
    source = {"type": "bucket_prefix", "delivery_target_id": target.json()["id"], "prefix": "through/"}
    created = client.post(
        "/v1/schedules",
        json={
            "name": "through",
            "expression": "rate(1 hour)",
            "input_source": {**source, "preset": "triage"},
        },
        headers=org.key_headers(),
    )
    assert created.status_code == 201, created.text
    sid = created.json()["id"]
    assert _excluded(created.json()) == [WRONG_LANE]
    # When the preset is deleted (archived: it no longer resolves) and the schedule changed
    assert client.delete("/v1/presets/triage", headers=org.key_headers()).status_code == 200
    patched = _patch(client, org, sid, {"input_source": source})
    # Then it has no golden set, and no exclusions (its items, naming the preset, no longer
    # make a batch: that is the customer's to fix, and a lane excluded would not help)
    assert _excluded(patched) == []
    run = client.post(f"/v1/schedules/{sid}/regression-runs", headers=org.key_headers())
    assert run.status_code == 409 and run.json()["error"]["code"] == "no_golden_set"
    get_settings.cache_clear()
