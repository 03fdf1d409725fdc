"""The preset rules (batchroute.domain.presets.presets, docs/presets.md): `apply_preset` fills only
what a batch item or a chat body leaves out and records the version it used, and is pure
and idempotent; `parse_preset` and `merge_patch` read create, replace and patch bodies; the
expander loads each distinct reference once and turns a bad one into an issue at its path."""

from __future__ import annotations

import base64
import copy
from dataclasses import replace
from typing import Any

import pytest

from batchroute.catalog import builtin_catalog
from batchroute.domain.batches.jsonl import LineError
from batchroute.domain.batches.preflight import Issue
from batchroute.domain.presets.presets import (
    PresetRef,
    PresetVersion,
    apply_preset,
    apply_preset_to_request,
    merge_patch,
    parse_preset,
    parse_ref,
)
from batchroute.domain.routing.items import read_item
from batchroute.errors import InvalidRequest
from batchroute.services.presets.resolution import PresetExpander

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"

PRESET = PresetVersion(
    org_id="org_1",
    name="triage",
    version=3,
    model=LLAMA,
    operation="responses",
    system_prompt="Be brief.",
    parameters={
        "max_output_tokens": 64,
        "temperature": 0.2,
        "top_p": 0.9,
        "stop": ["END"],
        "response_format": {"type": "json_object"},
        "required_tools": ["calculator"],
    },
    routing={"privacy_tier": "confidential", "routing_mode": "sla_aware", "region": "eu-west-1"},
)


def user(text: str = "Hi") -> dict[str, Any]:
    return {"role": "user", "content": text}


# -- items ---------------------------------------------------------------------------------------
def test_an_item_naming_a_preset_gets_what_it_leaves_out() -> None:
    raw = {"customer_item_id": "a", "preset": "triage@3", "input": {"messages": [user()]}}
    # When the preset is applied
    out = apply_preset(raw, PRESET)
    # Then the model, operation, tools, output limit, system prompt and options are filled
    assert out == {
        "customer_item_id": "a",
        "model": LLAMA,
        "operation": "responses",
        "required_tools": ["calculator"],
        "max_output_tokens": 64,
        "input": {
            "messages": [{"role": "system", "content": "Be brief."}, user()],
            "temperature": 0.2,
            "top_p": 0.9,
            "stop": ["END"],
            "response_format": {"type": "json_object"},
        },
        "preset_version": "triage@3",
    }
    # And the result is an ordinary item the item reader accepts
    facts, problems = read_item(out)
    assert problems == () and facts is not None and facts.tools == frozenset({"calculator"})


def test_what_the_item_gives_wins() -> None:
    raw = {
        "customer_item_id": "a",
        "preset": "triage",
        "operation": "vision",
        "model": "gpt-4o-mini",
        "required_tools": [],
        "input": {
            "messages": [{"role": "developer", "content": "Mine."}, user()],
            "temperature": 1.0,
            "text": {"format": {"type": "json_object"}},
            "max_tokens": 7,
        },
    }
    out = apply_preset(raw, PRESET)
    assert (out["model"], out["operation"], out["required_tools"]) == ("gpt-4o-mini", "vision", [])
    assert out["input"]["messages"][0] == {"role": "developer", "content": "Mine."}
    assert out["input"]["temperature"] == 1.0 and out["input"]["top_p"] == 0.9
    assert "response_format" not in out["input"]  # the item asked for structured output itself
    assert "max_output_tokens" not in out  # the input's max_tokens is the item's limit


def test_a_responses_api_input_gets_instructions_and_embeddings_no_prompt() -> None:
    responses = apply_preset({"customer_item_id": "r", "preset": "triage", "input": {"input": "Hi"}}, PRESET)
    assert responses["input"]["instructions"] == "Be brief."
    own = {"customer_item_id": "r", "preset": "triage", "input": {"input": "Hi", "instructions": "Mine."}}
    assert apply_preset(own, PRESET)["input"]["instructions"] == "Mine."
    embedding = {
        "customer_item_id": "e",
        "operation": "embeddings",
        "preset": "x",
        "input": {"input": "text"},
    }
    out = apply_preset(embedding, PRESET)
    assert out["input"] == {"input": "text"} and "max_output_tokens" not in out


