"""OpenAI's published contract as a check (batchroute_tools/contracts/openai.py): the derived
schemas are the vendored OpenAPI document's, the check reads the document as OpenAI means it
(nullable, unions, unknown keys refused), and every body the OpenAI and OpenAI-compatible
adapters build, for a varied set of items, passes it; what an API cannot say is refused."""

from __future__ import annotations

import json
from typing import Any

import pytest

from batchroute.providers.base import ProviderRequest
from batchroute.providers.endpoints import ProviderEndpoint
from batchroute.providers.openai.transform import Inexpressible
from batchroute_tools.contracts.openai import SCHEMAS_FILE, outgoing, request_violations, violations
from scripts.openai_schemas import schemas_json

OPENAI = ProviderEndpoint("openai", "openai", batch_api=True)
TOGETHER = ProviderEndpoint("together", "openai_compatible", "http://t/v1", batch_api=True)
GROQ = ProviderEndpoint("groq", "openai_compatible", "http://g/v1")
USER = [{"role": "user", "content": "hi"}]
CHAT_TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
FLAT_TOOL = {
    "type": "function",
    "name": "f",
    "parameters": {"type": "object", "additionalProperties": False},
    "strict": True,
}


def item(input_: dict[str, Any], *, operation: str = "responses", limit: int = 0) -> ProviderRequest:
    return ProviderRequest("seq-1", "c", operation, "m", "gpt-4o-mini", input_, limit)  # type: ignore[arg-type]


def test_the_derived_schemas_are_the_vendored_documents() -> None:
    assert SCHEMAS_FILE.read_text(encoding="utf-8") == schemas_json()


def test_the_document_read_as_openai_means_it() -> None:
    assert request_violations("chat.completions", {"model": "m", "messages": USER}) == []
    # nullable: true also allows null
    assert (
        request_violations(
            "chat.completions", {"model": "m", "messages": USER, "max_completion_tokens": None}
        )
        == []
    )
    # overlapping union members: a user message with parts is two members at once
    parts = [{"role": "user", "content": [{"type": "input_text", "text": "x"}]}]
    assert request_violations("responses", {"model": "m", "input": parts}) == []
    assert request_violations("embeddings", {"model": "m", "input": [[1, 2]], "dimensions": 8}) == []


@pytest.mark.parametrize(
    ("operation", "body", "param", "code"),
    [
        ("chat.completions", {"model": "m", "messages": USER, "bogus": 1}, "bogus", "unknown_parameter"),
        (
            "chat.completions",
            {"model": "m", "messages": [{**USER[0], "x": 1}]},
            "messages[0].x",
            "unknown_parameter",
        ),
        ("chat.completions", {"model": "m"}, "messages", "missing_required_parameter"),
        ("chat.completions", {"model": "m", "messages": USER, "n": "2"}, "n", "invalid_type"),
        (
            "chat.completions",
            {"model": "m", "messages": USER, "temperature": 2.5},
            "temperature",
            "invalid_value",
        ),
        (
            "chat.completions",
            {"model": "m", "messages": [{"role": "robot", "content": "x"}]},
            "messages[0].role",
            "invalid_value",
        ),
        (
            "chat.completions",
            {"model": "m", "messages": USER, "tools": [{"type": "web_search"}]},
            "tools[0].type",
            "invalid_value",
        ),
        (
            "chat.completions",
            {"model": "m", "messages": USER, "tools": [FLAT_TOOL]},
            "tools[0].function",
            "missing_required_parameter",
        ),
        (
            "chat.completions",
            {"model": "m", "messages": USER, "stop": ["a", "b", "c", "d", "e"]},
            "stop",
            "invalid_value",
        ),
        (
            "responses",
            {"model": "m", "input": "x", "max_output_tokens": 8},
            "max_output_tokens",
            "invalid_value",
        ),
        ("responses", {"model": "m", "input": "x", "stop": ["x"]}, "stop", "unknown_parameter"),
        (
            "responses",
            {"model": "m", "input": "x", "tools": [CHAT_TOOL]},
            "tools[0].name",
            "missing_required_parameter",
        ),
        ("embeddings", {"model": "m", "input": "x", "x": 1}, "x", "unknown_parameter"),
        (
            "batches.create",
            {"input_file_id": "f", "endpoint": "/v1/x", "completion_window": "24h"},
            "endpoint",
            "invalid_value",
        ),
    ],
)
def test_what_the_vendor_refuses_is_a_violation_naming_its_param(
    operation: str, body: dict[str, Any], param: str, code: str
) -> None:
    found = violations(operation, body)
    assert found and found[0].param == param and found[0].code == code, found
    assert request_violations(operation, body)[0].startswith(param)


