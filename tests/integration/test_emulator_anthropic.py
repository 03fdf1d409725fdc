"""The Anthropic emulator and adapter, kept honest by the official `anthropic` SDK.

(a) Every kind of answer the emulator gives (a message, its stream events, models, message
    batches and their results lines, every error) is parsed with the SDK's own client and
    validated with the SDK's types (`anthropic.types`): a field the SDK requires and the
    emulator leaves out fails, and so does a field the emulator invents.
(b) Every request body the adapter sends is checked against the SDK's request parameter types
    (`MessageCreateParams`, `batch_create_params.Request`): pydantic's TypeAdapter over the
    TypedDict, and every key, at every depth, must be one the TypedDict declares.
(c) The adapter is driven over HTTP against the emulator: complete, stream, the vendor's
    faults (429 with retry-after, 529, 500, a reset mid-stream, a dropped connection, a 400,
    silence before the first byte) and a message batch end to end, by hand and through the
    lane runner.
"""

from __future__ import annotations

import collections.abc
import functools
import json
import time
import types
import uuid
from collections.abc import Iterator
from typing import Annotated, Any, Literal, NotRequired, Required, Union, get_args, get_origin

import anthropic
import httpx
import pytest
from anthropic.types import Message, MessageParam, ModelInfo, RawMessageStreamEvent
from anthropic.types.message_create_params import (
    MessageCreateParamsBase,
    MessageCreateParamsNonStreaming,
    MessageCreateParamsStreaming,
)
from anthropic.types.messages import MessageBatch, MessageBatchIndividualResponse
from anthropic.types.messages.batch_create_params import BatchCreateParams
from anthropic.types.messages.batch_create_params import Request as BatchRequest
from anthropic.types.shared.error_response import ErrorResponse
from httpx_sse import connect_sse
from pydantic import BaseModel, TypeAdapter
from typing_extensions import get_type_hints, is_typeddict  # the SDK's TypedDicts are its own

from batchroute.catalog import builtin_catalog
from batchroute.providers import base
from batchroute.providers.anthropic import make_batch, make_sync
from batchroute.providers.anthropic.client import AnthropicBatches, AnthropicMessages
from batchroute.providers.endpoints import ProviderEndpoint
from batchroute.providers.retry import RetryPolicy
from batchroute.services.workflow.runner import run_lane_batch_job
from batchroute_tools.emulators.anthropic import MESSAGE_FIELDS, AnthropicEmulator
from batchroute_tools.emulators.behaviour import Behaviour, EmulatorConfig
from batchroute_tools.emulators.server import EmulatorServer, Reply, Request

MODEL = "claude-sonnet-4-20250514"
BATCH_SECONDS = 0.2
# Sampling parameters of the API version the adapter pins (2023-06-01) that the SDK's own
# newer API version no longer declares: their types are checked here, and they are left out
# of the SDK-type check (test_the_sampling_exemption_is_still_needed says when to drop this).
PINNED_ONLY: dict[str, Any] = {"temperature": float, "top_p": float, "top_k": int}


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
    endpoint = ProviderEndpoint("anthropic", "anthropic", base_url=base_url)
    return make_sync(endpoint, "sk-ant-test")


@pytest.fixture
def batches(base_url: str) -> AnthropicBatches:
    endpoint = ProviderEndpoint("anthropic", "anthropic", base_url=base_url)
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


def check_params(kind: Any, body: dict[str, Any]) -> None:
    """A request body against the SDK's request TypedDict: pydantic validates it (lazily
    validated iterables consumed), and every key at every depth is declared."""
    _consume(adapter(kind).validate_python(body))
    problems = _undeclared(kind, body, "$")
    assert problems == [], problems


def _consume(value: object) -> None:
    if isinstance(value, dict):
        for item in value.values():
            _consume(item)
    elif isinstance(value, list | tuple):
        for item in value:
            _consume(item)
    elif isinstance(value, collections.abc.Iterator):  # pydantic's ValidatorIterator
        _consume(list(value))


def _undeclared(kind: Any, value: object, path: str) -> list[str] | None:
    """The keys of `value` that `kind` does not declare, at every depth; None when `value`
    does not have the shape of `kind` at all (a union tries each of its members)."""
    origin, args = get_origin(kind), get_args(kind)
    if origin in (Annotated, Required, NotRequired):
        return _undeclared(args[0], value, path)
    if origin in (Union, types.UnionType):
        fits = [found for arm in args if (found := _undeclared(arm, value, path)) is not None]
        return min(fits, key=len) if fits else None
    if origin is Literal:
        return [] if value in args else None
    if is_typeddict(kind):
        return _undeclared_keys(kind, value, path)
    if isinstance(kind, type) and issubclass(kind, BaseModel):
        return None  # a response model inside a request union: never what a request sends
    if origin in (dict, collections.abc.Mapping) or kind in (dict, object, Any):
        return [] if kind in (object, Any) or isinstance(value, dict) else None
    if origin is not None and args and (origin in (list, tuple) or _iterable(origin)):
        if not isinstance(value, list):
            return None
        found: list[str] = []
        for index, item in enumerate(value):
            inner = _undeclared(args[0], item, f"{path}[{index}]")
            if inner is None:
                return None
            found.extend(inner)
        return found
    if kind in (str, int, float, bool, type(None)):
        fits = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
        return [] if fits or (kind is float and isinstance(value, int)) else None
    return []  # anything else (file inputs and the like): no keys to check


