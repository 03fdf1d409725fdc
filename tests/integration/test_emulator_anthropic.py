"""The Anthropic emulator and adapter, kept honest by the official `anthropic` SDK.

(a) Every kind of answer the emulator gives (a message, its stream events, models, message
    batches and their results lines, every error) is parsed with the SDK's own client and
    validated with the SDK's types (`anthropic.types`): a field the SDK requires and the
    emulator leaves out fails, and so does a field the emulator invents.
(b) Every request body the adapter sends is checked with the Anthropic contract
    (batchroute_tools/contracts/anthropic.py: the SDK's request types, strictly, and the API's
    rules), the same check the emulator makes of every request, which answers the API's 400
    for what the API refuses.
(c) The adapter is driven over HTTP against the emulator: complete, stream, server tools
    (web search, code execution: whole, streamed, in a batch, counted in usage), the vendor's
    faults (429 with retry-after, 529, 500, a reset mid-stream, a dropped connection, a 400,
    silence before the first byte) and a message batch end to end, by hand and through the
    lane runner.
"""

from __future__ import annotations

import functools
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import jsonschema
import pytest
from anthropic.types import Message, MessageParam, ModelInfo, RawMessageStreamEvent
from anthropic.types.message_create_params import MessageCreateParamsBase
from anthropic.types.messages import MessageBatch, MessageBatchIndividualResponse
from anthropic.types.messages.batch_create_params import Request as BatchRequest
from anthropic.types.shared.error_response import ErrorResponse
from httpx_sse import connect_sse
from pydantic import BaseModel, TypeAdapter
from typing_extensions import get_type_hints  # the SDK's TypedDicts are its own

from batchroute.catalog import builtin_catalog
from batchroute.catalog.environments import lane_output_limits
from batchroute.providers import base
from batchroute.providers.anthropic import make_batch, make_sync
from batchroute.providers.anthropic.client import AnthropicBatches, AnthropicMessages
from batchroute.providers.endpoints import ProviderEndpoint
from batchroute.providers.retry import RetryPolicy
from batchroute.services.workflow.runner import run_lane_batch_job
from batchroute_tools.contracts.anthropic import PINNED_ONLY, request_violations
from batchroute_tools.emulators.anthropic import AnthropicEmulator
from batchroute_tools.emulators.behaviour import Behaviour, EmulatorConfig
from batchroute_tools.emulators.server import EmulatorServer, Reply, Request

MODEL = "claude-sonnet-4-20250514"
LIMITS = lane_output_limits(builtin_catalog().lanes, "anthropic")  # as a deployment loads them
BATCH_SECONDS = 0.2


@pytest.fixture(scope="module")
def emulator() -> Iterator[tuple[EmulatorServer, AnthropicEmulator, list[Request]]]:
    emu = AnthropicEmulator(Behaviour(EmulatorConfig(batch_seconds=BATCH_SECONDS)))
    received: list[Request] = []
    dispatch = emu.vendor.dispatch

    def recording(request: Request) -> Reply:
        received.append(request)
        return dispatch(request)

    emu.vendor.dispatch = recording  # type: ignore[method-assign]
    server = EmulatorServer([emu.vendor]).start()
    try:
        yield server, emu, received
    finally:
        server.stop()


@pytest.fixture
def base_url(emulator: tuple[EmulatorServer, AnthropicEmulator, list[Request]]) -> str:
    return emulator[0].base_url + "/anthropic"


@pytest.fixture
def sent(emulator: tuple[EmulatorServer, AnthropicEmulator, list[Request]]) -> list[Request]:
    """The requests the emulator receives during this test."""
    emulator[2].clear()
    return emulator[2]


@pytest.fixture
def sdk(base_url: str) -> Iterator[anthropic.Anthropic]:
    client = anthropic.Anthropic(api_key="sk-ant-test", base_url=base_url, max_retries=0, timeout=10)
    yield client
    client.close()


