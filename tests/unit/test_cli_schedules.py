"""`batchroute schedules ...` run in-process against a scripted API (docs/cli.md): a schedule
created from a local items file (uploaded first) or a file uploaded before, listed, shown,
paused and resumed, its runs (the batch each fire time made, or why none), deleted; one read
from a bucket prefix with a golden set, changed, its golden set run and its benchmarks; tables
for people, JSON for scripts, and a usage error (exit 2) when the input is named twice or
not at all, or a change names nothing."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.unit.test_cli import NATIVE, FakeAPI, run, write_jsonl
from tests.unit.test_client_files import file_row
from tests.unit.test_client_schedules import regression, schedule
from tests.unit.test_client_schedules import run as run_row


def test_a_schedule_made_from_a_local_file_listed_shown_paused_resumed_and_deleted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    items = write_jsonl(tmp_path / "items.jsonl", [NATIVE])
    api = FakeAPI(
        {
            "POST /v1/files": [httpx.Response(201, json={"file": file_row()})],
            "POST /v1/schedules": [httpx.Response(201, json=schedule())],
            "GET /v1/schedules": [
                httpx.Response(200, json={"object": "list", "data": [schedule()], "next_cursor": None})
            ],
            "GET /v1/schedules/sched_1": [httpx.Response(200, json=schedule())],
            "POST /v1/schedules/sched_1/pause": [httpx.Response(200, json=schedule(state="paused"))],
            "POST /v1/schedules/sched_1/resume": [httpx.Response(200, json=schedule())],
            "DELETE /v1/schedules/sched_1": [
                httpx.Response(200, json={"id": "sched_1", "object": "schedule", "deleted": True})
            ],
        }
    )
    made = ("schedules", "create", "--name", "nightly", "--expression", "30 2 * * *", "--items", str(items))
    assert run(api, *made, "--time-zone", "America/New_York", tmp_path=tmp_path, width=120)[0] == 0
    shown = capsys.readouterr().out
    assert "sched_1" in shown and "30 2 * * * (America/New_York)" in shown and "file_1" in shown
    (created,) = api.sent("POST /v1/schedules")
    assert json.loads(created.content) == {
        "name": "nightly",
        "expression": "30 2 * * *",
        "input_source": {"type": "file", "file_id": "file_1"},
        "time_zone": "America/New_York",
        "state": "active",
    }
    assert run(api, "schedules", "list", tmp_path=tmp_path, width=120)[0] == 0
    listed = capsys.readouterr().out
    assert "Schedules" in listed and "sched_1" in listed and "nightly" in listed
    assert run(api, "schedules", "pause", "sched_1", "--json", tmp_path=tmp_path)[0] == 0
    assert json.loads(capsys.readouterr().out)["state"] == "paused"
    assert run(api, "schedules", "resume", "sched_1", tmp_path=tmp_path, width=120)[0] == 0
    assert "active" in capsys.readouterr().out
    assert run(api, "schedules", "delete", "sched_1", "--json", tmp_path=tmp_path)[0] == 0
    assert json.loads(capsys.readouterr().out) == {"id": "sched_1", "deleted": True}


def test_runs_show_the_batch_or_why_none_and_a_missing_schedule_is_an_api_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = {
        "object": "list",
        "data": [
            run_row("2026-04-02T06:30:00.000Z", batch_id="batch_7"),
            run_row("2026-04-01T06:30:00.000Z"),
        ],
        "next_cursor": None,
    }
    api = FakeAPI({"GET /v1/schedules/sched_1/runs": [httpx.Response(200, json=page)]})
    assert run(api, "schedules", "runs", "sched_1", tmp_path=tmp_path, width=140)[0] == 0
    table = capsys.readouterr().out
    assert "batch_7" in table and "insufficient_credits: Not enough credit." in table
    assert run(api, "schedules", "runs", "sched_1", "--json", tmp_path=tmp_path)[0] == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["batch_id"] for r in rows] == ["batch_7", None]
    # No such schedule: the API's 404, exit 1
    assert run(FakeAPI({}), "schedules", "show", "sched_9", tmp_path=tmp_path)[0] == 1
    assert "error: not_found" in capsys.readouterr().err


GOLDEN = {"model": "llama", "items": [{"input": "2+2?", "expected": "4"}], "scorer": {"type": "contains"}}


def test_a_bucket_prefix_schedule_with_a_golden_set_changed_regressed_and_benchmarked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    golden = tmp_path / "golden.json"
    golden.write_text(json.dumps(GOLDEN))
    source = {"type": "bucket_prefix", "delivery_target_id": "dt_1", "prefix": "in/", "preset": "tag@2"}
    made_row = {**schedule(), "input_source": source, "golden_set": {**GOLDEN, "threshold": 1.0}}
    api = FakeAPI(
        {
            "POST /v1/schedules": [httpx.Response(201, json=made_row)],
            "PATCH /v1/schedules/sched_1": [
                httpx.Response(200, json={**made_row, "version": 2}),
                httpx.Response(200, json={**made_row, "version": 3, "golden_set": None}),
            ],
            "POST /v1/schedules/sched_1/regression-runs": [httpx.Response(201, json=regression())],
            "GET /v1/schedules/sched_1/versions/1/benchmarks": [
                httpx.Response(200, json={"object": "list", "data": [regression()]})
            ],
        }
    )
    # A schedule reading a delivery target's prefix, with the items' preset and a golden set
    made = ("schedules", "create", "--name", "n", "--expression", "rate(1 hour)", "--prefix", "in/")
    made += ("--target", "dt_1", "--preset", "tag@2", "--golden-set", str(golden))
    assert run(api, *made, tmp_path=tmp_path, width=120)[0] == 0
    shown = capsys.readouterr().out
    assert "dt_1/in/" in shown and "llama" in shown
    (created,) = api.sent("POST /v1/schedules")
    sent = json.loads(created.content)
    assert sent["input_source"] == source and sent["golden_set"] == GOLDEN
    assert api.sent("POST /v1/files") == []
    # Changed: only the fields given; then its golden set removed
    assert (
        run(api, "schedules", "update", "sched_1", "--expression", "rate(2 hours)", tmp_path=tmp_path)[0] == 0
    )
    assert run(api, "schedules", "update", "sched_1", "--no-golden-set", "--json", tmp_path=tmp_path)[0] == 0
    first, second = api.sent("PATCH /v1/schedules/sched_1")
    assert json.loads(first.content) == {"expression": "rate(2 hours)"}
    assert json.loads(second.content) == {"golden_set": None}
    capsys.readouterr()
    # Its golden set run now: a score per lane, and a version's runs
    assert run(api, "schedules", "regress", "sched_1", tmp_path=tmp_path, width=140)[0] == 0
    table = capsys.readouterr().out
    assert "together/llama" in table and "1.00" in table and "passed" in table and "3/3" in table
    assert (
        run(api, "schedules", "benchmarks", "sched_1", "--version", "1", "--json", tmp_path=tmp_path)[0] == 0
    )
    assert json.loads(capsys.readouterr().out)["data"][0]["regression_id"] == "regr_2"


NEW = ("create", "--name", "n", "--expression", "rate(1 hour)")


@pytest.mark.parametrize(
    "arguments",
    [
        ("update", "sched_1"),  # nothing to change
        ("update", "sched_1", "--golden-set", "g.json", "--no-golden-set"),
        ("create", "--name", "n", "--expression", "rate(1 hour)", "--prefix", "in/"),  # no --target
        ("create", "--name", "n", "--expression", "rate(1 hour)", "--file-id", "f", "--preset", "p@1"),
        (
            "create",
            "--name",
            "n",
            "--expression",
            "rate(1 hour)",
            "--file-id",
            "f",
            "--golden-set",
            "none.json",
        ),
    ],
)
def test_a_schedule_command_that_says_too_little_or_too_much_is_a_usage_error(
    arguments: tuple[str, ...], tmp_path: Path
) -> None:
    api = FakeAPI({})
    assert run(api, "schedules", *arguments, tmp_path=tmp_path)[0] == 2
    assert api.requests == []


@pytest.mark.parametrize("inputs", [(), ("--file-id", "file_1", "--items", "x.jsonl")])
def test_a_create_names_its_input_once(inputs: tuple[str, ...], tmp_path: Path) -> None:
    api = FakeAPI({})
    made = ("schedules", "create", "--name", "n", "--expression", "rate(1 hour)", *inputs)
    assert run(api, *made, tmp_path=tmp_path)[0] == 2
    assert api.requests == []