def _undeclared_keys(kind: Any, value: object, path: str) -> list[str] | None:
    if not isinstance(value, dict) or not kind.__required_keys__ <= value.keys():
        return None
    hints = get_type_hints(kind, include_extras=True)
    if kind in (MessageCreateParamsBase, MessageCreateParamsNonStreaming, MessageCreateParamsStreaming):
        hints = {**PINNED_ONLY, **hints}
    extra_allowed = (getattr(kind, "__pydantic_config__", None) or {}).get("extra") == "allow"
    found = [] if extra_allowed else [f"{path}.{k}: not in {kind.__name__}" for k in value if k not in hints]
    for key, item in value.items():
        if key in hints:
            inner = _undeclared(hints[key], item, f"{path}.{key}")
            if inner is None:
                return None
            found.extend(inner)
    return found


def _iterable(origin: object) -> bool:
    named = getattr(origin, "__name__", "")
    return named == "SequenceNotStr" or origin in (collections.abc.Iterable, collections.abc.Sequence)


def test_the_strict_checks_catch_what_they_should() -> None:
    good = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    check_params(MessageCreateParamsNonStreaming, good)
    with pytest.raises(AssertionError):  # an undeclared key deep inside
        check_params(
            MessageCreateParamsNonStreaming,
            {**good, "messages": [{"role": "user", "content": [{"type": "text", "text": "x", "bogus": 1}]}]},
        )
    with pytest.raises(Exception, match="max_tokens"):  # a required key missing
        check_params(MessageCreateParamsNonStreaming, {"model": MODEL, "messages": good["messages"]})
    model = {"type": "model", "id": "m", "display_name": "M", "created_at": "2025-01-01T00:00:00Z"}
    with pytest.raises(AssertionError):  # an invented answer field
        strict(ModelInfo, {**model, "lifecycle": "active", "invented": True})


def test_the_sampling_exemption_is_still_needed() -> None:
    declared = get_type_hints(MessageCreateParamsBase)
    assert not PINNED_ONLY.keys() & declared.keys(), "the SDK declares them again: drop PINNED_ONLY"
    assert PINNED_ONLY.keys() <= MESSAGE_FIELDS
    assert MESSAGE_FIELDS - PINNED_ONLY.keys() <= declared.keys() | {"stream"}


# -- (a) every answer, parsed by the SDK ------------------------------------------------------
def test_sdk_parses_a_message(sdk: anthropic.Anthropic, wire: httpx.Client) -> None:
    message = sdk.messages.create(model=MODEL, max_tokens=200, messages=user("Hello"))
    assert isinstance(message, Message)
    assert message.content[0].type == "text"
    assert message.content[0].text.startswith(f"Simulated answer from anthropic/{MODEL}:")
    assert message.stop_reason == "end_turn" and message.usage.output_tokens > 0
    raw = wire.post("/v1/messages", json={"model": MODEL, "max_tokens": 3, "messages": user("Hello")})
    assert raw.status_code == 200 and raw.headers["content-type"] == "application/json"
    cut = strict(Message, raw.json())
    assert cut.stop_reason == "max_tokens" and cut.usage.output_tokens == 3


def test_sdk_parses_every_stream_event(sdk: anthropic.Anthropic, wire: httpx.Client) -> None:
    body = {"model": MODEL, "max_tokens": 200, "messages": user("Stream it"), "stream": True}
    names: list[str] = []
    with connect_sse(wire, "POST", "/v1/messages", json=body) as source:
        assert source.response.headers["content-type"].startswith("text/event-stream")
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
    lines = wire.get(ended.results_url).text.splitlines()
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


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}, "max_tokens"),
        ({"model": MODEL, "max_tokens": 5, "messages": []}, "messages"),
        (
            {"model": MODEL, "max_tokens": 5, "messages": [*user("a"), *user("b")]},
            "roles must alternate",
        ),
        ({"model": MODEL, "max_tokens": 5, "messages": [{"role": "assistant", "content": "a"}]}, "first"),
        ({"model": MODEL, "max_tokens": 5, "messages": user("hi"), "seed": 3}, "seed: Extra inputs"),
        ({"model": "claude-unknown", "max_tokens": 5, "messages": user("hi")}, "model: claude-unknown"),
    ],
)
def test_the_emulator_refuses_what_the_api_refuses(
    wire: httpx.Client, body: dict[str, Any], message: str
) -> None:
    answer = wire.post("/v1/messages", json=body)
    assert answer.status_code in (400, 404)
    assert message in strict(ErrorResponse, answer.json()).error.message
    url = str(wire.base_url).rstrip("/") + "/v1/messages"
    unversioned = httpx.post(url, json=body, headers={"x-api-key": "k"})
    assert unversioned.status_code == 400 and "anthropic-version" in unversioned.json()["error"]["message"]


# -- (b) every request body the adapter sends, against the SDK's request types -----------------
RICH_INPUTS: list[dict[str, Any]] = [
    {"input": "Plain text, Responses style"},
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
        "seed": 42,
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
        assert call.headers["content-type"] == "application/json"
    for call in calls[:-1]:
        body = call.json()
        streaming = body.get("stream") is True
        check_params(MessageCreateParamsStreaming if streaming else MessageCreateParamsNonStreaming, body)
        assert body["max_tokens"] == 64_000  # the lane's limit: the requests set none
    batch_body = calls[-1].json()
    check_params(BatchCreateParams, batch_body)
    for entry in batch_body["requests"]:
        check_params(BatchRequest, entry)
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
    assert expired is not None and (expired.code, expired.transient) == ("batch_request_expired", True)
    again = batches.submit([requests[4]])  # the malformed line is only malformed the first time
    assert poll_until_done(batches, again) == "completed"
    assert [r.status for r in batches.results(again)] == ["completed"]


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
        2: ("failed", "batch_request_expired", 3),  # expired every time, resubmitted until the last try
        3: ("completed", None, 2),  # its line was not JSON: missing, resubmitted, answered
        4: ("completed", None, 2),  # overloaded_error, then answered
    }