def test_apply_is_pure_and_idempotent() -> None:
    raw = {"customer_item_id": "a", "preset": "triage", "input": {"messages": [user()]}}
    kept = copy.deepcopy(raw)
    once = apply_preset(raw, PRESET)
    assert raw == kept  # never mutates its argument
    assert apply_preset(once, PRESET) == once  # nothing left to fill: the same item
    assert once["input"]["messages"] is not raw["input"]["messages"]


# -- chat bodies and request bodies ----------------------------------------------------------------
def test_a_chat_body_is_filled_in_its_own_shape() -> None:
    out = apply_preset({"preset": "triage", "messages": [user()], "stream": True}, PRESET)
    assert out == {
        "model": LLAMA,
        "messages": [{"role": "system", "content": "Be brief."}, user()],
        "stream": True,
        "temperature": 0.2,
        "top_p": 0.9,
        "stop": ["END"],
        "response_format": {"type": "json_object"},
        "max_tokens": 64,
        "privacy_tier": "confidential",
        "preset_version": "triage@3",
    }
    given = apply_preset(
        {
            "preset": "triage",
            "model": "gpt-4o-mini",
            "messages": [user()],
            "max_completion_tokens": 9,
            "privacy_tier": "standard",
        },
        PRESET,
    )
    assert given["model"] == "gpt-4o-mini" and given["privacy_tier"] == "standard"
    assert "max_tokens" not in given and given["max_completion_tokens"] == 9


def test_a_request_body_takes_the_routing_settings_it_leaves_out() -> None:
    body = {"preset": "triage", "items": [], "routing_mode": "cheapest"}
    out = apply_preset_to_request(body, PRESET)
    assert out == {
        "preset": "triage",
        "items": [],
        "routing_mode": "cheapest",
        "privacy_tier": "confidential",
        "region": "eu-west-1",
        "required_tools": ["calculator"],
    }
    assert "region" not in apply_preset_to_request({"regions": ["us-east-1"]}, PRESET)
    # and a body that gives regions, even empty (anywhere), takes no region from the preset
    assert "region" not in apply_preset_to_request({"preset": "triage", "regions": []}, PRESET)


# -- references and bodies ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("triage", PresetRef("triage", None)),
        ("triage@12", PresetRef("triage", 12)),
        ("triage@0", None),
        ("Triage", None),
        ("triage@", None),
        ("a" * 65, None),
        (3, None),
    ],
)
def test_references(value: object, expected: PresetRef | None) -> None:
    assert parse_ref(value) == expected


def test_parse_collects_every_problem_with_its_path() -> None:
    with pytest.raises(InvalidRequest) as refused:
        parse_preset(
            {"name": "ok", "model": "nope", "parameters": {"temperature": -1}, "routing": {"region": 5}},
            builtin_catalog(),
            with_name=True,
        )
    assert refused.value.code == "invalid_preset"
    fields = [e["field"] for e in (refused.value.details or {})["errors"]]
    assert fields == ["model", "parameters.temperature", "routing.region"]


def test_a_patch_merges_parameters_and_routing_key_by_key() -> None:
    merged = merge_patch(
        PRESET, {"parameters": {"temperature": None, "top_p": 0.5}, "routing": {"region": None}}
    )
    assert merged["parameters"]["top_p"] == 0.5 and "temperature" not in merged["parameters"]
    assert merged["routing"] == {"privacy_tier": "confidential", "routing_mode": "sla_aware"}
    assert merged["model"] == LLAMA and merged["system_prompt"] == "Be brief."
    switched = merge_patch(PRESET, {"workflow_product": "ticket-classification"})
    assert "model" not in switched and "operation" not in switched
    values = parse_preset(switched, builtin_catalog(), with_name=False)
    assert values.workflow_product == "ticket-classification" and values.operation == "responses"


