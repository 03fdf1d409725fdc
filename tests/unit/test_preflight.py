"""Preflight: each category and code, many issues collected at once, the listing cap, and
the hand-off to routing (`no_eligible_lane`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from batchroute.domain.batches import line_shifts
from batchroute.domain.batches.files import file_type_issue
from batchroute.domain.batches.preflight import ACTIONS, CATEGORIES, Issue, Preflight, PreflightResult
from batchroute.domain.catalog.catalog import Catalog
from batchroute.domain.delivery.network import UrlGuard
from batchroute.domain.routing.engine import route
from batchroute.domain.routing.gates import RouteRequest, RoutingGuards
from batchroute.errors import InvalidRequest
from tests.unit.catalog_fixtures import CHAT, EMBED, NOW, catalog, item, lane, live, provider

PUBLIC_IP = "93.184.216.34"
CHAT_LANES = [
    lane("a", window=8_000, tools=("web_search",)),
    lane("b", window=32_000, tools=("calculator",), capabilities=("json_schema",)),
]
EMBED_LANE = lane("a", model=EMBED, operations=("embeddings",), window=8_000)
CATALOG = catalog([provider("a"), provider("b")], [*CHAT_LANES, EMBED_LANE])


def resolver(*answers: str) -> Callable[[str, int], list[str]]:
    def resolve(host: str, port: int) -> list[str]:
        return list(answers)

    return resolve


def checked(
    items: list[Any], *, cat: Catalog = CATALOG, request: RouteRequest | None = None, route_it: bool = True
) -> PreflightResult:
    preflight = Preflight(cat, request=request)
    for index, raw in enumerate(items):
        preflight.add_item(index, raw)
    if route_it:
        lanes = list(cat.lanes)
        preflight.add_route_plan(
            route(preflight.groups, cat, live=live(lanes), request=preflight.request, now=NOW)
        )
    return preflight.result()


def codes(result: PreflightResult, *, warnings: bool = False) -> list[tuple[str, str, str | None]]:
    issues = result.warnings if warnings else result.errors
    return [(issue.category, issue.code, issue.path) for issue in issues]


def messages(**input_fields: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": "hello"}], **input_fields}


def test_a_clean_batch_passes_with_groups_per_model() -> None:
    # Given chat and embedding items
    preflight = Preflight(CATALOG)
    for index in range(3):
        preflight.add_item(index, item(index))
    preflight.add_item(3, item(3, model=EMBED, operation="embeddings", input={"input": ["a", "b"]}))
    # Then nothing is wrong and the groups hold the totals routing needs
    result = preflight.result()
    assert result.ok and result.to_api() == {"ok": True, "errors": [], "warnings": []}
    chat, embed = preflight.groups
    assert (chat.model, chat.item_count, chat.first_index) == (CHAT, 3, 0)
    assert (embed.model, embed.item_count, embed.first_index, embed.output_tokens) == (EMBED, 1, 3, 0)
    assert chat.prompt_tokens == 3 * chat.max_prompt_tokens


# -- jsonl_shape -----------------------------------------------------------------------------


def test_missing_fields_are_each_reported_with_their_path() -> None:
    result = checked([item(0), {"customer_item_id": "x"}])
    assert codes(result) == [
        ("jsonl_shape", "missing_field", "items[1].model"),
        ("jsonl_shape", "missing_field", "items[1].operation"),
        ("jsonl_shape", "missing_field", "items[1].input"),
    ]
    assert result.errors[0].action == ACTIONS["missing_field"]


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ("not an object", "items[0]"),
        (item(0, customer_item_id=""), "items[0].customer_item_id"),
        (item(0, customer_item_id="x" * 257), "items[0].customer_item_id"),
        (item(0, customer_item_id=7), "items[0].customer_item_id"),
        (item(0, operation="images"), "items[0].operation"),
        (item(0, operation=["responses"]), "items[0].operation"),
        (item(0, model=""), "items[0].model"),
        (item(0, input="hello"), "items[0].input"),
        (item(0, input={"messages": []}), "items[0].input.messages"),
        (item(0, input={"messages": ["hi"]}), "items[0].input.messages[0]"),
        (item(0, input={"messages": [{"content": "hi"}]}), "items[0].input.messages[0].role"),
        (item(0, input={"messages": [{"role": "user", "content": 5}]}), "items[0].input.messages[0].content"),
        (
            item(0, input={"messages": [{"role": "user", "content": [{"type": "text"}]}]}),
            "items[0].input.messages[0].content[0].text",
        ),
        (
            item(
                0, input={"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}
            ),
            "items[0].input.messages[0].content[0]",
        ),
        (item(0, required_tools="web_search"), "items[0].required_tools"),
        (item(0, required_tools=["web_search", "teleport"]), "items[0].required_tools[1]"),
        (item(0, max_output_tokens=0), "items[0].max_output_tokens"),
        (item(0, max_output_tokens=True), "items[0].max_output_tokens"),
        (item(0, preset_version="triage"), "items[0].preset_version"),
        (item(0, preset_version="triage@1@2"), "items[0].preset_version"),
        (item(0, preset_version=3), "items[0].preset_version"),
        (item(0, input=messages(max_tokens="many")), "items[0].input.max_tokens"),
        (item(0, input=messages(tools={"type": "web_search"})), "items[0].input.tools"),
        (item(0, input=messages(tools=[{"name": "x"}])), "items[0].input.tools[0].type"),
        (item(0, model=EMBED, operation="embeddings", input={"input": [1.5]}), "items[0].input.input"),
        (item(0, model=EMBED, operation="embeddings", input={}), "items[0].input.text"),
    ],
)
def test_invalid_fields_are_reported_with_their_path(raw: Any, path: str) -> None:
    result = checked([raw])
    assert [(i.category, i.path) for i in result.errors] == [("jsonl_shape", path)]
    assert result.errors[0].code in ("invalid_field", "missing_field")


def test_an_items_preset_version_is_one_preset_version() -> None:
    """An item's preset_version is recorded as the version its preset expanded and shown as its
    preset: `name@N` only (null is absent)."""
    assert checked([item(0, preset_version="triage@1"), item(1, preset_version=None)]).ok
    result = checked([item(0, preset_version="triage@1\r\nx")])
    assert codes(result) == [("jsonl_shape", "invalid_field", "items[0].preset_version")]


def test_an_unsupported_parameter_says_what_to_do() -> None:
    # Given a parameter no lane's vendor can honour (its action was empty: the CLI showed nothing)
    result = checked(
        [item(0, input={"messages": [{"role": "user", "content": "x"}], "logit_bias": {"1": 5}})]
    )
    [issue] = result.errors
    # Then the issue says what to do
    assert issue.code == "unsupported_parameter" and issue.action == ACTIONS["unsupported_parameter"]
    assert "docs/routing.md" in issue.action


def test_duplicate_customer_item_ids_point_at_the_first_use() -> None:
    result = checked([item(0), item(1), item(0)])
    assert codes(result) == [("jsonl_shape", "duplicate_customer_item_id", "items[2].customer_item_id")]
    assert result.errors[0].details == {"first_index": 0}
    assert "items[0]" in result.errors[0].message


def test_an_items_unknown_model_is_reported_in_the_same_pass_as_its_shape_problems() -> None:
    # Given items naming an unknown model that also repeat an id or have a bad operation (the
    # shape problem alone was reported: a second round trip to learn of the model)
    result = checked(
        [item(0), {**item(0), "model": "no-such"}, {**item(1), "model": "no-such", "operation": "dance"}],
        route_it=False,
    )
    # Then each item's problems are all reported at once
    assert codes(result) == [
        ("jsonl_shape", "duplicate_customer_item_id", "items[1].customer_item_id"),
        ("routing", "unknown_model", "items[1].model"),
        ("jsonl_shape", "invalid_field", "items[2].operation"),
        ("routing", "unknown_model", "items[2].model"),
    ]
    # And a model that is not a string is its shape problem alone
    result = checked([{**item(0), "model": 7}], route_it=False)
    assert [code for _, code, _ in codes(result)] == ["invalid_field"]


def test_malformed_file_lines_are_reported_by_line() -> None:
    # Given a file whose line 2 was not JSON and whose line 3 holds an item
    preflight = Preflight(CATALOG)
    preflight.add_item(0, item(0), line=1)
    preflight.add_line_error(2, "line 2 is not JSON: Expecting value (column 1)", reason="invalid_json")
    preflight.add_item(1, {"customer_item_id": "y"}, line=3)
    result = preflight.result()
    assert [(i.code, i.path, i.line) for i in result.errors] == [
        ("malformed_line", "line 2", 2),
        ("missing_field", "items[1].model", 3),
        ("missing_field", "items[1].operation", 3),
        ("missing_field", "items[1].input", 3),
    ]
    assert result.errors[0].details == {"reason": "invalid_json"}
    assert result.errors[0].to_api()["line"] == 2


def test_an_empty_batch_fails() -> None:
    assert codes(checked([])) == [("jsonl_shape", "empty_batch", "items")]


# -- file_type -------------------------------------------------------------------------------


def test_the_file_type_issue_of_an_upload_is_taken_in() -> None:
    # Given the upload check of domain.files refusing a PDF
    issue = file_type_issue(content_type="application/pdf", filename="x.pdf", head=b"%PDF-1.7")
    assert issue is not None
    preflight = Preflight(CATALOG)
    preflight.add_issue(issue)
    result = preflight.result()
    assert codes(result) == [("file_type", "unsupported_file_type", "file")]
    # And accepted JSON Lines uploads give no issue at all
    assert file_type_issue(content_type="application/x-ndjson", filename="b.jsonl", head=b'{"a":1}\n') is None


# -- context_window --------------------------------------------------------------------------


def test_an_item_larger_than_every_lane_window_is_an_error() -> None:
    # Given an item of about 35,000 prompt tokens: over b's 32,000, the largest window
    result = checked([item(0), item(1, text="x" * 105_000)])
    assert codes(result) == [("context_window", "preflight_context_window_exceeded", "items[1].input")]
    details = result.errors[0].details or {}
    assert details["largest_context_window"] == 32_000
    assert details["estimated_prompt_tokens"] > 32_000


def test_an_item_larger_than_some_lane_windows_is_a_warning() -> None:
    # Given an item of about 10,000 tokens: over a's 8,000 window, inside b's 32,000
    result = checked([item(0, text="x" * 27_000)])
    assert result.ok
    assert codes(result, warnings=True) == [("context_window", "context_window_lanes_excluded", "items[0]")]
    assert (result.warnings[0].details or {})["lanes"] == {"a/m-chat": 8_000}
    # And it names the large item (and its file line), not the group's first
    preflight = Preflight(CATALOG)
    preflight.add_item(0, item(0), line=1)
    preflight.add_item(1, item(1, text="x" * 27_000), line=2)
    (warning,) = preflight.result().warnings
    assert (warning.code, warning.path, warning.line) == ("context_window_lanes_excluded", "items[1]", 2)


def test_items_that_each_fit_some_lane_but_no_lane_fits_them_all() -> None:
    # Given an item that fits only b (large prompt) and one that fits only a (large output)
    cat = catalog(
        [provider("a"), provider("b")],
        [lane("a", window=100_000, max_output=90_000), lane("b", window=32_000, max_output=1_000)],
    )
    big_output = item(0, text="x" * 60_000, max_output_tokens=85_000)  # 105k on a, 21k on b
    big_prompt = item(1, text="x" * 150_000, max_output_tokens=1_000)  # 51k on either
    result = checked([big_output, big_prompt], cat=cat)
    assert codes(result) == [("context_window", "preflight_context_window_exceeded", "items[0]")]


# -- tool_support ----------------------------------------------------------------------------


def test_a_tool_no_lane_offers_is_an_error_with_required_and_offered_lists() -> None:
    result = checked([item(0), item(1, required_tools=["python_execution"])])
    assert codes(result) == [("tool_support", "tool_not_supported", "items[1]")]
    assert result.errors[0].details == {
        "model": CHAT,
        "required": ["python_execution"],
        "missing": ["python_execution"],
        "offered": {"a/m-chat": ["web_search"], "b/m-chat": ["calculator"]},
    }


def test_tools_offered_only_on_different_lanes_are_an_error() -> None:
    # Given web_search (only lane a) from the request and calculator (only lane b) inferred
    request = RouteRequest(required_tools=frozenset({"web_search"}))
    result = checked([item(0, input=messages(tools=[{"type": "calculator"}]))], request=request)
    assert codes(result) == [("tool_support", "tool_not_supported", "required_tools")]
    assert "no single lane offers all" in result.errors[0].message


def test_a_tool_declared_in_the_input_is_inferred() -> None:
    result = checked([item(0, input=messages(tools=[{"type": "code_interpreter"}]))])
    assert codes(result) == [("tool_support", "tool_not_supported", "items[0]")]
    assert (result.errors[0].details or {})["required"] == ["python_execution"]


def test_an_unknown_hosted_tool_type_is_not_supported() -> None:
    result = checked([item(0, input=messages(tools=[{"type": "computer_use_preview"}]))])
    assert codes(result) == [("tool_support", "tool_not_supported", "items[0].input.tools[0].type")]


def test_function_tools_need_a_lane_with_tool_calling() -> None:
    function = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    result = checked([item(0, input=messages(tools=[function], tool_choice="auto"))])
    assert codes(result) == [("tool_support", "capability_not_supported", "items[0].input")]


def test_tool_call_history_needs_a_lane_with_tool_calling_even_without_tools() -> None:
    history = [
        {"role": "user", "content": "Weather?"},
        {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
    ]
    result = checked([item(0, input={"input": history})])
    assert codes(result) == [("tool_support", "capability_not_supported", "items[0].input")]
    assert "tool calls and answers in the conversation" in result.errors[0].message


def test_images_in_a_responses_item_need_a_vision_lane() -> None:
    part = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    result = checked([item(0, input={"messages": [{"role": "user", "content": [part]}]})])
    assert codes(result) == [("tool_support", "capability_not_supported", "items[0].input")]


def _builtin_preflight() -> Preflight:
    from batchroute.catalog import builtin_catalog
    from batchroute.catalog.environments import load_deployment

    return Preflight(load_deployment(builtin_catalog(), "local").catalog)


def _embedding(index: int, model: str, **extra: Any) -> dict[str, Any]:
    return item(index, model=model, operation="embeddings", input={"input": "a sentence", **extra})


def test_dimensions_need_a_model_that_shortens_its_vectors_up_to_its_size() -> None:
    """OpenAI's `dimensions` is "only supported in text-embedding-3 and later models" (vLLM's
    hosts refuse it too): BAAI/bge-large-en-v1.5 has no lane for it; text-embedding-3-small
    takes 1-1536."""
    preflight = _builtin_preflight()
    preflight.add_item(0, _embedding(0, "text-embedding-3-small", dimensions=1536))
    preflight.add_item(1, _embedding(1, "text-embedding-3-small", dimensions=1537))
    preflight.add_item(2, _embedding(2, "BAAI/bge-large-en-v1.5"))
    preflight.add_item(3, _embedding(3, "BAAI/bge-large-en-v1.5", dimensions=256))
    result = preflight.result()
    assert codes(result) == [
        ("jsonl_shape", "invalid_field", "items[1].input.dimensions"),
        ("tool_support", "capability_not_supported", "items[3].input"),
    ]
    assert result.errors[0].details == {"max_dimensions": 1536}
    assert "embedding_dimensions" in result.errors[1].message


def test_each_input_of_an_embedding_list_must_fit_the_window_not_their_sum() -> None:
    """OpenAI: "The input must not exceed the max input tokens for the model (8192 tokens ...)"
    per input; each input of a list is embedded on its own. BGE's window is 512 tokens."""
    preflight = _builtin_preflight()
    review = "the quick brown fox jumps " * 20  # about 130 tokens
    preflight.add_item(0, _embedding(0, "text-embedding-3-small", input=[review] * 100))
    preflight.add_item(1, _embedding(1, "BAAI/bge-large-en-v1.5", input=["fox"] * 600))
    preflight.add_item(2, _embedding(2, "BAAI/bge-large-en-v1.5", input=[[7] * 300, [8] * 300]))
    # One input over the window is still refused, in a list or alone
    preflight.add_item(3, _embedding(3, "BAAI/bge-large-en-v1.5", input=["fox", "word " * 700]))
    preflight.add_item(4, _embedding(4, "text-embedding-3-small", input=[[7] * 9_000]))
    result = preflight.result()
    assert codes(result) == [
        ("context_window", "preflight_context_window_exceeded", "items[3].input"),
        ("context_window", "preflight_context_window_exceeded", "items[4].input"),
    ]
    # And the price still counts every input
    groups = {group.model: group for group in preflight.groups}
    assert groups["text-embedding-3-small"].prompt_tokens > 100 * 100