@pytest.fixture
def wire(base_url: str) -> Iterator[httpx.Client]:
    """Plain HTTP, for the bytes of an answer before any SDK reads them."""
    headers = {"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=10) as client:
        yield client


@pytest.fixture
def sync(base_url: str) -> AnthropicMessages:
    endpoint = ProviderEndpoint("anthropic", "anthropic", base_url=base_url, output_limits=LIMITS)
    return make_sync(endpoint, "sk-ant-test")


@pytest.fixture
def batches(base_url: str) -> AnthropicBatches:
    endpoint = ProviderEndpoint("anthropic", "anthropic", base_url=base_url, output_limits=LIMITS)
    return make_batch(endpoint, "sk-ant-test")


def say(text: str) -> str:
    """Unique content: the emulator's first-time faults are per request content."""
    return f"{text} #{uuid.uuid4().hex[:8]}"


def ask(
    text: str, *, custom_id: str = "seq-0", max_output_tokens: int = 64, **kw: Any
) -> base.ProviderRequest:
    return base.ProviderRequest(
        custom_id=custom_id,
        customer_item_id=custom_id,
        operation=kw.pop("operation", "responses"),
        model="claude-sonnet-4",
        provider_model_id=MODEL,
        input=kw.pop("input", None) or {"messages": [{"role": "user", "content": text}]},
        max_output_tokens=max_output_tokens,
        **kw,
    )


def user(text: str) -> list[MessageParam]:
    return [{"role": "user", "content": text}]


# -- strict SDK types --------------------------------------------------------------------------
def strict(kind: Any, data: object) -> Any:
    """`data` parsed as the SDK's type `kind`: a missing required field raises, and a field
    the type does not declare (which the SDK's models would quietly keep) fails."""
    parsed = adapter(kind).validate_python(data)
    invented = list(_extras(parsed, "$"))
    assert not invented, f"fields the SDK's {kind} does not declare: {invented}"
    return parsed


@functools.cache
def adapter(kind: Any) -> TypeAdapter[Any]:
    """One TypeAdapter per type (building one is slow), kept alive: the iterables it validates
    lazily need it."""
    return TypeAdapter(kind)


def _extras(value: object, path: str) -> Iterator[str]:
    if isinstance(value, BaseModel):
        yield from (f"{path}.{name}" for name in value.model_extra or {})
        for name in type(value).model_fields:
            yield from _extras(getattr(value, name), f"{path}.{name}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _extras(item, f"{path}[{index}]")


def test_the_strict_checks_catch_what_they_should() -> None:
    model = {"type": "model", "id": "m", "display_name": "M", "created_at": "2025-01-01T00:00:00Z"}
    strict(ModelInfo, {**model, "lifecycle": "active"})
    with pytest.raises(AssertionError):  # an invented answer field
        strict(ModelInfo, {**model, "lifecycle": "active", "invented": True})


def test_the_sampling_exemption_is_still_needed() -> None:
    """The contract exempts the pinned API version's sampling parameters from the SDK-type
    check: once the SDK declares them again, the exemption goes."""
    declared = get_type_hints(MessageCreateParamsBase)
    assert not PINNED_ONLY.keys() & declared.keys(), "the SDK declares them again: drop PINNED_ONLY"


# -- (a) every answer, parsed by the SDK ------------------------------------------------------
def test_sdk_parses_a_message(sdk: anthropic.Anthropic, wire: httpx.Client) -> None:
    message = sdk.messages.create(model=MODEL, max_tokens=200, messages=user("Hello"))
    assert isinstance(message, Message)
    assert message.content[0].type == "text"
    assert message.content[0].text.startswith(f"Simulated answer from anthropic/{MODEL}:")
    assert message.stop_reason == "end_turn" and message.usage.output_tokens > 0
    raw = wire.post("/v1/messages", json={"model": MODEL, "max_tokens": 3, "messages": user("Hello")})
    assert raw.status_code == 200 and raw.headers["content-type"] == "application/json"
    assert raw.headers["request-id"].startswith("req_")
    cut = strict(Message, raw.json())
    assert cut.stop_reason == "max_tokens" and cut.usage.output_tokens == 3


def test_sdk_parses_every_stream_event(sdk: anthropic.Anthropic, wire: httpx.Client) -> None:
    body = {"model": MODEL, "max_tokens": 200, "messages": user("Stream it"), "stream": True}
    names: list[str] = []
    with connect_sse(wire, "POST", "/v1/messages", json=body) as source:
        assert source.response.headers["content-type"] == "text/event-stream; charset=utf-8"
        for event in source.iter_sse():
            names.append(event.event)
            data = event.json()
            assert data["type"] == event.event
            if event.event == "ping":
                assert data == {"type": "ping"}
            else:
                strict(RawMessageStreamEvent, data)
    deltas = names.count("content_block_delta")
    assert deltas > 0
    assert names == [
        "message_start",
        "content_block_start",
        "ping",
        *["content_block_delta"] * deltas,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    events = list(sdk.messages.create(model=MODEL, max_tokens=200, messages=user("Stream it"), stream=True))
    assert [e.type for e in events] == [n for n in names if n != "ping"]
    whole = sdk.messages.create(model=MODEL, max_tokens=200, messages=user("Stream it"))
    with sdk.messages.stream(model=MODEL, max_tokens=200, messages=user("Stream it")) as stream:
        final = stream.get_final_message()
    assert [(b.type, getattr(b, "text", None)) for b in final.content] == [
        (b.type, getattr(b, "text", None)) for b in whole.content
    ]
    assert (final.usage.input_tokens, final.usage.output_tokens, final.stop_reason) == (
        whole.usage.input_tokens,
        whole.usage.output_tokens,
        whole.stop_reason,
    )


def test_sdk_lists_the_models(sdk: anthropic.Anthropic, wire: httpx.Client) -> None:
    page = wire.get("/v1/models").json()
    assert set(page) == {"data", "has_more", "first_id", "last_id"}
    for model in page["data"]:
        strict(ModelInfo, model)
    assert [m.id for m in sdk.models.list()] == ["claude-3-5-haiku-20241022", MODEL]


def batch_entry(custom_id: str, text: str) -> BatchRequest:
    return {"custom_id": custom_id, "params": {"model": MODEL, "max_tokens": 50, "messages": user(text)}}


def wait_ended(sdk: anthropic.Anthropic, batch_id: str) -> MessageBatch:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        batch = sdk.messages.batches.retrieve(batch_id)
        if batch.processing_status == "ended":
            return batch
        time.sleep(0.05)
    raise AssertionError(f"batch {batch_id} never ended")


def test_sdk_runs_a_message_batch(sdk: anthropic.Anthropic, wire: httpx.Client) -> None:
    entries = [
        batch_entry("ok-1", say("First")),
        batch_entry("ok-2", say("Second")),
        batch_entry("fails", say("[simulate:fail]")),
        batch_entry("busy", say("[simulate:overloaded]")),
        batch_entry("late", say("[simulate:expire]")),
    ]
    created = sdk.messages.batches.create(requests=entries)
    raw = strict(MessageBatch, wire.get(f"/v1/messages/batches/{created.id}").json())
    assert raw.processing_status == "in_progress" and raw.results_url is None
    assert raw.request_counts.processing == 5
    ended = wait_ended(sdk, created.id)
    strict(MessageBatch, wire.get(f"/v1/messages/batches/{created.id}").json())
    counts = ended.request_counts
    assert (counts.processing, counts.succeeded, counts.errored, counts.expired) == (0, 2, 2, 1)
    assert ended.results_url is not None and ended.ended_at is not None
    fetched = wire.get(ended.results_url)
    assert fetched.headers["content-type"] == "application/binary"  # as Anthropic serves the file
    lines = fetched.text.splitlines()
    kinds = {}
    for line in lines:
        parsed = strict(MessageBatchIndividualResponse, json.loads(line))
        kinds[parsed.custom_id] = parsed.result
    assert {k: r.type for k, r in kinds.items()} == {
        "ok-1": "succeeded",
        "ok-2": "succeeded",
        "fails": "errored",
        "busy": "errored",
        "late": "expired",
    }
    assert kinds["fails"].error.error.type == "invalid_request_error"
    assert kinds["busy"].error.error.type == "overloaded_error"
    assert kinds["ok-1"].message.usage.service_tier == "batch"
    assert sorted(r.custom_id for r in sdk.messages.batches.results(created.id)) == sorted(kinds)


def test_sdk_cancels_a_message_batch(sdk: anthropic.Anthropic, wire: httpx.Client) -> None:
    created = sdk.messages.batches.create(requests=[batch_entry("a", say("Cancel me"))])
    canceling = wire.post(f"/v1/messages/batches/{created.id}/cancel").json()
    assert strict(MessageBatch, canceling).processing_status == "canceling"
    assert canceling["cancel_initiated_at"] is not None
    ended = sdk.messages.batches.retrieve(created.id)
    assert ended.processing_status == "ended" and ended.request_counts.canceled == 1
    assert [r.result.type for r in sdk.messages.batches.results(created.id)] == ["canceled"]
    assert sdk.messages.batches.cancel(created.id).processing_status == "ended"
    with pytest.raises(anthropic.NotFoundError) as missing:
        sdk.messages.batches.retrieve("msgbatch_unknown")
    strict(ErrorResponse, missing.value.body)


@pytest.mark.parametrize(
    ("marker", "error", "status", "kind"),
    [
        ("[simulate:fail]", anthropic.BadRequestError, 400, "invalid_request_error"),
        ("[simulate:transient]", anthropic.InternalServerError, 500, "api_error"),
        ("[simulate:429]", anthropic.RateLimitError, 429, "rate_limit_error"),
        ("[simulate:overloaded]", anthropic.OverloadedError, 529, "overloaded_error"),
    ],
)
def test_sdk_reads_every_error(
    sdk: anthropic.Anthropic, marker: str, error: type[anthropic.APIStatusError], status: int, kind: str
) -> None:
    with pytest.raises(error) as raised:
        sdk.messages.create(model=MODEL, max_tokens=20, messages=user(say(marker)))
    assert raised.value.status_code == status
    body = strict(ErrorResponse, raised.value.body)
    assert body.error.type == kind and body.request_id == raised.value.response.headers["request-id"]
    if status == 429:
        assert raised.value.response.headers["retry-after"] == "1"


def test_sdk_sees_a_dropped_connection(sdk: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.APIConnectionError):
        sdk.messages.create(model=MODEL, max_tokens=20, messages=user("[simulate:down]"))


WEATHER_TOOL = {
    "name": "get_weather",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}
BASE: dict[str, Any] = {"model": MODEL, "max_tokens": 5, "messages": user("hi")}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"model": MODEL, "messages": user("hi")}, "max_tokens: Field required"),
        ({**BASE, "messages": []}, "at least one message"),
        ({**BASE, "messages": [{"role": "assistant", "content": "a"}, *user("b")]}, "first message"),
        ({**BASE, "seed": 3}, "$.seed: unknown field"),
        ({**BASE, "temperature": 1.5}, "$.temperature: should be between 0 and 1"),
        ({**BASE, "stop_sequences": ["END", "  "]}, "stop_sequences[1]"),
        # a hosted tool passed as a function tool, and tools in OpenAI's own forms
        (
            {
                **BASE,
                "tools": [
                    {"name": "web_search", "input_schema": {"type": "object"}},
                    {"type": "web_search_20250305", "name": "web_search"},
                ],
            },
            "tool names must be unique",
        ),
        ({**BASE, "tools": [{"type": "web_search_preview"}]}, "(type 'web_search_preview')"),
        ({**BASE, "tools": [{"type": "function", "function": {"name": "f"}}]}, "(type 'function')"),
        ({**BASE, "tools": [{**WEATHER_TOOL, "parameters": {}}]}, "$.tools[0].parameters: unknown field"),
        (
            {**BASE, "tools": [WEATHER_TOOL], "tool_choice": "required"},
            "$.tool_choice: is none of the 4 forms",
        ),
        ({**BASE, "tools": [WEATHER_TOOL], "tool_choice": {"type": "tool", "name": "x"}}, "names no tool"),
        (
            {**BASE, "messages": [{"role": "user", "content": [{"type": "text", "text": "x", "cache": 1}]}]},
            "$.messages[0].content[0].cache: unknown field",
        ),
        (
            {
                **BASE,
                "messages": [
                    *user("a"),
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}],
                    },
                ],
            },
            "unexpected tool_use_id",
        ),
        (
            {**BASE, "tools": [{"type": "code_execution_20250522", "name": "code_execution"}]},
            "anthropic-beta",
        ),
        ({**BASE, "model": "claude-unknown"}, "model: claude-unknown"),
    ],
)
def test_the_emulator_refuses_what_the_api_refuses(
    wire: httpx.Client, body: dict[str, Any], message: str
) -> None:
    answer = wire.post("/v1/messages", json=body)
    assert answer.status_code == (404 if message.startswith("model:") else 400)
    error = strict(ErrorResponse, answer.json())
    assert error.error.type == ("not_found_error" if answer.status_code == 404 else "invalid_request_error")
    assert message in error.error.message
    assert error.request_id == answer.headers["request-id"]
    url = str(wire.base_url).rstrip("/") + "/v1/messages"
    unversioned = httpx.post(url, json=body, headers={"x-api-key": "k"})
    assert unversioned.status_code == 400 and "anthropic-version" in unversioned.json()["error"]["message"]


