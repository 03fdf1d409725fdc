"""Whatever the service accepts, the vendors accept (issue 26).

Hypothesis generates items across everything the preflight accepts (tests/unit/
item_strategies.py), finds every lane of the catalog each item can route to (the routing
gates that read the item: operation, hosted tools, runtime capabilities, context window),
sends it through that lane's adapter's transforms (the whole call, the streamed call and the
vendor batch line or record: `outgoing` in batchroute_tools/contracts/), and validates each
body against the vendor's published contract: OpenAI's OpenAPI document for OpenAI and the
OpenAI-compatible hosts, the official SDKs' request types for Anthropic and Gemini,
botocore's service model for Bedrock. Zero violations, and no transform refuses an item the
preflight let through to its lane.

The number of examples is bounded (`CONTRACT_EXAMPLES` per provider, default 60) so `make
test` runs it;
run it longer with e.g. `CONTRACT_EXAMPLES=5000 pytest tests/unit/test_vendor_contracts.py`.
"""

from __future__ import annotations

import base64
import json
import os
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from batchroute.catalog import builtin_catalog
from batchroute.catalog.environments import load_deployment
from batchroute.domain.catalog.catalog import Lane, LaneLive
from batchroute.domain.routing.gates import RouteRequest, RoutingGuards, lane_gate_failures
from batchroute.domain.routing.items import ModelGroup, read_item
from batchroute.providers.base import PermanentProviderError, ProviderRequest
from batchroute_tools.contracts import bedrock as bedrock_contract
from batchroute_tools.contracts import contract
from batchroute_tools.emulators.openai import takes_dimensions
from tests.unit.item_strategies import accepted_items

DEPLOYMENT = load_deployment(builtin_catalog(), "local")  # every provider enabled, edges too
CATALOG = DEPLOYMENT.catalog
# The gates that read the item itself; the others (heartbeat, capacity, privacy, region,
# price, policy) say nothing about what the item's body holds.
CONTENT_GATES = frozenset(
    {"operation_not_supported", "tool_support", "capability_missing", "context_window_exceeded"}
)
NOW = datetime(2026, 11, 28, tzinfo=UTC)
EXAMPLES = int(os.environ.get("CONTRACT_EXAMPLES", "60"))  # per provider
JOB_OPERATIONS = frozenset({"batches.create", "CreateModelInvocationJob"})
BGE = "BAAI/bge-large-en-v1.5"


def _models() -> dict[str, list[str]]:
    served: dict[str, set[str]] = {}
    for lane in CATALOG.lanes:
        if DEPLOYMENT.endpoint(lane.provider) is None:
            continue
        for operation in lane.operations:
            served.setdefault(operation, set()).add(lane.model)
    return {operation: sorted(models) for operation, models in served.items()}


MODELS = _models()


def routable_lanes(raw: dict[str, Any]) -> list[Lane]:
    facts, problems = read_item(raw)
    assert facts is not None, problems
    group = ModelGroup(model=facts.model, first_index=0)
    group.add(0, facts)
    providers = {p.slug: p for p in CATALOG.providers}
    lanes = []
    for lane in CATALOG.lanes:
        if lane.model != facts.model or DEPLOYMENT.endpoint(lane.provider) is None:
            continue
        live = LaneLive(lane.lane_id, 1_000_000, NOW.isoformat())
        failures = lane_gate_failures(
            lane,
            providers.get(lane.provider),
            group,
            request=RouteRequest(),
            guards=RoutingGuards(),
            live=live,
            now=NOW,
        )
        if not any(f.code in CONTENT_GATES for f in failures):
            lanes.append(lane)
    return lanes


def provider_request(raw: dict[str, Any], lane: Lane) -> ProviderRequest:
    facts, _ = read_item(raw)
    assert facts is not None
    limit = 0 if facts.operation == "embeddings" else min(facts.output_tokens, lane.max_output_tokens)
    return ProviderRequest(
        custom_id="seq-0",
        customer_item_id=facts.customer_item_id,
        operation=facts.operation,
        model=lane.model,
        provider_model_id=lane.provider_model_id or lane.model,
        input=raw["input"],
        max_output_tokens=limit,
    )