def test_an_image_gemini_cannot_take_has_no_lane_of_a_gemini_model() -> None:
    """Gemini must be told an image's type and takes only its own: an untyped URL or a GIF needs
    `any_image_type`, which no lane of a Gemini model offers (the other vision models' do)."""
    preflight = _builtin_preflight()
    for index, (model, url) in enumerate(
        [
            ("gemini-2.0-flash", "https://example.com/cat.png"),
            ("gemini-2.0-flash", "https://example.com/a.gif"),
            ("gpt-4o-mini", "https://example.com/render?id=3"),
        ]
    ):
        part = {"type": "image_url", "image_url": {"url": url}}
        raw = item(
            index, model=model, operation="vision", input={"messages": [{"role": "user", "content": [part]}]}
        )
        preflight.add_item(index, raw)
    result = preflight.result()
    assert codes(result) == [("tool_support", "capability_not_supported", "items[1].input")]
    assert "any_image_type" in result.errors[0].message


def test_tools_beside_a_json_answer_have_no_lane_of_a_gemini_model() -> None:
    """Gemini 2.x and 1.5 refuse tools with responseMimeType application/json ("Function
    calling with a response mime type: 'application/json' is unsupported"): an item with both
    needs `tools_with_json_output`, which no lane of a Gemini model offers (OpenAI's do)."""
    function = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    schema = {"type": "json_schema", "json_schema": {"name": "answer", "schema": {"type": "object"}}}
    cases = [
        ("gemini-2.0-flash", {"tools": [function], "response_format": {"type": "json_object"}}, False),
        ("gemini-2.0-flash", {"tools": [{"type": "web_search"}], "response_format": schema}, False),
        ("gemini-2.0-flash", {"tools": [function], "text": {"format": {"type": "json_object"}}}, False),
        ("gemini-2.0-flash", {"tools": [function]}, True),  # tools alone
        ("gemini-2.0-flash", {"response_format": schema}, True),  # JSON alone
        ("gpt-4o-mini", {"tools": [function], "response_format": schema}, True),
    ]
    for model, extra, routed in cases:
        preflight = _builtin_preflight()
        preflight.add_item(0, item(0, model=model, input=messages(**extra)))
        result = preflight.result()
        assert result.ok is routed, (model, extra)
        if not routed:
            assert codes(result) == [("tool_support", "capability_not_supported", "items[0].input")]
            assert "tools_with_json_output" in result.errors[0].message