def test_the_emulator_takes_what_the_api_takes(wire: httpx.Client) -> None:
    """Five stop sequences (Anthropic has no limit of four), consecutive user turns (the API
    merges them), a tool round trip, server tools with their beta."""
    round_trip = [
        *user("Weather in Paris?"),
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "Sunny"}]},
        *user("And tomorrow?"),
    ]
    server = [
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 2},
        {"type": "code_execution_20250522", "name": "code_execution"},
    ]
    for body in (
        {**BASE, "stop_sequences": ["a", "b", "c", "d", "e"], "temperature": 0.5, "top_p": 0.9},
        {**BASE, "messages": round_trip, "tools": [WEATHER_TOOL], "tool_choice": {"type": "any"}},
        {**BASE, "tools": server, "tool_choice": {"type": "tool", "name": "web_search"}},
    ):
        beta = {"anthropic-beta": "code-execution-2025-05-22"}
        answer = wire.post("/v1/messages", json=body, headers=beta)
        assert answer.status_code == 200, answer.text
        strict(Message, answer.json())


def test_a_batch_the_api_refuses(wire: httpx.Client) -> None:
    """The envelope is checked when the batch is created; a request's params are checked as
    it runs, an invalid one being that request's errored result
    (tests/integration/test_anthropic_batch_params.py)."""
    good = {"custom_id": "a", "params": BASE}
    for body, message in (
        ({"requests": []}, "1 to 100000 requests"),
        ({"requests": [good, good]}, "is not unique"),
        ({"requests": [{**good, "custom_id": "has space"}]}, "custom_id"),
        ({"requests": [{"custom_id": "a"}]}, "$.requests[0].params: field required"),
        ({"requests": [{**good, "extra": 1}]}, "$.requests[0].extra: unknown field"),
        ({"requests": [good], "betas": ["x"]}, "$.betas: unknown field"),
    ):
        answer = wire.post("/v1/messages/batches", json=body)
        assert answer.status_code == 400
        assert message in strict(ErrorResponse, answer.json()).error.message