def violations_on(raw: dict[str, Any], lane: Lane) -> list[str]:
    endpoint = DEPLOYMENT.endpoint(lane.provider)
    assert endpoint is not None
    vendor = contract(endpoint.adapter)
    request = provider_request(raw, lane)
    try:
        sent = vendor.outgoing(request, endpoint, lane_max_output_tokens=lane.max_output_tokens)
    except PermanentProviderError as refused:
        return [f"{lane.lane_id}: the transform refused an item routed to it: {refused.code}: {refused}"]
    assert sent, f"{lane.lane_id}: nothing would be sent"
    return [
        f"{lane.lane_id} {operation}: {problem}"
        for operation, body in sent
        for problem in [*vendor.request_violations(operation, body), *_model_violations(operation, body)]
    ]


def _model_violations(operation: str, body: Any) -> list[str]:
    """What the document's schema cannot say: OpenAI's `dimensions` is "Only supported in
    text-embedding-3 and later models" (the OpenAI emulator's `takes_dimensions`; vLLM refuses
    it too)."""
    if operation == "batch_line" and body.get("url") == "/v1/embeddings":
        body = body.get("body")
    elif operation != "embeddings":
        return []
    model = str(body.get("model"))
    if "dimensions" in body and not takes_dimensions(model):
        return [f"dimensions: {model} does not support specifying dimensions"]
    return []


def test_every_lane_with_an_endpoint_has_a_contract() -> None:
    for lane in CATALOG.lanes:
        endpoint = DEPLOYMENT.endpoint(lane.provider)
        if endpoint is not None:
            vendor = contract(endpoint.adapter)
            assert callable(vendor.outgoing) and callable(vendor.request_violations), lane.lane_id


PROVIDERS = sorted(
    {lane.provider for lane in CATALOG.lanes if DEPLOYMENT.endpoint(lane.provider) is not None}
)


def models_of(provider: str) -> dict[str, list[str]]:
    served: dict[str, set[str]] = {}
    for lane in CATALOG.lanes:
        if lane.provider == provider:
            for operation in lane.operations:
                served.setdefault(operation, set()).add(lane.model)
    return {operation: sorted(models) for operation, models in served.items()}


@pytest.mark.parametrize("provider", PROVIDERS)
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_every_body_sent_for_an_accepted_item_fits_the_vendors_contract(
    provider: str, data: st.DataObject
) -> None:
    # Items for the provider's own models, so every provider's lanes are exercised
    raw = data.draw(accepted_items(models_of(provider)))
    lanes = [lane for lane in routable_lanes(raw) if lane.provider == provider]
    problems = [problem for lane in lanes for problem in violations_on(raw, lane)]
    assert problems == [], "\n".join(problems[:10])