def test_a_strict_function_has_no_lane_of_a_claude_model() -> None:
    """Claude 3.5 Haiku and Claude Sonnet 4 refuse a tool with `strict: true` (400 "does not
    support strict tools"): such an item needs a lane that holds output to a schema, which no
    lane of theirs offers; without `strict` they run it, and gpt-4o-mini runs both."""
    preflight = _builtin_preflight()
    strict = {
        "type": "function",
        "function": {
            "name": "f",
            "parameters": {"type": "object", "additionalProperties": False},
            "strict": True,
        },
    }
    lax = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    cases = [("claude-3-5-haiku", strict), ("claude-sonnet-4", lax), ("gpt-4o-mini", strict)]
    for index, (model, tool) in enumerate(cases):
        preflight.add_item(index, item(index, model=model, input=messages(tools=[tool])))
    result = preflight.result()
    assert codes(result) == [("json_schema", "json_schema_unsupported", "items[0].input")]
    assert "strict" in result.errors[0].message


# -- json_schema -----------------------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {"label": {"type": "string", "enum": ["a", "b"]}},
    "required": ["label"],
}


def structured(schema: object) -> dict[str, Any]:
    return item(
        0,
        input=messages(
            response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
        ),
    )


def test_a_valid_schema_routes_to_a_lane_that_supports_it() -> None:
    result = checked([structured(SCHEMA)])
    assert result.ok


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        (None, "schema is missing or not a JSON object"),
        ("{}", "schema is missing or not a JSON object"),
        ({"type": "int"}, "schema.type names an unknown type 'int'"),
        ({"type": "object", "properties": []}, "schema.properties must be an object of schemas"),
        ({"type": "object", "properties": {"a": 5}}, "schema.properties.a must be an object or a boolean"),
        ({"type": "object", "required": "a"}, "schema.required must be a list of property names"),
        ({"enum": []}, "schema.enum must be a non-empty list"),
        ({"anyOf": []}, "schema.anyOf must be a non-empty list of schemas"),
        ({"type": "array", "items": {"type": "strng"}}, "schema.items.type names an unknown type 'strng'"),
        ({"$ref": 1}, "schema.$ref must be a string"),
    ],
)
def test_a_malformed_schema_is_json_schema_invalid(schema: object, says: str) -> None:
    result = checked([structured(schema)])
    assert codes(result) == [
        ("json_schema", "json_schema_invalid", "items[0].input.response_format.json_schema.schema")
    ]
    assert says in result.errors[0].message