# -- (b) every request body the adapter sends, against the SDK's request types -----------------
RICH_INPUTS: list[dict[str, Any]] = [
    {"input": "Plain text, Responses style"},
    {
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "Search, then compute."}]}],
        "tools": [
            {"type": "web_search", "filters": {"allowed_domains": ["example.com"]}},
            {"type": "code_interpreter", "container": {"type": "auto"}},
            {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}},
        ],
        "tool_choice": "auto",
    },
    {
        "messages": [{"role": "user", "content": "Search the news."}],
        "tools": [{"type": "web_search_preview", "user_location": {"type": "approximate", "country": "FR"}}],
        "tool_choice": {"type": "web_search_preview"},
    },
    {
        "system": "Be brief.",
        "instructions": "Answer in English.",
        "messages": [
            {"role": "system", "content": "No lists."},
            {"role": "user", "content": "One."},
            {"role": "user", "content": [{"type": "text", "text": "Two."}]},
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": "Three."},
        ],
        "temperature": 0.3,
        "top_p": 0.9,
        "stop": ["END", "STOP"],
    },
    {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Compare."},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                    {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
                ],
            }
        ]
    },
    {
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 21 C"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Current weather",
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    },
                },
            }
        ],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    },
    {
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "Label this."}]}],
        "text": {
            "format": {
                "type": "json_schema",
                "name": "label",
                "schema": {
                    "type": "object",
                    "properties": {"label": {"type": "string"}},
                    "required": ["label"],
                    "additionalProperties": False,
                },
            }
        },
    },
]