# Today's five bad bodies (issue 26), as items: each reaches an OpenAI lane and must leave it valid.
REGRESSIONS = [
    # a hosted tool, once sent to Chat Completions
    {"messages": [{"role": "user", "content": "News?"}], "tools": [{"type": "web_search"}]},
    {"messages": [{"role": "user", "content": "2+2"}], "tools": [{"type": "code_interpreter"}]},
    # Responses-style function tool and tool_choice, once passed unchanged
    {
        "input": "Weather?",
        "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}],
        "tool_choice": {"type": "function", "name": "get_weather"},
    },
    # a tool call and its result, once two empty user messages
    {
        "input": [
            {"role": "user", "content": "Weather?"},
            {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        ],
        "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}],
    },
]


@pytest.mark.parametrize("payload", REGRESSIONS)
@pytest.mark.parametrize("model", ["gpt-4o-mini", "gpt-4.1-mini", "claude-sonnet-4", "gemini-2.0-flash"])
def test_todays_bad_bodies_leave_every_lane_valid(payload: dict[str, Any], model: str) -> None:
    raw = {"customer_item_id": "a", "operation": "responses", "model": model, "input": payload}
    lanes = routable_lanes(raw)
    assert lanes, "the item routes somewhere"
    assert [p for lane in lanes for p in violations_on(raw, lane)] == []


def test_a_tool_call_and_its_result_reach_the_vendor() -> None:
    raw = {"customer_item_id": "a", "operation": "responses", "model": "gpt-4o-mini", "input": REGRESSIONS[3]}
    for lane in routable_lanes(raw):
        endpoint = DEPLOYMENT.endpoint(lane.provider)
        assert endpoint is not None
        sent = contract(endpoint.adapter).outgoing(
            provider_request(raw, lane), endpoint, lane_max_output_tokens=lane.max_output_tokens
        )
        for operation, body in sent:
            if operation in JOB_OPERATIONS:  # the job itself names a file, not the items
                continue
            text = str(body)
            assert "c1" in text and "sunny" in text and "get_weather" in text, (lane.lane_id, body)


def test_more_than_four_stop_sequences_never_reach_a_vendor() -> None:
    raw = {
        "customer_item_id": "a",
        "operation": "responses",
        "model": "gpt-4o-mini",
        "input": {"messages": [{"role": "user", "content": "x"}], "stop": ["a", "b", "c", "d", "e"]},
    }
    facts, problems = read_item(raw)
    assert facts is None and [(p.code, p.field) for p in problems] == [("invalid_field", "input.stop")]


TOOL_HISTORY = {
    "input": [
        {"role": "user", "content": "Weather?"},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
    ]
}


def test_tool_call_history_without_tools_reaches_only_lanes_that_take_tool_turns() -> None:
    # Bedrock's Llama batch body has no place for tool turns (its transform refuses them): the
    # history needs tool calling, tools declared or not, so that lane is never chosen for it.
    raw = {
        "customer_item_id": "a",
        "operation": "responses",
        "model": "meta-llama/Llama-3.3-70B-Instruct",
        "input": TOOL_HISTORY,
    }
    lanes = routable_lanes(raw)
    assert lanes and all("tool_calling" in lane.runtime_capabilities for lane in lanes)
    assert "bedrock/meta-llama/Llama-3.3-70B-Instruct" not in [lane.lane_id for lane in lanes]
    assert [p for lane in lanes for p in violations_on(raw, lane)] == []


def test_a_structured_output_formats_description_and_strict_reach_every_lane_valid() -> None:
    spec = {"name": "out", "description": "A label.", "schema": {"type": "object"}, "strict": None}
    for model in ("gpt-4o-mini", "gemini-2.0-flash", "meta-llama/Llama-3.3-70B-Instruct"):
        raw = {
            "customer_item_id": "a",
            "operation": "responses",
            "model": model,
            "input": {
                "messages": [{"role": "user", "content": "x"}],
                "response_format": {"type": "json_schema", "json_schema": spec},
            },
        }
        lanes = routable_lanes(raw)
        assert lanes, model
        assert [p for lane in lanes for p in violations_on(raw, lane)] == []


# -- images on Gemini lanes: every image part names its type ----------------------------------------
PNG = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAA"
    "AABJRU5ErkJggg=="
)


def vision_item(url: str, model: str = "gemini-2.0-flash") -> dict[str, Any]:
    content = [{"type": "text", "text": "What is this?"}, {"type": "image_url", "image_url": {"url": url}}]
    return {
        "customer_item_id": "a",
        "operation": "vision",
        "model": model,
        "input": {"messages": [{"role": "user", "content": content}]},
    }