def test_an_absurdly_deep_schema_is_invalid() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(40):
        deep = {"type": "array", "items": deep}
    assert "deeper than 32" in checked([structured(deep)]).errors[0].message


def test_responses_api_text_format_schemas_are_checked_too() -> None:
    good = item(
        0, input={"input": "x", "text": {"format": {"type": "json_schema", "name": "x", "schema": SCHEMA}}}
    )
    bad = item(1, input={"input": "x", "text": {"format": {"type": "json_schema", "name": "x"}}})
    result = checked([good, bad])
    assert codes(result) == [("json_schema", "json_schema_invalid", "items[1].input.text.format.schema")]


def test_an_unknown_response_format_type_is_invalid() -> None:
    result = checked([item(0, input=messages(response_format={"type": "yaml"}))])
    assert codes(result) == [("json_schema", "json_schema_invalid", "items[0].input.response_format.type")]
    assert checked([item(0, input=messages(response_format={"type": "json_object"}))]).ok


def test_a_schema_no_lane_supports_is_json_schema_unsupported() -> None:
    # Given a model whose only lane has no structured outputs
    cat = catalog([provider("a")], [lane("a")])
    result = checked([item(0), structured(SCHEMA) | {"customer_item_id": "s"}], cat=cat)
    assert codes(result) == [("json_schema", "json_schema_unsupported", "items[1].input")]
    assert (result.errors[0].details or {})["required"] == "json_schema"


