"""Golden sets on presets over HTTP (docs/presets.md, Golden sets): a version carries one, a
regression run answers it on every candidate lane with the preset applied and records a
benchmark per lane and version; validation with field paths; another org's preset (404);
roles; and a schedule reading a bucket prefix through a preset, with no golden set of its
own, excludes the lane the preset's golden set fails (`regression_failed`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from batchroute.clock import FixedClock
from batchroute.config import get_settings
from tests.integration.batch_pipeline_support import LLAMA
from tests.integration.customer_bucket import BUCKET, CustomerS3
from tests.integration.principals import TestOrg, new_org
from tests.integration.principals import clocked_client as clocked_client  # the fixtures
from tests.integration.principals import fixed_clock as fixed_clock
from tests.integration.principals import org as org
from tests.integration.test_schedules_api import fire_in_an_hour

WRONG_LANE = f"edge-eu/{LLAMA}"
PATH = "/v1/presets"


@pytest.fixture(scope="module")
def customer() -> Iterator[CustomerS3]:
    with CustomerS3.start() as server:
        yield server


def _golden(**overrides: Any) -> dict[str, Any]:
    """Three items edge-eu answers wrongly; the other lanes answer "Simulated answer"."""
    return {
        "items": [
            {"input": f"Say something [simulate:wrong:edge-eu] #{n}", "expected": "Simulated answer"}
            for n in range(3)
        ],
        "scorer": {"type": "contains"},
        "threshold": 1.0,
        **overrides,
    }


def _preset(client: TestClient, org: TestOrg, name: str = "triage", **fields: Any) -> Any:
    body = {"name": name, "model": LLAMA, "system_prompt": "Answer in one line.", **fields}
    return client.post(PATH, json=body, headers=org.key_headers())


def _scores(run: dict[str, Any]) -> dict[str, tuple[float, bool]]:
    return {lane["lane_id"]: (lane["score"], lane["passed"]) for lane in run["lanes"]}


def test_a_preset_version_runs_its_golden_set_and_lists_its_benchmarks(
    client: TestClient, org: TestOrg, clock: FixedClock
) -> None:
    # Given a preset whose golden set names no model (it takes the preset's)
    created = _preset(client, org, golden_set=_golden())
    assert created.status_code == 201, created.text
    assert created.json()["golden_set"]["model"] == LLAMA
    assert created.json()["golden_set"]["items"][0]["input"]["messages"][0]["role"] == "user"
    # When its golden set is run
    run = client.post(f"{PATH}/triage/regression-runs", headers=org.key_headers())
    # Then every candidate lane is scored, edge-eu (answering wrongly) at 0
    assert run.status_code == 201, run.text
    body = run.json()
    assert body["object"] == "preset.regression_run"
    assert (body["preset"], body["version"], body["trigger"]) == ("triage", 1, "on_demand")
    scores = _scores(body)
    assert scores[WRONG_LANE] == (0, False)
    assert len(scores) > 1
    assert all(passed for lane_id, (_, passed) in scores.items() if lane_id != WRONG_LANE)
    assert all(lane["items_total"] == 3 for lane in body["lanes"])
    assert float(body["charged"]["amount"]) > 0
    # And the version's benchmarks list the run, newest first
    clock.advance(seconds=1)
    again = client.post(f"{PATH}/triage/regression-runs?version=1", headers=org.key_headers())
    assert again.status_code == 201
    listed = client.get(f"{PATH}/triage/versions/1/benchmarks", headers=org.key_headers("billing"))
    assert listed.status_code == 200, listed.text
    ids = [b["regression_id"] for b in listed.json()["data"]]
    assert ids == [again.json()["regression_id"], body["regression_id"]]
    assert listed.json()["data"][1]["lanes"] == body["lanes"]
    # as the same numbers, floats as they were answered (a score of 0 was read back as an int)
    first = listed.json()["data"][1]
    assert [type(lane["score"]) for lane in first["lanes"]] == [float] * len(first["lanes"])
    assert type(first["threshold"]) is float


def test_a_new_version_without_a_golden_set_has_none_to_run(client: TestClient, org: TestOrg) -> None:
    assert _preset(client, org, golden_set=_golden()).status_code == 201
    # PATCH golden_set: null makes version 2 without one; version 1 keeps its own
    patched = client.patch(f"{PATH}/triage", json={"golden_set": None}, headers=org.key_headers())
    assert patched.status_code == 200 and patched.json()["golden_set"] is None
    none = client.post(f"{PATH}/triage/regression-runs", headers=org.key_headers())
    assert none.status_code == 409 and none.json()["error"]["code"] == "no_golden_set"
    v1 = client.post(f"{PATH}/triage/regression-runs?version=1", headers=org.key_headers())
    assert v1.status_code == 201 and v1.json()["version"] == 1
    assert client.get(f"{PATH}/triage/versions/2/benchmarks", headers=org.key_headers()).json()["data"] == []
    missing = client.post(f"{PATH}/triage/regression-runs?version=9", headers=org.key_headers())
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "preset_version_not_found"
    # An archived preset runs nothing new; its benchmarks stay readable
    assert client.delete(f"{PATH}/triage", headers=org.key_headers()).status_code == 200
    archived = client.post(f"{PATH}/triage/regression-runs?version=1", headers=org.key_headers())
    assert archived.status_code == 409 and archived.json()["error"]["code"] == "preset_archived"
    kept = client.get(f"{PATH}/triage/versions/1/benchmarks", headers=org.key_headers()).json()["data"]
    assert [b["regression_id"] for b in kept] == [v1.json()["regression_id"]]


@pytest.mark.parametrize(
    ("golden_set", "field"),
    [
        ({**_golden(), "items": [{"input": "Say something", "expected": 7}]}, "golden_set.items[0].expected"),
        (_golden(scorer={"type": "levenshtein"}), "golden_set.scorer.type"),
        (_golden(threshold=2), "golden_set.threshold"),
        (_golden(model="gpt-4o-mini"), "golden_set.model"),
        (_golden(items=[]), "golden_set.items"),
    ],
)
def test_an_invalid_golden_set_is_400_with_its_field_path(
    client: TestClient, org: TestOrg, golden_set: dict[str, Any], field: str
) -> None:
    refused = _preset(client, org, golden_set=golden_set)
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["code"] == "invalid_preset"
    assert field in [e["field"] for e in error["details"]["errors"]]


def test_another_orgs_preset_is_404_and_readers_may_not_run(client: TestClient, org: TestOrg) -> None:
    assert _preset(client, org, golden_set=_golden()).status_code == 201
    other = new_org(credit_usd="10")
    for method, path in (
        ("POST", f"{PATH}/triage/regression-runs"),
        ("GET", f"{PATH}/triage/versions/1/benchmarks"),
    ):
        response = client.request(method, path, headers=other.key_headers())
        assert response.status_code == 404, (path, response.text)
        assert response.json()["error"]["code"] in ("preset_not_found", "preset_version_not_found")
    # billing reads presets (batches:read) but does not run work (batches:create)
    denied = client.post(f"{PATH}/triage/regression-runs", headers=org.key_headers("billing"))
    assert denied.status_code == 403 and denied.json()["error"]["code"] == "permission_denied"
    member = client.post(f"{PATH}/triage/regression-runs", headers=org.key_headers("member"))
    assert member.status_code == 201, member.text
    read = client.get(f"{PATH}/triage/versions/1/benchmarks", headers=org.key_headers("billing"))
    assert read.status_code == 200 and len(read.json()["data"]) == 1
    assert client.post(f"{PATH}/triage/regression-runs").status_code == 401


def _preset_with_golden_set_and_target(
    client: TestClient, org: TestOrg, customer: CustomerS3, monkeypatch: pytest.MonkeyPatch
) -> str:
    """The preset with a golden set edge-eu fails, and a delivery target on the customer's
    bucket: the id of the target."""
    monkeypatch.setenv("ALLOW_LOOPBACK_WEBHOOKS", "1")
    get_settings.cache_clear()
    assert _preset(client, org, golden_set=_golden()).status_code == 201
    target = client.post("/v1/delivery-targets", json=customer.target_body(), headers=org.key_headers())
    assert target.status_code == 201, target.text
    return str(target.json()["id"])


def test_a_schedule_through_the_preset_uses_its_golden_set(
    client: TestClient, org: TestOrg, clock: FixedClock, customer: CustomerS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a preset with a golden set edge-eu fails, and a bucket prefix of items naming no preset
    target_id = _preset_with_golden_set_and_target(client, org, customer, monkeypatch)
    item = {
        "customer_item_id": "item-0",
        "operation": "responses",
        "input": {"messages": [{"role": "user", "content": "Summarize the quarterly report."}]},
    }
    customer.client().put_object(Bucket=BUCKET, Key="golden/a.jsonl", Body=(json.dumps(item) + "\n").encode())
    source = {
        "type": "bucket_prefix",
        "delivery_target_id": target_id,
        "prefix": "golden/",
        "preset": "triage",
    }
    # When a schedule reads it through the preset, with no golden set of its own
    created = client.post(
        "/v1/schedules",
        json={"name": "through the preset", "expression": "rate(1 hour)", "input_source": source},
        headers=org.key_headers(),
    )
    assert created.status_code == 201, created.text
    schedule = created.json()
    assert schedule["golden_set"] is None
    # Then its version was benchmarked with the preset's golden set, and edge-eu excluded
    benchmarks = client.get(
        f"/v1/schedules/{schedule['id']}/versions/1/benchmarks", headers=org.key_headers()
    ).json()["data"]
    assert len(benchmarks) == 1 and benchmarks[0]["trigger"] == "version_change"
    assert _scores(benchmarks[0])[WRONG_LANE] == (0, False)
    assert [e["lane_id"] for e in schedule["excluded_lanes"]] == [WRONG_LANE]
    # And a run on demand uses it too
    clock.advance(seconds=1)
    again = client.post(f"/v1/schedules/{schedule['id']}/regression-runs", headers=org.key_headers())
    assert again.status_code == 201, again.text
    # When the schedule fires, its batch routes around edge-eu with `regression_failed`
    _, rejected = fire_in_an_hour(client, org, clock, schedule["id"])
    assert rejected[WRONG_LANE] == "regression_failed"
    get_settings.cache_clear()


def test_a_schedule_with_its_own_golden_set_keeps_it(
    client: TestClient, org: TestOrg, customer: CustomerS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a preset whose golden set edge-eu fails, and a schedule with its own that all pass
    target_id = _preset_with_golden_set_and_target(client, org, customer, monkeypatch)
    source = {"type": "bucket_prefix", "delivery_target_id": target_id, "prefix": "own/"}
    own = {
        "model": LLAMA,
        "items": [{"input": "Say something", "expected": "Simulated answer"}],
        "scorer": "contains",
    }
    created = client.post(
        "/v1/schedules",
        json={
            "name": "own golden set",
            "expression": "rate(1 hour)",
            "input_source": {**source, "preset": "triage"},
            "golden_set": own,
        },
        headers=org.key_headers(),
    )
    assert created.status_code == 201, created.text
    # Then its own decides: no lane excluded
    assert created.json()["excluded_lanes"] == []
    get_settings.cache_clear()
