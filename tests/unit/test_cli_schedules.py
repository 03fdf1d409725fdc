"""`batchroute schedules ...` run in-process against a scripted API (docs/cli.md): a schedule
created from a local items file (uploaded first) or a file uploaded before, listed, shown,
paused and resumed, its runs (the batch each fire time made, or why none), deleted; tables
for people, JSON for scripts, and a usage error (exit 2) when the input is named twice or
not at all."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.unit.test_cli import NATIVE, FakeAPI, run, write_jsonl
from tests.unit.test_client_files import file_row
from tests.unit.test_client_schedules import run as run_row
from tests.unit.test_client_schedules import schedule


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


@pytest.mark.parametrize("inputs", [(), ("--file-id", "file_1", "--items", "x.jsonl")])
def test_a_create_names_its_input_once(inputs: tuple[str, ...], tmp_path: Path) -> None:
    api = FakeAPI({})
    made = ("schedules", "create", "--name", "n", "--expression", "rate(1 hour)", *inputs)
    assert run(api, *made, tmp_path=tmp_path)[0] == 2
    assert api.requests == []