def test_a_group_check_names_the_file_line_of_the_item_it_found() -> None:
    # Given a file: an item on line 1, a blank line, a bad line, then items on lines 4 and 5
    cat = catalog([provider("a")], [lane("a")])
    preflight = Preflight(cat)
    preflight.add_item(0, item(0), line=1)
    preflight.add_line_error(3, "line 3 is not JSON", reason="invalid_json")
    preflight.add_item(1, item(1), line=4)
    preflight.add_item(2, structured(SCHEMA) | {"customer_item_id": "s"}, line=5)
    # Then the schema no lane supports, found when the group is checked, names line 5
    schema = [i for i in preflight.result().errors if i.code == "json_schema_unsupported"]
    assert [(i.path, i.line) for i in schema] == [("items[2].input", 5)]
    # And items not from a file name no line
    inline = checked([item(0), structured(SCHEMA) | {"customer_item_id": "s"}], cat=cat)
    assert [i.line for i in inline.errors] == [None]


def test_a_repeated_id_names_the_line_of_its_first_use_in_a_file() -> None:
    preflight = Preflight(CATALOG)
    preflight.add_item(0, item(0), line=2)  # after a blank line
    preflight.add_item(1, item(0), line=3)
    (repeat,) = [i for i in preflight.result().errors if i.code == "duplicate_customer_item_id"]
    assert repeat.message == "customer_item_id 'item-0' is already used by items[0] (line 2)."
    assert (repeat.path, repeat.line) == ("items[1].customer_item_id", 3)
    inline = checked([item(0), item(0)])
    assert inline.errors[0].message == "customer_item_id 'item-0' is already used by items[0]."