def test_a_batch_line_is_a_request_of_its_url() -> None:
    body = {"model": "m", "messages": USER}
    line = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": body}
    assert request_violations("batch_line", line) == []
    # a chat body under the Responses API's url: `messages` is no Responses parameter
    assert [v.param for v in violations("batch_line", {**line, "url": "/v1/responses"})] == ["body.messages"]
    bad = {**line, "method": "GET", "extra": 1, "body": {**body, "stop": ["1", "2", "3", "4", "5"]}}
    assert {v.param for v in violations("batch_line", bad)} == {"extra", "method", "body.stop"}
    assert [v.param for v in violations("batch_line", {**line, "url": "/v1/moderations"})] == ["url"]
    with pytest.raises(ValueError, match="unknown OpenAI operation"):
        request_violations("images", {})


ITEMS: list[dict[str, Any]] = [
    {"messages": USER},
    {"input": "hi", "temperature": 0.3, "top_p": 0.9},
    {
        "messages": [
            {"role": "system", "content": "s"},
            {"role": "developer", "content": "d"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "x"},
                    {
                        "type": "image_url",
                        "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"},
                    },
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "r"},
            {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
            {"role": "user", "content": "more"},
        ],
        "tools": [CHAT_TOOL],
        "tool_choice": {"type": "function", "function": {"name": "f"}},
        "response_format": {
            "type": "json_schema",
            "json_schema": {
                "name": "n",
                "schema": {"type": "object", "additionalProperties": False},
                "strict": True,
            },
        },
    },
    {
        "instructions": "i",
        "input": [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "x"},
                    {"type": "input_image", "image_url": "https://x/y.png"},
                ],
            },
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": {"a": 1}},
            {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "r1"},
            {
                "type": "function_call_output",
                "call_id": "c2",
                "output": [{"type": "input_text", "text": "r2"}],
            },
            {"role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
        ],
        "tools": [FLAT_TOOL, {"type": "function", "name": "g", "description": "G"}],
        "tool_choice": "required",
        "text": {"format": {"type": "json_object"}},
    },
    {
        "input": "hi",
        "tools": [CHAT_TOOL],
        "tool_choice": "none",
        "text": {"format": {"type": "json_schema", "name": "n", "schema": {"type": "object"}}},
    },
]
HOSTED: list[dict[str, Any]] = [
    {"input": "hi", "tools": [{"type": "web_search"}]},
    {
        "input": "hi",
        "tools": [{"type": "web_search_preview", "search_context_size": "low"}],
        "tool_choice": {"type": "web_search_preview"},
    },
    {
        "input": "hi",
        "tools": [{"type": "file_search", "vector_store_ids": ["vs_1"]}],
        "tool_choice": "required",
    },
    {
        "input": "hi",
        "tools": [{"type": "code_interpreter"}, CHAT_TOOL],
        "tool_choice": {"type": "code_interpreter"},
    },
    {
        "input": "hi",
        "tools": [
            {"type": "web_search"},
            {"type": "file_search", "vector_store_ids": ["a"]},
            {"type": "code_interpreter"},
        ],
    },
]
# stop, seed and message names: Chat Completions says them, the Responses API does not (the
# preflight refuses them beside hosted tools, so they never go there); message names OpenAI's
# Chat Completions only (routing sends a host none: message_names).
CHAT_ONLY: list[dict[str, Any]] = [{"input": "hi", "stop": ["x", "y"], "seed": 3}]
OPENAI_CHAT_ONLY: list[dict[str, Any]] = [
    {"messages": [{"role": "user", "content": "hi", "name": "ann"}], "stop": "x"}
]
WEB_SEARCH = {"type": "web_search"}
EMBEDDINGS: list[dict[str, Any]] = [
    {"input": "hello"},
    {"input": ["a", "b"], "dimensions": 8},
    {"input": [[1, 2, 3]]},
]


@pytest.mark.parametrize("endpoint", [OPENAI, TOGETHER, GROQ], ids=lambda e: e.slug)
@pytest.mark.parametrize("limit", [0, 8, 500])
def test_every_body_the_adapters_send_fits_the_contract(endpoint: ProviderEndpoint, limit: int) -> None:
    cases = [item(i, limit=limit) for i in ITEMS]
    cases += [item(i, operation="vision", limit=limit) for i in ITEMS[2:4]]
    cases += [item(i, operation="embeddings") for i in EMBEDDINGS]
    cases += [item(i, limit=limit) for i in CHAT_ONLY]
    if endpoint.adapter == "openai":
        cases += [item(i, limit=limit) for i in HOSTED + OPENAI_CHAT_ONLY]
        # every item's messages, tools and formats on the Responses API too (a hosted tool beside)
        cases += [item({**i, "tools": [*i.get("tools", []), WEB_SEARCH]}, limit=limit) for i in ITEMS]
    for case in cases:
        sent = outgoing(case, endpoint, lane_max_output_tokens=64)
        assert len(sent) == (1 if case.operation == "embeddings" else 2) + (2 if endpoint.batch_api else 0)
        for operation, body in sent:
            assert request_violations(operation, body) == [], (operation, json.dumps(body))