def test_a_patch_holds_only_what_it_changes_to_rules_made_since_the_version_was_saved() -> None:
    # Given a stored version saved under older rules: a response format over today's size cap
    # and a golden set whose item the preflight now refuses (data that is no image)
    schema = {"type": "object", "properties": {f"field_{n:05}": {"type": "string"} for n in range(2_000)}}
    big = {"type": "json_schema", "json_schema": {"name": "big", "schema": schema}}
    no_image = "data:image/png;base64," + base64.b64encode(b"plain text, not an image").decode()
    turn = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": no_image}}]}
    golden = {
        "model": LLAMA,
        "items": [{"input": {"messages": [turn]}, "expected": "a cat"}],
        "scorer": {"type": "contains"},
        "threshold": 1.0,
    }
    old = replace(PRESET, parameters={**PRESET.parameters, "response_format": big}, golden_set=golden)
    catalog = builtin_catalog()
    # When a PATCH changes only the description, Then the version it makes keeps both as stored
    kept = parse_preset(
        merge_patch(old, {"description": "v2"}), catalog, with_name=False, kept=old.template()
    )
    assert kept.parameters["response_format"] == big and kept.golden_set == golden
    # But what a PATCH changes (or a whole new body) is held to today's rules
    renamed = {**big, "json_schema": {**big["json_schema"], "name": "bigger"}}
    for body, field in (
        ({"parameters": {"response_format": renamed}}, "parameters.response_format"),
        ({"golden_set": {**golden, "threshold": 0.5}}, "golden_set.items[0].input.messages[0].content[0]"),
    ):
        with pytest.raises(InvalidRequest) as refused:
            parse_preset(merge_patch(old, body), catalog, with_name=False, kept=old.template())
        assert [e["field"] for e in (refused.value.details or {})["errors"]] == [field]
    with pytest.raises(InvalidRequest):
        parse_preset(merge_patch(old, {}), catalog, with_name=False)
    # And a value equal only to Python (True == 1) is a change, not the stored value; the
    # same number spelled 1 or 1.0 (a browser sends 1.0 as 1) is not
    older = replace(old, golden_set={**golden, "items": [{**golden["items"][0], "expected": 1.0}]})
    resent = {**golden, "items": [{**golden["items"][0], "expected": 1}]}
    assert parse_preset(
        merge_patch(older, {"golden_set": resent}), catalog, with_name=False, kept=older.template()
    ).golden_set == {**golden, "items": [{**golden["items"][0], "expected": 1.0}]}
    changed = {**golden, "items": [{**golden["items"][0], "expected": True}]}
    body = merge_patch(older, {"golden_set": changed})
    with pytest.raises(InvalidRequest):
        parse_preset(body, catalog, with_name=False, kept=older.template())


# -- the expander ------------------------------------------------------------------------------------
class CountingResolver:
    def __init__(self) -> None:
        self.calls: list[object] = []

    def resolve(self, org_id: str, ref: object) -> PresetVersion:
        self.calls.append(ref)
        if ref in ("triage", "triage@3"):
            return PRESET
        raise InvalidRequest("No preset named that.", code="preset_not_found")


def test_the_expander_loads_each_reference_once_and_reports_bad_ones_at_their_path() -> None:
    resolver = CountingResolver()
    expander = PresetExpander(resolver, "org_1")
    items: list[tuple[int, Any]] = [
        (1, {"customer_item_id": "a", "preset": "triage", "input": {"messages": [user()]}}),
        (2, LineError(2, "line 2 is not JSON", "invalid_json")),
        (3, {"customer_item_id": "b", "preset": "missing", "input": {"messages": [user()]}}),
        (4, {"customer_item_id": "c", "input": {"messages": [user()]}}),
        (5, {"customer_item_id": "d", "preset": "missing", "input": {"messages": [user()]}}),
        (6, {"customer_item_id": "e", "preset_version": "triage@3", "model": LLAMA, "input": {}}),
    ]
    out = list(expander.items(iter(items), default="triage@3"))
    assert out[0][1]["preset_version"] == "triage@3"
    assert isinstance(out[1][1], LineError)
    assert out[2][1] == Issue(
        category="jsonl_shape",
        code="preset_not_found",
        message="No preset named that.",
        action=out[2][1].action,
        path="items[1].preset",
        line=3,
    )
    assert out[3][1]["preset_version"] == "triage@3"  # the body's default
    assert isinstance(out[4][1], Issue) and out[4][1].path == "items[3].preset"
    assert out[5][1] == items[5][1]  # already expanded: left alone
    assert resolver.calls == ["triage", "missing", "triage@3"]