def gemini_lanes(raw: dict[str, Any]) -> list[Lane]:
    return [lane for lane in routable_lanes(raw) if lane.provider == "google"]


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/cat.png",
        "https://images.example.org/a/b.JPG?size=large",
        "https://example.com/photo.webp#x",
        "https://example.com/phone.heic",
        PNG,
        "data:image/jpeg;base64,/9j/4AAQSkZJRgABAQEASABIAAD/2wBDAP8=",
    ],
)
def test_an_image_whose_type_gemini_is_told_reaches_it_with_that_type(url: str) -> None:
    raw = vision_item(url)
    lanes = gemini_lanes(raw)
    assert lanes, "the item routes to a Gemini lane"
    assert [problem for lane in lanes for problem in violations_on(raw, lane)] == []


@pytest.mark.parametrize(
    "part",
    [
        {"fileData": {"fileUri": "https://example.com/render?id=3"}},
        {"inlineData": {"data": "iVBORw0KGgo="}},
        {"fileData": {"fileUri": "https://example.com/a.gif", "mimeType": "image/gif"}},
        {"inlineData": {"mimeType": "image/gif", "data": "R0lGODlhAQABAAAAACw="}},
    ],
)
def test_the_gemini_contract_refuses_an_image_part_without_a_type_gemini_takes(part: dict[str, Any]) -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": "What is this?"}, part]}]}
    found = contract("gemini").request_violations("generateContent", body)
    assert any(".mimeType: " in v for v in found), found
    batch = {"batch": {"inputConfig": {"requests": {"requests": [{"request": body}]}}}}
    assert contract("gemini").request_violations("batchGenerateContent", batch) != []


# An image Gemini cannot be sent (its URL tells no type, or a GIF) needs `any_image_type`, which
# Google's lanes do not offer: such an item never routes there, so their transform never has to
# refuse it. The lanes that read the type from the bytes still take it.
@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/render?id=3",
        "https://example.com/a.gif",
        "data:image/gif;base64,R0lGODlhAQABAIAAAP///wAAACw=",
    ],
)
@pytest.mark.parametrize("operation", ["vision", "responses"])
def test_an_image_gemini_cannot_be_sent_never_routes_to_gemini(url: str, operation: str) -> None:
    raw = {**vision_item(url), "operation": operation}
    assert gemini_lanes(raw) == []
    assert "any_image_type" in read_facts(raw).capabilities
    for model in ("gpt-4o-mini", "claude-sonnet-4", "meta-llama/Llama-3.2-11B-Vision-Instruct"):
        other = {**raw, "model": model}
        lanes = routable_lanes(other)
        assert lanes and [p for lane in lanes for p in violations_on(other, lane)] == [], model


def read_facts(raw: dict[str, Any]) -> Any:
    facts, problems = read_item(raw)
    assert facts is not None, problems
    return facts


# -- embeddings' `dimensions`: only to models that take it ------------------------------------------
# OpenAI's CreateEmbeddingRequest.dimensions: "Only supported in text-embedding-3 and later models";
# the OpenAI-compatible hosts (vLLM) refuse it for BAAI/bge-large-en-v1.5.
def embeddings_item(model: str, **extra: Any) -> dict[str, Any]:
    return {
        "customer_item_id": "a",
        "operation": "embeddings",
        "model": model,
        "input": {"input": "a sentence", **extra},
    }


def test_an_item_with_dimensions_never_routes_to_a_model_that_cannot_shorten_its_vectors() -> None:
    assert routable_lanes(embeddings_item(BGE, dimensions=256)) == []
    lanes = routable_lanes(embeddings_item("text-embedding-3-small", dimensions=256))
    assert [lane.provider for lane in lanes] == ["openai"]
    raw = embeddings_item("text-embedding-3-small", dimensions=256)
    assert [p for lane in lanes for p in violations_on(raw, lane)] == []


def test_an_item_without_dimensions_still_routes_to_every_embeddings_lane() -> None:
    lanes = routable_lanes(embeddings_item(BGE))
    assert {lane.provider for lane in lanes} >= {"together", "deepinfra"}
    assert [p for lane in lanes for p in violations_on(embeddings_item(BGE), lane)] == []