def test_openai_sends_items_with_hosted_tools_to_the_responses_api_the_rest_to_chat_completions() -> None:
    hosted = item(HOSTED[4], limit=8)
    (whole, body), (_, streamed), (_, line), (_, job) = outgoing(hosted, OPENAI, lane_max_output_tokens=64)
    assert whole == "responses" and line["url"] == job["endpoint"] == "/v1/responses"
    assert [t["type"] for t in body["tools"]] == ["web_search", "file_search", "code_interpreter"]
    assert body["tools"][1]["vector_store_ids"] == ["a"] and body["max_output_tokens"] == 16
    assert streamed["stream"] is True and body["store"] is False
    (plain, plain_body), (_, plain_streamed), (_, plain_line), (_, plain_job) = outgoing(
        item(ITEMS[3]), OPENAI, lane_max_output_tokens=64
    )
    assert (
        plain == "chat.completions" and plain_line["url"] == plain_job["endpoint"] == "/v1/chat/completions"
    )
    assert plain_body["max_completion_tokens"] == 64 and "max_tokens" not in plain_body
    assert plain_body["tools"][0]["function"]["name"] == "f" and plain_streamed["stream"] is True
    (host, host_body), *_ = outgoing(item(ITEMS[3]), GROQ, lane_max_output_tokens=64)
    assert host == "chat.completions" and host_body["max_tokens"] == 64
    assert host_body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "f",
                "parameters": {"type": "object", "additionalProperties": False},
                "strict": True,
            },
        },
        {"type": "function", "function": {"name": "g", "description": "G"}},
    ]


@pytest.mark.parametrize(
    ("endpoint", "input_", "says"),
    [
        (GROQ, HOSTED[0], "runs no hosted tools"),
        (TOGETHER, HOSTED[3], "runs no hosted tools"),
        # the Responses API's safety net (the preflight refuses these beside hosted tools)
        (OPENAI, {"input": "hi", "stop": ["x"], "tools": [WEB_SEARCH]}, "no stop"),
        (OPENAI, {"input": "hi", "seed": 3, "tools": [WEB_SEARCH]}, "no seed"),
        (
            OPENAI,
            {"messages": [{"role": "user", "content": "hi", "name": "ann"}], "tools": [WEB_SEARCH]},
            "message `name`",
        ),
        (OPENAI, {"input": "hi", "tool_choice": {"type": "web_search"}}, "runs no hosted tools"),
        (GROQ, {"input": "hi", "tool_choice": "required"}, "declares none"),
        (OPENAI, {"input": "hi", "tool_choice": {"type": "function", "name": "f"}}, "declares none"),
    ],
)
def test_what_an_api_cannot_say_is_refused_not_dropped(
    endpoint: ProviderEndpoint, input_: dict[str, Any], says: str
) -> None:
    with pytest.raises(Inexpressible, match=says) as refused:
        outgoing(item(input_), endpoint, lane_max_output_tokens=64)
    assert refused.value.code == "unsupported_by_provider"


@pytest.mark.parametrize("endpoint", [OPENAI, GROQ], ids=lambda e: e.slug)
def test_stop_and_seed_reach_chat_completions_and_names_openais_only(endpoint: ProviderEndpoint) -> None:
    said = {"messages": [{"role": "user", "content": "hi"}], "stop": "x", "seed": 3}
    for operation, body in outgoing(item(said), endpoint, lane_max_output_tokens=64):
        inner = body.get("body", body)
        if operation == "batches.create":
            assert inner["endpoint"] == "/v1/chat/completions"
            continue
        assert inner["stop"] == ["x"] and inner["seed"] == 3
    named = {"messages": [{"role": "user", "content": "hi", "name": "ann"}]}
    if endpoint is GROQ:  # Groq refuses a name (400): the host route refuses it, never drops it
        with pytest.raises(Inexpressible, match="message `name`"):
            outgoing(item(named), endpoint, lane_max_output_tokens=64)
        return
    sent = [b.get("body", b) for op, b in outgoing(item(named), endpoint, lane_max_output_tokens=64)]
    assert all(b["messages"][0]["name"] == "ann" for b in sent if "messages" in b)


def test_a_model_without_sampling_gets_no_temperature_or_top_p() -> None:
    fixed = ProviderRequest(
        "seq-1",
        "c",
        "responses",
        "m",
        "o3",
        {"input": "hi", "temperature": 0.2, "top_p": 0.5},
        32,
        sampling=False,
    )
    for endpoint in (OPENAI, GROQ):
        for _, body in outgoing(fixed, endpoint, lane_max_output_tokens=64):
            inner = body.get("body", body)
            assert "temperature" not in inner and "top_p" not in inner