def test_past_its_bound_on_line_shifts_a_group_issue_names_no_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(line_shifts, "MAX_LINE_SHIFTS", 1)
    preflight = Preflight(catalog([provider("a")], [lane("a")]))
    preflight.add_item(0, item(0), line=1)
    preflight.add_item(1, item(1), line=3)  # a second shift: past the bound, lines unknown
    preflight.add_item(2, structured(SCHEMA) | {"customer_item_id": "s"}, line=4)
    schema = [i for i in preflight.result().errors if i.code == "json_schema_unsupported"]
    assert [(i.path, i.line) for i in schema] == [("items[2].input", None)]  # never a wrong line


# -- webhook ---------------------------------------------------------------------------------


def guard(*answers: str) -> Callable[[str], object]:
    return UrlGuard(environment=None, resolve=resolver(*answers)).check


def webhook_issues(hook: object, *answers: str) -> list[tuple[str, str, str | None]]:
    preflight = Preflight(CATALOG)
    preflight.add_item(0, item(0))
    preflight.check_webhook(hook, check_url=guard(*(answers or (PUBLIC_IP,))))
    return codes(preflight.result())


def test_a_public_https_webhook_passes() -> None:
    assert webhook_issues({"url": "https://hooks.example.com/in", "secret": "s" * 8}) == []
    assert webhook_issues(None) == []