def test_every_body_the_adapter_sends_fits_the_sdk_types(
    sync: AnthropicMessages, batches: AnthropicBatches, sent: list[Request]
) -> None:
    for number, payload in enumerate(RICH_INPUTS):
        request = ask("", input=payload, custom_id=f"seq-{number}", max_output_tokens=0)
        assert sync.complete(request).status == "completed"
        assert isinstance(list(sync.stream(request))[-1], base.StreamEnd)
    job = batches.submit(ask("", input=p, custom_id=f"seq-{n}") for n, p in enumerate(RICH_INPUTS))
    calls = [r for r in sent if r.method == "POST"]
    assert len(calls) == 2 * len(RICH_INPUTS) + 1
    for call in calls:
        assert call.headers["x-api-key"] == "sk-ant-test"
        assert call.headers["anthropic-version"] == "2023-06-01"
        assert call.headers["anthropic-beta"] == "code-execution-2025-05-22"
        assert call.headers["content-type"] == "application/json"
    for call in calls[:-1]:
        body = call.json()
        assert request_violations("messages", body) == []
        assert body["max_tokens"] == 64_000  # the lane's limit: the requests set none
    assert request_violations("messages.batches", calls[-1].json()) == []
    for entry in calls[-1].json()["requests"]:
        adapter(BatchRequest).validate_python(entry)
    assert poll_until_done(batches, job) == "completed"
    refused = [r.error for r in batches.results(job) if r.error is not None]
    assert refused == []  # the emulator, checking as the API checks, took every line


# -- (c) the adapter over HTTP ---------------------------------------------------------------
def test_complete_and_stream(sync: AnthropicMessages) -> None:
    whole = sync.complete(ask("Hello there"))
    assert whole.status == "completed" and whole.output is not None
    assert whole.output["content"].startswith(f"Simulated answer from anthropic/{MODEL}:")
    assert whole.raw is not None and whole.raw["type"] == "message"
    events = list(sync.stream(ask("Hello there")))
    assert isinstance(events[0], base.StreamStart)
    deltas = [e.text for e in events if isinstance(e, base.StreamDelta)]
    end = events[-1]
    assert isinstance(end, base.StreamEnd)
    assert "".join(deltas) == end.result.output["content"] == whole.output["content"]  # type: ignore[index]
    assert end.usage == whole.usage and whole.usage.completion_tokens == len(deltas)
    assert end.result.raw is not None and end.result.raw["id"] == whole.raw["id"]
    cut = sync.complete(ask("Hello there", max_output_tokens=3))
    assert cut.output is not None and cut.output["finish_reason"] == "length"
    assert cut.usage.completion_tokens == 3
    assert sync.check() == ["claude-3-5-haiku-20241022", MODEL]


def test_a_429_says_when_to_retry(sync: AnthropicMessages) -> None:
    request = ask(say("[simulate:429]"))
    with pytest.raises(base.TransientProviderError) as raised:
        sync.complete(request)
    assert raised.value.code == "rate_limited" and raised.value.retry_after_seconds == 1.0
    assert sync.complete(request.next_attempt()).status == "completed"


def test_a_529_is_overloaded(sync: AnthropicMessages) -> None:
    request = ask(say("[simulate:overloaded]"))
    with pytest.raises(base.TransientProviderError) as raised:
        next(sync.stream(request))
    assert raised.value.code == "overloaded"
    assert isinstance(list(sync.stream(request))[-1], base.StreamEnd)


def test_a_500_is_transient(sync: AnthropicMessages) -> None:
    with pytest.raises(base.TransientProviderError) as raised:
        sync.complete(ask(say("[simulate:transient]")))
    assert raised.value.code == "provider_5xx"


def test_a_reset_mid_stream_interrupts_it_after_the_start(sync: AnthropicMessages) -> None:
    request = ask(say("[simulate:reset]"))
    events = sync.stream(request)
    assert isinstance(next(events), base.StreamStart)
    with pytest.raises(base.TransientProviderError) as raised:
        list(events)
    assert raised.value.code == "stream_interrupted"
    assert isinstance(list(sync.stream(request))[-1], base.StreamEnd)  # the retry is answered
    with pytest.raises(base.TransientProviderError) as whole:
        sync.complete(ask(say("[simulate:reset]")))  # a whole answer broken off halfway
    assert whole.value.code == "stream_interrupted"


def test_stop_sequences_cut_the_answer_as_anthropic_does(sync: AnthropicMessages) -> None:
    # Given a request whose stop sequences the answer meets (" from" in "Simulated answer from")
    stopped = ask(
        say("Say hi"), input={"messages": [{"role": "user", "content": say("hi")}], "stop": [" from", "zzz"]}
    )
    whole = sync.complete(stopped)
    # Then the answer ends before it, as Anthropic's says: stop_reason stop_sequence, naming it
    assert whole.output is not None and whole.raw is not None
    assert (whole.output["content"], whole.output["finish_reason"]) == ("Simulated answer", "stop")
    assert (whole.raw["stop_reason"], whole.raw["stop_sequence"]) == ("stop_sequence", " from")
    assert whole.usage.completion_tokens == 2
    events = list(sync.stream(stopped))
    assert isinstance(events[-1], base.StreamEnd) and events[-1].result.output == whole.output
    assert "".join(e.text for e in events if isinstance(e, base.StreamDelta)) == "Simulated answer"


def test_a_dropped_connection_is_unavailable(sync: AnthropicMessages) -> None:
    with pytest.raises(base.ProviderUnavailable):
        sync.complete(ask("[simulate:down]"))
    with pytest.raises(base.ProviderUnavailable):
        next(sync.stream(ask("[simulate:down:anthropic]")))


