"""`batchroute presets ...` run in-process against a scripted API (docs/cli.md): a preset
created and saved again from a template file, listed (archived ones on asking), shown (at its
latest version or one), its versions, archived, its golden set run and a version's runs; tables
for people, JSON for scripts, and a usage error (exit 2) for a template file that is not a JSON
object."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.unit.test_cli import FakeAPI, run
from tests.unit.test_client_presets import preset, preset_regression, version


def test_a_preset_created_saved_again_listed_shown_archived_and_its_versions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    template = tmp_path / "summarize.json"
    template.write_text(json.dumps({"model": "gpt-4o-mini", "system_prompt": "Answer in one line."}))
    page = {"object": "list", "data": [preset(2)], "next_cursor": None}
    api = FakeAPI(
        {
            "POST /v1/presets": [httpx.Response(201, json=preset())],
            "PUT /v1/presets/summarize": [httpx.Response(200, json=preset(2))],
            "GET /v1/presets": [httpx.Response(200, json=page)],
            "GET /v1/presets/summarize": [httpx.Response(200, json=preset(2))],
            "GET /v1/presets/summarize/versions/1": [httpx.Response(200, json=version(1))],
            "GET /v1/presets/summarize/versions": [
                httpx.Response(
                    200, json={"object": "list", "data": [version(2), version(1)], "next_cursor": None}
                )
            ],
            "DELETE /v1/presets/summarize": [httpx.Response(200, json=preset(2, archived=True))],
        }
    )
    # Created from the file, then saved again as version 2: the file's fields are the body
    assert (
        run(api, "presets", "create", "summarize", "--file", str(template), tmp_path=tmp_path, width=120)[0]
        == 0
    )
    shown = capsys.readouterr().out
    assert "summarize@1" in shown and "gpt-4o-mini" in shown and "temperature=0.2" in shown
    assert json.loads(api.sent("POST /v1/presets")[0].content) == {
        "name": "summarize",
        "model": "gpt-4o-mini",
        "system_prompt": "Answer in one line.",
    }
    assert (
        run(api, "presets", "replace", "summarize", "--file", str(template), "--json", tmp_path=tmp_path)[0]
        == 0
    )
    assert json.loads(capsys.readouterr().out)["ref"] == "summarize@2"
    assert json.loads(api.sent("PUT /v1/presets/summarize")[0].content) == {
        "model": "gpt-4o-mini",
        "system_prompt": "Answer in one line.",
    }
    # Listed with the archived ones, shown at its latest version and at version 1
    assert run(api, "presets", "list", "--archived", tmp_path=tmp_path, width=120)[0] == 0
    assert "Presets" in capsys.readouterr().out
    assert api.sent("GET /v1/presets")[0].url.params["include_archived"] == "true"
    assert run(api, "presets", "show", "summarize", tmp_path=tmp_path, width=120)[0] == 0
    assert "summarize@2" in capsys.readouterr().out
    assert run(api, "presets", "show", "summarize", "--version", "1", "--json", tmp_path=tmp_path)[0] == 0
    assert json.loads(capsys.readouterr().out)["ref"] == "summarize@1"
    # Its versions, newest first; then archived
    assert run(api, "presets", "versions", "summarize", "--json", tmp_path=tmp_path)[0] == 0
    assert [json.loads(line)["version"] for line in capsys.readouterr().out.splitlines()] == [2, 1]
    assert run(api, "presets", "archive", "summarize", tmp_path=tmp_path, width=120)[0] == 0
    assert "archived" in capsys.readouterr().out


def test_a_presets_golden_set_run_and_a_versions_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api = FakeAPI(
        {
            "POST /v1/presets/summarize/regression-runs": [httpx.Response(201, json=preset_regression())],
            "GET /v1/presets/summarize/versions/1/benchmarks": [
                httpx.Response(200, json={"object": "list", "data": []})
            ],
        }
    )
    assert run(api, "presets", "regress", "summarize", "--version", "1", tmp_path=tmp_path, width=140)[0] == 0
    table = capsys.readouterr().out
    assert "together/llama" in table and "3/3" in table and "passed" in table
    assert api.sent("POST /v1/presets/summarize/regression-runs")[0].url.params["version"] == "1"
    assert (
        run(api, "presets", "benchmarks", "summarize", "--version", "1", tmp_path=tmp_path, width=120)[0] == 0
    )
    assert "no golden-set run of version 1 yet" in capsys.readouterr().out


@pytest.mark.parametrize("content", ["[1, 2]", "{not json", None])
def test_a_template_file_that_is_not_a_json_object_is_a_usage_error(
    tmp_path: Path, content: str | None
) -> None:
    template = tmp_path / "t.json"
    if content is not None:
        template.write_text(content)
    api = FakeAPI({})
    assert run(api, "presets", "create", "p", "--file", str(template), tmp_path=tmp_path)[0] == 2
    assert api.requests == []