@pytest.mark.parametrize(
    ("hook", "answers", "expected"),
    [
        ({"url": "http://hooks.example.com/in", "secret": "s" * 16}, (), "https_required"),
        ({"url": "https://hooks.example.com/in", "secret": "s" * 16}, ("10.0.0.8",), "unsafe_url"),
        ({"url": "https://169.254.169.254/latest", "secret": "s" * 16}, (), "unsafe_url"),
        ({"url": "https://localhost/in", "secret": "s" * 16}, (), "unsafe_url"),
        ({"url": "https://[::1]/in", "secret": "s" * 16}, (), "unsafe_url"),
        ({"url": "https://exa mple.com", "secret": "s" * 16}, (), "invalid_url"),
    ],
)
def test_unsafe_or_plain_http_webhooks_are_refused(
    hook: dict[str, str], answers: tuple[str, ...], expected: str
) -> None:
    assert webhook_issues(hook, *answers) == [("webhook", expected, "webhook.url")]


@pytest.mark.parametrize("secret", [None, "short", "s" * 257, 12345678])
def test_a_webhook_secret_must_be_8_to_256_characters(secret: object) -> None:
    hook = {"url": "https://hooks.example.com/in", "secret": secret}
    assert webhook_issues(hook) == [("webhook", "invalid_webhook_secret", "webhook.secret")]


def test_a_webhook_that_is_not_an_object_or_lacks_a_url() -> None:
    assert webhook_issues("https://x.example.com") == [("webhook", "invalid_field", "webhook")]
    assert webhook_issues({"secret": "s" * 8}) == [("webhook", "missing_field", "webhook.url")]


# -- routing ---------------------------------------------------------------------------------


def test_an_unknown_model_is_a_routing_error_with_a_hint() -> None:
    result = checked([item(0, model="M-Chat"), item(1, model="nope")])
    assert codes(result) == [
        ("routing", "unknown_model", "items[0].model"),
        ("routing", "unknown_model", "items[1].model"),
    ]
    assert "Did you mean 'm-chat'?" in result.errors[0].message


def test_an_operation_no_lane_runs_is_a_routing_error() -> None:
    result = checked([item(0, model=EMBED)])
    assert codes(result) == [("routing", "operation_not_supported", "items[0].operation")]


def test_a_group_no_lane_can_take_is_no_eligible_lane_with_each_rejection() -> None:
    # Given a region no provider runs in
    result = checked([item(0), item(1)], request=RouteRequest(regions=("ap",)))
    assert codes(result) == [("routing", "no_eligible_lane", "items[0].model")]
    details = result.errors[0].details or {}
    assert details["rejections"] == {"region_unavailable": 2}
    assert [lane["code"] for lane in details["rejected_lanes"]] == ["region_unavailable"] * 2