def test_a_400_is_permanent(sync: AnthropicMessages) -> None:
    with pytest.raises(base.PermanentProviderError) as raised:
        sync.complete(ask("[simulate:fail]"))
    assert raised.value.code == "provider_rejected"
    assert "simulated permanent failure" in raised.value.message
    unknown = base.ProviderRequest("seq-0", "x", "responses", "m", "claude-unknown", {"input": "Hi"}, 10)
    with pytest.raises(base.PermanentProviderError) as not_found:
        sync.complete(unknown)
    assert not_found.value.code == "not_found"


def test_silence_before_the_first_byte_times_out(sync: AnthropicMessages) -> None:
    started = time.monotonic()
    with pytest.raises(base.TransientProviderError) as raised:
        next(sync.stream(ask(say("[simulate:timeout:anthropic]"), first_byte_timeout_seconds=0.3)))
    assert raised.value.code == "provider_timeout"
    assert time.monotonic() - started < 5


def poll_until_done(batches: AnthropicBatches, job_id: str) -> str:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        status = batches.poll(job_id)
        if status.terminal:
            return status.state
        assert status.state == "in_progress" and status.total > 0
        time.sleep(0.05)
    raise AssertionError("the batch never ended")


def test_a_message_batch_end_to_end(batches: AnthropicBatches) -> None:
    texts = ["Summarize A", "Summarize B", "[simulate:fail]", "[simulate:expire]", "[simulate:malformed]"]
    requests = [ask(say(text), custom_id=f"seq-{n}") for n, text in enumerate(texts)]
    job = batches.submit(requests)
    assert batches.poll(job).state == "in_progress"
    assert poll_until_done(batches, job) == "completed"
    status = batches.poll(job)
    assert (status.total, status.completed_count, status.failed_count) == (5, 3, 2)
    results = {r.custom_id: r for r in batches.results(job)}
    assert sorted(results) == ["seq-0", "seq-1", "seq-2", "seq-3"]  # seq-4's line is not JSON
    assert results["seq-0"].status == results["seq-1"].status == "completed"
    assert results["seq-0"].usage.completion_tokens > 0
    failed, expired = results["seq-2"].error, results["seq-3"].error
    assert failed is not None and (failed.code, failed.transient) == ("provider_rejected", False)
    assert expired is not None and (expired.code, expired.transient) == ("batch_expired", True)
    again = batches.submit([requests[4]])  # the malformed line is only malformed the first time
    assert poll_until_done(batches, again) == "completed"
    assert [r.status for r in batches.results(again)] == ["completed"]


def test_a_batch_holding_a_request_that_finds_anthropic_down_is_never_made(
    batches: AnthropicBatches,
) -> None:
    # Given a batch one of whose requests finds the provider down (another provider's mark
    # takes nothing down here)
    fine = ask(say("Fine [simulate:down:bedrock]"), custom_id="seq-0")
    down = ask(say("Gone [simulate:down:anthropic]"), custom_id="seq-1")
    # Then its create is dropped unanswered: the lane is unavailable (it fails over), as a
    # sync request to a provider that is down is
    with pytest.raises(base.ProviderUnavailable) as raised:
        batches.submit([fine, down])
    assert raised.value.code == "provider_unreachable"
    assert poll_until_done(batches, batches.submit([fine])) == "completed"


def test_a_cancelled_batch_and_an_unknown_one(batches: AnthropicBatches) -> None:
    job = batches.submit([ask(say("Cancel"), custom_id="seq-0")])
    batches.cancel(job)
    assert batches.poll(job).state == "cancelled"
    [result] = batches.results(job)
    assert result.error is not None and (result.error.code, result.error.transient) == (
        "batch_request_canceled",
        True,
    )
    with pytest.raises(base.UnknownJob):
        batches.poll("msgbatch_never_was")


def test_the_lane_runner_drives_a_batch_to_the_end(batches: AnthropicBatches) -> None:
    [lane] = [x for x in builtin_catalog().lanes_for("claude-sonnet-4") if x.provider == "anthropic"]
    assert lane.provider_model_id == MODEL
    texts = ["Fine", "[simulate:fail]", "[simulate:expire]", "[simulate:malformed]", "[simulate:overloaded]"]
    items = {
        seq: {
            "customer_item_id": f"item-{seq}",
            "operation": "responses",
            "model": lane.model,
            "input": {"messages": [{"role": "user", "content": say(text)}]},
            "max_output_tokens": 40,
        }
        for seq, text in enumerate(texts)
    }
    reported: dict[int, tuple[base.ProviderResult, int]] = {}

    def load(seqs: Any) -> Iterator[tuple[int, dict[str, Any]]]:
        yield from ((seq, items[seq]) for seq in sorted(items if seqs is None else seqs))

    outcome = run_lane_batch_job(
        load,
        lane=lane,
        provider=batches,
        retry=RetryPolicy(max_attempts=3, sleeper=lambda _s: None),
        on_result=lambda seq, result, attempts: reported.__setitem__(seq, (result, attempts)),
        poll_interval_seconds=0.05,
    )
    assert outcome.finished and not outcome.unavailable
    states = {seq: (r.status, r.error.code if r.error else None, n) for seq, (r, n) in reported.items()}
    assert states == {
        0: ("completed", None, 1),
        1: ("failed", "provider_rejected", 1),
        2: ("failed", "batch_expired", 3),  # expired every time, resubmitted until the last try
        3: ("completed", None, 2),  # its line was not JSON: missing, resubmitted, answered
        4: ("completed", None, 2),  # overloaded_error, then answered
    }


