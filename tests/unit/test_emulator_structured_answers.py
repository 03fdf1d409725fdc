"""The emulators answer a structured-output request as constrained decoding does: with JSON
valid under the request's schema (`schema_example`), so local mode exercises the parse of a
workflow product's output (docs/emulators.md)."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from batchroute.catalog import builtin_catalog
from batchroute_tools.emulators.behaviour import Behaviour, EmulatorConfig, Work, schema_example

SCHEMAS: list[Any] = [
    {
        "type": "object",
        "properties": {"a": {"type": "string", "minLength": 12}, "n": {"type": "integer", "minimum": 3}},
    },
    {"type": "array", "items": {"enum": ["x", "y"]}, "minItems": 2},
    {"anyOf": [{"type": "null"}, {"type": "number", "exclusiveMinimum": 1}]},
    {"$defs": {"p": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}, "$ref": "#/$defs/p"},
    {"type": ["string", "null"], "const": "fixed"},
]


@pytest.mark.parametrize("schema", SCHEMAS + [p.output_schema for p in builtin_catalog().workflow_products])
def test_the_example_of_a_schema_is_valid_under_it(schema: dict[str, Any]) -> None:
    jsonschema.validate(schema_example(schema), schema)


def test_gemini_capital_types_and_json_mode_are_read() -> None:
    assert schema_example({"type": "OBJECT", "properties": {"n": {"type": "INTEGER"}}}) == {"n": 0}
    assert schema_example({}) == {}  # JSON mode: an object, no schema to keep to


def test_a_structured_answer_is_json_in_token_pieces_and_cut_at_the_limit() -> None:
    behaviour = Behaviour(EmulatorConfig())
    schema = {"type": "object", "properties": {"label": {"enum": ["billing"]}}}
    messages = ({"role": "user", "content": "Classify"},)
    whole = behaviour.answer(Work("openai", "m", "chat", messages=messages, answer_schema=schema))
    assert whole.content == '{"label":"billing"}' and whole.finish == "stop"
    assert whole.completion_tokens == len(whole.pieces) == 5
    cut = behaviour.answer(Work("openai", "m", "chat", messages=messages, max_tokens=2, answer_schema=schema))
    assert cut.content == '{"label"' and cut.finish == "length"
