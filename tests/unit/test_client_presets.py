"""The client's preset calls (docs/client.md, docs/presets.md) against `httpx.MockTransport`:
what each sends, the typed preset, versions and regression runs it reads, and the retries each
write allows: a write that makes a version (create, replace, update) and a paid regression run
are never repeated after a lost answer; an archive whose answer was lost is done."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from batchroute_client import (
    APIConnectionError,
    ConflictError,
    InternalServerError,
    Preset,
    PresetRegressionRun,
    PresetVersion,
)

from tests.unit.test_client_schedules import regression
from tests.unit.test_client_sdk import error
from tests.unit.test_client_settings import AT, LATER, client_for, ok, sent
from tests.unit.test_client_unsafe_retries import LOST, lost_answer

TEMPLATE = {
    "description": None,
    "model": "gpt-4o-mini",
    "workflow_product": None,
    "operation": "responses",
    "system_prompt": "Answer in one line.",
    "parameters": {"max_output_tokens": 64, "temperature": 0.2},
    "routing": {"routing_mode": "cheapest"},
    "metadata": None,
    "golden_set": None,
}


def version(number: int) -> dict[str, Any]:
    return {
        "object": "preset.version",
        "name": "summarize",
        "version": number,
        "ref": f"summarize@{number}",
        **TEMPLATE,
        "created_by": "key_1",
        "created_at": AT,
    }


def preset(number: int = 1, *, archived: bool = False) -> dict[str, Any]:
    return {
        **version(number),
        "object": "preset",
        "latest_version": number,
        "archived_at": AT if archived else None,
        "updated_at": AT,
        **LATER,
    }


def preset_regression() -> dict[str, Any]:
    run = {k: v for k, v in regression().items() if k != "schedule_id"}
    return {**run, "object": "preset.regression_run", "preset": "summarize"}


def test_presets_create_list_read_replace_update_archive_and_their_versions() -> None:
    client, recorder = client_for(
        ok(preset(), 201),
        ok({"object": "list", "data": [preset()], "next_cursor": "summarize", "limit": 200}),
        ok({"object": "list", "data": [], "next_cursor": None, "limit": 200}),
        ok(preset()),
        ok(preset(2)),
        ok(preset(3)),
        ok(preset(3, archived=True)),
        ok({"object": "list", "name": "summarize", "data": [version(3), version(2)], "next_cursor": "2"}),
        ok({"object": "list", "name": "summarize", "data": [version(1)], "next_cursor": None}),
        ok(version(1)),
        ok({"object": "list", "data": [preset_regression()]}),
        ok(preset_regression(), 201),
    )
    created = client.presets.create(name="summarize", **TEMPLATE)
    listed = list(client.presets.list(include_archived=True))
    got = client.presets.get("summarize")
    replaced = client.presets.replace("summarize", model="gpt-4o-mini", operation="responses")
    updated = client.presets.update("summarize", parameters={"temperature": None})
    archived = client.presets.archive("summarize")
    versions = list(client.presets.versions("summarize"))
    first = client.presets.version("summarize", 1)
    benchmarks = client.presets.benchmarks("summarize", 1)
    regressed = client.presets.regress("summarize", version=1)
    assert [sent(r) for r in recorder.requests] == [
        ("POST", "/v1/presets", {}, {"name": "summarize", **TEMPLATE}),
        ("GET", "/v1/presets", {"include_archived": "true"}, None),
        ("GET", "/v1/presets", {"include_archived": "true", "cursor": "summarize"}, None),
        ("GET", "/v1/presets/summarize", {}, None),
        ("PUT", "/v1/presets/summarize", {}, {"model": "gpt-4o-mini", "operation": "responses"}),
        ("PATCH", "/v1/presets/summarize", {}, {"parameters": {"temperature": None}}),
        ("DELETE", "/v1/presets/summarize", {}, None),
        ("GET", "/v1/presets/summarize/versions", {}, None),
        ("GET", "/v1/presets/summarize/versions", {"cursor": "2"}, None),
        ("GET", "/v1/presets/summarize/versions/1", {}, None),
        ("GET", "/v1/presets/summarize/versions/1/benchmarks", {}, None),
        ("POST", "/v1/presets/summarize/regression-runs", {"version": "1"}, None),
    ]
    assert isinstance(created, Preset) and created == got and [p.name for p in listed] == ["summarize"]
    assert created.ref == "summarize@1" and created.parameters.max_output_tokens == 64
    assert created.routing.routing_mode == "cheapest" and created.raw["added_later"] == LATER["added_later"]
    assert (replaced.version, updated.version, archived.archived_at) == (2, 3, AT)
    assert [v.version for v in versions] == [3, 2, 1] and isinstance(first, PresetVersion)
    (benchmark,) = benchmarks
    assert isinstance(regressed, PresetRegressionRun) and benchmark == regressed
    assert regressed.preset == "summarize" and regressed.lanes[0].passed


@pytest.mark.parametrize("call", ["create", "replace", "update", "regress"])
@pytest.mark.parametrize("how", LOST)
def test_a_write_that_makes_a_version_or_a_paid_run_is_not_repeated(call: str, how: str) -> None:
    client, recorder = client_for(lost_answer(how), ok(preset(), 201))
    calls = {
        "create": lambda: client.presets.create(name="summarize", model="gpt-4o-mini"),
        "replace": lambda: client.presets.replace("summarize", model="gpt-4o-mini"),
        "update": lambda: client.presets.update("summarize", description="new"),
        "regress": lambda: client.presets.regress("summarize"),
    }
    with pytest.raises((APIConnectionError, InternalServerError)):
        calls[call]()
    assert len(recorder.requests) == 1  # a repeat would make another version, or charge again


def test_an_archive_whose_answer_was_lost_is_done_and_a_first_409_raises() -> None:
    client, recorder = client_for(
        httpx.ReadError("reset"), error(409, "preset_archived"), ok(preset(archived=True))
    )
    assert client.presets.archive("summarize").archived_at == AT
    assert [sent(r)[:2] for r in recorder.requests] == [
        ("DELETE", "/v1/presets/summarize"),
        ("DELETE", "/v1/presets/summarize"),
        ("GET", "/v1/presets/summarize"),
    ]
    client, recorder = client_for(error(409, "preset_archived"))
    with pytest.raises(ConflictError) as already:
        client.presets.archive("summarize")
    assert already.value.code == "preset_archived" and len(recorder.requests) == 1