# -- server tools, end to end ------------------------------------------------------------------
SEARCH_AND_RUN = {
    "messages": [{"role": "user", "content": "Find the population of Paris, then halve it."}],
    "tools": [{"type": "web_search_preview"}, {"type": "code_interpreter", "container": {"type": "auto"}}],
}


def test_sdk_parses_server_tool_answers(sdk: anthropic.Anthropic, wire: httpx.Client) -> None:
    tools: Any = [
        {"type": "web_search_20250305", "name": "web_search"},
        {"type": "code_execution_20250522", "name": "code_execution"},
    ]
    beta = {"anthropic-beta": "code-execution-2025-05-22"}
    body = {"model": MODEL, "max_tokens": 100, "messages": user("Search it"), "tools": tools}
    message = strict(Message, wire.post("/v1/messages", json=body, headers=beta).json())
    assert [b.type for b in message.content] == [
        "server_tool_use",
        "web_search_tool_result",
        "server_tool_use",
        "code_execution_tool_result",
        "text",
    ]
    assert (
        message.usage.server_tool_use is not None and message.usage.server_tool_use.web_search_requests == 1
    )
    with connect_sse(wire, "POST", "/v1/messages", json={**body, "stream": True}, headers=beta) as source:
        for event in source.iter_sse():
            if event.event != "ping":
                strict(RawMessageStreamEvent, event.json())
    with sdk.messages.stream(
        model=MODEL, max_tokens=100, messages=user("Search it"), tools=tools, extra_headers=beta
    ) as stream:
        final = stream.get_final_message()
    assert [b.model_dump() for b in final.content] == [b.model_dump() for b in message.content]
    assert final.usage.server_tool_use == message.usage.server_tool_use
    chosen = {**body, "tool_choice": {"type": "none"}}
    assert [b["type"] for b in wire.post("/v1/messages", json=chosen, headers=beta).json()["content"]] == [
        "text"
    ]


def test_server_tools_whole_streamed_and_in_a_batch(
    sync: AnthropicMessages, batches: AnthropicBatches
) -> None:
    request = ask("", input=SEARCH_AND_RUN)
    whole = sync.complete(request)
    assert whole.status == "completed" and whole.output is not None
    assert whole.output["content"].startswith(f"Simulated answer from anthropic/{MODEL}:")
    assert "tool_calls" not in whole.output  # server tools ran at the vendor: nothing for the caller
    assert whole.usage.tool_uses == (("python_execution", 1), ("web_search", 1))
    events = list(sync.stream(request))
    end = events[-1]
    assert isinstance(end, base.StreamEnd)
    assert end.result.output == whole.output and end.usage == whole.usage
    assert "".join(e.text for e in events if isinstance(e, base.StreamDelta)) == whole.output["content"]
    only_search = ask("", input={**SEARCH_AND_RUN, "tool_choice": {"type": "web_search_preview"}})
    assert sync.complete(only_search).usage.tool_uses == (("web_search", 1),)
    job = batches.submit([ask("", input=SEARCH_AND_RUN, custom_id="seq-0"), ask("Plain", custom_id="seq-1")])
    assert poll_until_done(batches, job) == "completed"
    results = {r.custom_id: r for r in batches.results(job)}
    assert results["seq-0"].usage.tool_uses == (("python_execution", 1), ("web_search", 1))
    assert results["seq-1"].usage.tool_uses == ()
    assert results["seq-0"].usage.to_dict()["tool_uses"] == {"python_execution": 1, "web_search": 1}


# -- forced function calls --------------------------------------------------------------------
WEATHER: Any = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}
CHAT_TOOLS: Any = [
    {
        "type": "function",
        "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}},
    },
    {
        "type": "function",
        "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
    },
]