def test_a_model_whose_providers_are_all_guarded_out_fails_in_routing() -> None:
    cat = catalog([provider("a", enabled=False)], [lane("a")])
    result = checked([item(0)], cat=cat)
    assert codes(result) == [("routing", "no_eligible_lane", "items[0].model")]


def test_a_group_level_error_is_not_repeated_as_no_eligible_lane() -> None:
    result = checked([item(0, required_tools=["python_execution"])])
    assert [code for _, code, _ in codes(result)] == ["tool_not_supported"]


def test_the_guards_decide_which_lanes_are_routable_for_preflight() -> None:
    # Given lane b (the only one with a 32,000 window) outside the allowlist
    preflight = Preflight(CATALOG, guards=RoutingGuards(provider_allowlist=("a",)))
    preflight.add_item(0, item(0, text="x" * 27_000))
    assert codes(preflight.result()) == [
        ("context_window", "preflight_context_window_exceeded", "items[0].input")
    ]


# -- many at once, and the cap ---------------------------------------------------------------


def test_every_problem_is_collected_in_one_pass() -> None:
    preflight = Preflight(CATALOG)
    for index, raw in enumerate(
        [
            item(0),
            {"customer_item_id": "item-0", "operation": "responses", "model": CHAT, "input": 1},
            item(2, model="nope"),
            item(3, text="x" * 200_000),
            structured({"type": "int"}) | {"customer_item_id": "item-4"},
        ]
    ):
        preflight.add_item(index, raw)
    preflight.check_webhook({"url": "http://x.example.com", "secret": "s"}, check_url=guard(PUBLIC_IP))
    result = preflight.result()
    assert sorted({i.category for i in result.errors}) == sorted(
        set(CATEGORIES) - {"file_type", "tool_support"}
    )
    assert len(result.errors) == result.error_count == 7


def test_the_listing_is_capped_with_a_summary_warning() -> None:
    # Given 250 items without an input
    preflight = Preflight(CATALOG)
    for index in range(250):
        preflight.add_item(index, {"customer_item_id": f"i{index}", "operation": "responses", "model": CHAT})
    result = preflight.result()
    # Then 100 errors are listed, all 250 counted, and a summary says so
    assert (len(result.errors), result.error_count, result.ok) == (100, 250, False)
    summary = result.warnings[-1]
    assert (summary.category, summary.code) == ("jsonl_shape", "issues_truncated")
    assert summary.details == {"errors_total": 250, "warnings_total": 0, "by_code": {"missing_field": 250}}
    assert "Listed 100 of 250 errors" in summary.message


def test_the_cap_is_configurable() -> None:
    preflight = Preflight(CATALOG, max_listed=2)
    for index in range(3):
        preflight.add_item(
            index,
            {
                "customer_item_id": "dup",
                "operation": "responses",
                "model": CHAT,
                "input": {"messages": [{"role": "user", "content": "x"}]},
            },
        )
    result = preflight.result()
    assert (len(result.errors), result.error_count) == (2, 2)
    assert result.warnings == ()


def test_a_failed_result_raises_batch_preflight_failed_with_the_detail() -> None:
    result = checked([{"customer_item_id": "x"}])
    with pytest.raises(InvalidRequest) as caught:
        result.raise_if_failed()
    assert caught.value.code == "batch_preflight_failed"
    assert caught.value.details == {"preflight": result.to_api()}
    checked([item(0)]).raise_if_failed()  # a passing result does not raise


def test_items_cannot_be_added_after_routing() -> None:
    preflight = Preflight(CATALOG)
    preflight.add_item(0, item(0))
    assert preflight.groups
    with pytest.raises(RuntimeError):
        preflight.add_item(1, item(1))


def test_issues_round_trip_through_the_api_shape() -> None:
    issue = Issue("webhook", "https_required", "m", "a", path="webhook.url", details={"k": 1})
    assert Issue.from_api(issue.to_api()) == issue
    assert "line" not in issue.to_api()