@pytest.mark.parametrize("model", ["gpt-4o-mini", "claude-sonnet-4"])
def test_an_image_url_that_tells_no_type_still_goes_to_lanes_that_fetch_it(model: str) -> None:
    raw = vision_item("https://example.com/render?id=3", model)
    lanes = routable_lanes(raw)
    assert lanes and [problem for lane in lanes for problem in violations_on(raw, lane)] == []


# -- one image's bytes: the catalog's `max_image_bytes` is what the vendor takes ------------------
VISION_LANES = sorted(
    (
        lane
        for lane in CATALOG.lanes
        if lane.max_image_bytes and "vision" in lane.operations and DEPLOYMENT.endpoint(lane.provider)
    ),
    key=lambda lane: lane.lane_id,
)


def jpeg_item(size: int, model: str) -> dict[str, Any]:
    data = base64.b64encode(b"\xff\xd8\xff\xe0" + b"\x00" * (size - 4)).decode()
    return vision_item(f"data:image/jpeg;base64,{data}", model)


@pytest.mark.parametrize("lane", VISION_LANES, ids=lambda lane: lane.lane_id)
def test_the_largest_image_a_lane_admits_fits_its_vendors_contract(lane: Lane) -> None:
    assert lane.max_image_bytes is not None
    # Given an image of exactly the lane's limit: it routes there, and its bodies are valid
    largest = jpeg_item(lane.max_image_bytes, lane.model)
    assert lane in routable_lanes(largest) and violations_on(largest, lane) == []
    # And one byte more goes to no lane of that limit
    assert lane not in routable_lanes(jpeg_item(lane.max_image_bytes + 1, lane.model))


def test_bedrock_lanes_admit_no_more_image_than_converse_takes() -> None:
    # Bedrock's lanes take no images yet (the adapter refuses them); the limits they carry for
    # a vision model added later are Converse's own (botocore: 20 images of at most 3.75 MB)
    lanes = [lane for lane in CATALOG.lanes if lane.provider == "bedrock"]
    assert lanes and {(lane.max_images, lane.max_image_bytes) for lane in lanes} == {
        (bedrock_contract.MAX_IMAGES, bedrock_contract.MAX_IMAGE_BYTES)
    }


# -- tool_choice none: no tool may run, so no hosted tool is needed or sent -----------------------
@pytest.mark.parametrize("model", ["meta-llama/Llama-3.3-70B-Instruct", "gpt-4o-mini", "claude-sonnet-4"])
def test_hosted_tools_beside_tool_choice_none_route_anywhere_and_are_not_sent(model: str) -> None:
    tools = [{"type": "web_search"}]
    raw = {
        "customer_item_id": "a",
        "operation": "responses",
        "model": model,
        "input": {"messages": [{"role": "user", "content": "Answer from memory."}], "tools": tools},
    }
    raw["input"]["tool_choice"] = "none"
    # Then every lane of the model may take it, those without web search too
    lanes = routable_lanes(raw)
    assert {lane.lane_id for lane in lanes} == {
        lane.lane_id for lane in CATALOG.lanes_for(model) if DEPLOYMENT.endpoint(lane.provider)
    }
    # And what each is sent is valid to its vendor, with no hosted tool in it
    assert [problem for lane in lanes for problem in violations_on(raw, lane)] == []
    for lane in lanes:
        endpoint = DEPLOYMENT.endpoint(lane.provider)
        assert endpoint is not None
        vendor = contract(endpoint.adapter)
        sent = vendor.outgoing(
            provider_request(raw, lane), endpoint, lane_max_output_tokens=lane.max_output_tokens
        )
        assert "web_search" not in json.dumps([body for _, body in sent]), lane.lane_id
    # While with tool_choice auto only the lanes that run web search may take it
    raw["input"]["tool_choice"] = "auto"
    assert all("web_search" in lane.hosted_tools for lane in routable_lanes(raw))


# -- parallel_tool_calls false: one tool call at most, said in each vendor's words ------------------
def _sent(raw: dict[str, Any], lane: Lane) -> list[tuple[str, Any]]:
    endpoint = DEPLOYMENT.endpoint(lane.provider)
    assert endpoint is not None
    return contract(endpoint.adapter).outgoing(
        provider_request(raw, lane), endpoint, lane_max_output_tokens=lane.max_output_tokens
    )


WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}


def _serial_item(model: str, tools: list[dict[str, Any]]) -> dict[str, Any]:
    said = {
        "messages": [{"role": "user", "content": "Weather?"}],
        "tools": tools,
        "parallel_tool_calls": False,
    }
    return {"customer_item_id": "a", "operation": "responses", "model": model, "input": said}


@pytest.mark.parametrize(
    ("model", "tools", "providers"),
    [
        ("gpt-4o-mini", [WEATHER], {"openai"}),
        ("gpt-4o-mini", [{"type": "web_search"}], {"openai"}),  # the Responses API's own switch
        ("claude-sonnet-4", [WEATHER], {"anthropic"}),
        ("meta-llama/Llama-3.3-70B-Instruct", [WEATHER], {"groq"}),
    ],
)
def test_parallel_tool_calls_false_reaches_only_lanes_that_can_say_it(
    model: str, tools: list[dict[str, Any]], providers: set[str]
) -> None:
    raw = _serial_item(model, tools)
    lanes = routable_lanes(raw)
    # Only the lanes whose API has the switch take the item (never Together, Fireworks,
    # DeepInfra, the edges, Bedrock or Gemini), and each is sent a body its vendor takes
    assert {lane.provider for lane in lanes} == providers
    assert [problem for lane in lanes for problem in violations_on(raw, lane)] == []
    switch = {"anthropic": '"tool_choice": {"type": "auto", "disable_parallel_tool_use": true}'}
    for lane in lanes:
        sent = [body for operation, body in _sent(raw, lane) if operation not in JOB_OPERATIONS]
        assert sent  # whole, streamed and in a batch: each says it
        for body in sent:
            assert switch.get(lane.provider, '"parallel_tool_calls": false') in json.dumps(body), lane.lane_id


def test_parallel_tool_calls_false_without_tools_is_not_sent_and_routes_anywhere() -> None:
    model = "meta-llama/Llama-3.3-70B-Instruct"
    raw = _serial_item(model, [])
    del raw["input"]["tools"]
    lanes = routable_lanes(raw)
    assert {lane.lane_id for lane in lanes} == {
        lane.lane_id for lane in CATALOG.lanes_for(model) if DEPLOYMENT.endpoint(lane.provider)
    }
    for lane in lanes:
        text = json.dumps([body for _, body in _sent(raw, lane)])
        assert "parallel" not in text, lane.lane_id
    assert [problem for lane in lanes for problem in violations_on(raw, lane)] == []


# -- a message's name: who of several participants speaks (AutoGen's agents) ------------------------
@pytest.mark.parametrize("model", ["gpt-4o-mini", "gpt-4.1-mini"])
def test_a_message_name_reaches_only_lanes_whose_api_takes_one(model: str) -> None:
    said = {"messages": [{"role": "user", "content": "Hi", "name": "planner_1"}]}
    raw = {"customer_item_id": "a", "operation": "responses", "model": model, "input": said}
    lanes = routable_lanes(raw)
    assert {lane.provider for lane in lanes} == {"openai"}
    assert [problem for lane in lanes for problem in violations_on(raw, lane)] == []
    for lane in lanes:
        sent = [body for operation, body in _sent(raw, lane) if operation not in JOB_OPERATIONS]
        assert sent and all('"name": "planner_1"' in json.dumps(body) for body in sent), lane.lane_id


def test_no_open_weight_lane_is_sent_a_message_name() -> None:
    # Groq's compatibility page lists messages[].name as refused (400); the other hosts document none
    said = {"messages": [{"role": "user", "content": "Hi", "name": "planner_1"}]}
    raw = {"customer_item_id": "a", "operation": "responses", "model": "meta-llama/Llama-3.3-70B-Instruct"}
    assert routable_lanes({**raw, "input": said}) == []