def test_sdk_parses_a_forced_tool_call(sdk: anthropic.Anthropic, wire: httpx.Client) -> None:
    # Given a body that must call get_weather (tool_choice any: its first function)
    time_tool: Any = {**WEATHER, "name": "get_time"}
    tools: Any = [WEATHER, time_tool]
    body = {"model": MODEL, "max_tokens": 100, "messages": user("Weather?"), "tools": tools}
    # When it is answered whole, Then it is one tool_use block and stop_reason tool_use, its input
    # valid under the tool's input_schema (as a model fills it in; it was always `{}`)
    message = strict(Message, wire.post("/v1/messages", json={**body, "tool_choice": {"type": "any"}}).json())
    [block] = message.content
    assert block.type == "tool_use" and block.name == "get_weather" and block.input == {"city": "simulated"}
    assert block.id.startswith("toolu_") and message.stop_reason == "tool_use"
    assert message.usage.output_tokens > 0  # usage as for text
    named = sdk.messages.create(
        model=MODEL,
        max_tokens=100,
        messages=user("Weather?"),
        tools=tools,
        tool_choice={"type": "tool", "name": "get_time"},
    )
    assert [(b.type, getattr(b, "name", None)) for b in named.content] == [("tool_use", "get_time")]
    # And streamed as the API streams a tool_use block, every event the SDK's type
    names: list[str] = []
    chosen = {**body, "tool_choice": {"type": "any"}, "stream": True}
    with connect_sse(wire, "POST", "/v1/messages", json=chosen) as source:
        for event in source.iter_sse():
            names.append(event.event)
            if event.event != "ping":
                data = strict(RawMessageStreamEvent, event.json())
                if event.event == "content_block_start":
                    assert data.content_block.type == "tool_use" and data.content_block.input == {}
                if event.event == "content_block_delta":
                    assert data.delta.type == "input_json_delta"
                    assert json.loads(data.delta.partial_json) == {"city": "simulated"}
                if event.event == "message_delta":
                    assert data.delta.stop_reason == "tool_use"
    assert names == [
        "message_start",
        "content_block_start",
        "ping",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    with sdk.messages.stream(
        model=MODEL, max_tokens=100, messages=user("Weather?"), tools=tools, tool_choice={"type": "any"}
    ) as stream:
        final = stream.get_final_message()
    assert [b.model_dump() for b in final.content] == [b.model_dump() for b in message.content]
    assert (final.stop_reason, final.usage.output_tokens) == ("tool_use", message.usage.output_tokens)
    # auto (or none) is answered with text, as before
    auto = wire.post("/v1/messages", json={**body, "tool_choice": {"type": "auto"}}).json()
    assert [b["type"] for b in auto["content"]] == ["text"] and auto["stop_reason"] == "end_turn"


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_weather"}}])
def test_a_forced_call_comes_back_through_the_adapter(sync: AnthropicMessages, choice: Any) -> None:
    # Given an item that must call a function (the first, or the one it names)
    messages = [{"role": "user", "content": "Weather?"}]
    request = ask("", input={"messages": messages, "tools": CHAT_TOOLS, "tool_choice": choice})
    name = "get_time" if choice == "required" else "get_weather"
    # When the adapter completes it, Then the call is its tool_calls, finish_reason tool_calls
    whole = sync.complete(request)
    assert whole.status == "completed" and whole.output is not None
    [call] = whole.output["tool_calls"]
    assert call["type"] == "function" and call["id"].startswith("toolu_")
    assert call["function"] == {"name": name, "arguments": "{}"}
    assert whole.output["finish_reason"] == "tool_calls" and whole.usage.completion_tokens > 0
    # And streamed, the deltas' fragments joined are the call
    events = list(sync.stream(request))
    fragments = [f for e in events if isinstance(e, base.StreamDelta) for f in e.tool_calls]
    assert fragments[0].id == call["id"] and fragments[0].name == name
    assert {f.index for f in fragments} == {0} and "".join(f.arguments for f in fragments) == "{}"
    end = events[-1]
    assert isinstance(end, base.StreamEnd) and end.result.output == whole.output
    assert end.usage == whole.usage


def test_a_forced_call_in_a_message_batch(batches: AnthropicBatches) -> None:
    messages = [{"role": "user", "content": "Weather?"}]
    forced = ask("", input={"messages": messages, "tools": CHAT_TOOLS, "tool_choice": "required"})
    job = batches.submit([forced])
    assert poll_until_done(batches, job) == "completed"
    [result] = batches.results(job)
    assert result.output is not None and result.output["finish_reason"] == "tool_calls"
    assert [c["function"] for c in result.output["tool_calls"]] == [{"name": "get_time", "arguments": "{}"}]


def test_a_batch_canceled_halfway_keeps_the_results_it_had_processed() -> None:
    # Given a batch of 4 requests, canceled half way through its time (a clock moved by hand)
    now = [1_700_000_000.0]
    emu = AnthropicEmulator(Behaviour(EmulatorConfig(batch_seconds=60.0)), clock=lambda: now[0])
    server = EmulatorServer([emu.vendor]).start()
    try:
        endpoint = ProviderEndpoint(
            "anthropic", "anthropic", server.base_url + "/anthropic", output_limits=LIMITS
        )
        batches = make_batch(endpoint, "sk-ant-test")
        job = batches.submit([ask(say(f"Question {n}"), custom_id=f"seq-{n}") for n in range(4)])
        now[0] += 30
        batches.cancel(job)
        now[0] += 1
        # Then it ends with the two requests processed before the cancel answered, as Anthropic
        # ends a canceled batch, and the other two canceled
        assert batches.poll(job).terminal
        results = {r.custom_id: r for r in batches.results(job)}
        assert [k for k, r in sorted(results.items()) if r.status == "completed"] == ["seq-0", "seq-1"]
        assert {results[k].error.code for k in ("seq-2", "seq-3")} == {"batch_request_canceled"}  # type: ignore[union-attr]
    finally:
        server.stop()


def test_structured_output_is_answered_with_json_valid_under_its_schema(
    sync: AnthropicMessages,
) -> None:
    schema = next(p for p in builtin_catalog().workflow_products if p.slug == "pii-redaction").output_schema
    fmt = {"type": "json_schema", "json_schema": {"name": "redacted", "schema": schema}}
    answer = sync.complete(
        ask(
            "Redact",
            max_output_tokens=4096,
            input={"messages": [{"role": "user", "content": "Redact"}], "response_format": fmt},
        )
    )
    assert answer.output is not None
    jsonschema.validate(json.loads(answer.output["content"]), schema)
