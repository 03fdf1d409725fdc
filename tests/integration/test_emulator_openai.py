"""The OpenAI emulator cannot drift from OpenAI: every answer it gives is parsed with the
official SDK's own types, every request the adapter sends is checked against the SDK's
request parameter types, and the emulator refuses what OpenAI's document refuses, with
OpenAI's 400 naming the param. Then the adapter is driven over HTTP against it: whole and
streamed answers (Chat Completions, with stop honoured; the Responses API on OpenAI for items
with hosted tools), hosted tools, embeddings, the Batch API end to end (a chunk of both APIs
as one vendor job per endpoint), and each vendor fault."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import httpx
import jsonschema
import openai
import pytest
from openai.types import Batch, CreateEmbeddingResponse, FileObject
from openai.types.batch_create_params import BatchCreateParams
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.chat.completion_create_params import (
    CompletionCreateParamsNonStreaming,
    CompletionCreateParamsStreaming,
)
from openai.types.embedding_create_params import EmbeddingCreateParams
from openai.types.responses import Response, ResponseStreamEvent
from openai.types.responses.response_create_params import (
    ResponseCreateParamsNonStreaming,
    ResponseCreateParamsStreaming,
)
from pydantic import BaseModel, TypeAdapter

from batchroute.catalog import builtin_catalog
from batchroute.config import Settings
from batchroute.providers.base import (
    PermanentProviderError,
    ProviderRequest,
    ProviderUnavailable,
    StreamDelta,
    StreamEnd,
    StreamStart,
    TransientProviderError,
    UnknownJob,
)
from batchroute.providers.endpoints import ProviderEndpoint
from batchroute.providers.openai import make_batch, make_sync, transform
from batchroute_tools.emulators.behaviour import Behaviour, EmulatorConfig
from batchroute_tools.emulators.openai import OpenAIEmulator
from batchroute_tools.emulators.server import EmulatorServer

MODEL = "gpt-4o-mini-2024-07-18"
EMBEDDER = "text-embedding-3-small"


@pytest.fixture(scope="module")
def server() -> Iterator[EmulatorServer]:
    behaviour = Behaviour(EmulatorConfig(batch_seconds=0.3, ttft_seconds=0.01))
    vendors = [
        OpenAIEmulator(
            behaviour, provider="openai", prefix="/openai", models=(MODEL, EMBEDDER), responses_api=True
        ).vendor,
        OpenAIEmulator(
            behaviour,
            provider="groq",
            prefix="/hosts/groq",
            models=("llama", MODEL),  # the host tests send the same items
            batch=False,
            responses_api=False,
        ).vendor,
    ]
    emulators = EmulatorServer(vendors).start()
    yield emulators
    emulators.stop()


@pytest.fixture
def sdk(server: EmulatorServer) -> openai.OpenAI:
    return openai.OpenAI(api_key="sk-local", base_url=server.base_url + "/openai/v1", max_retries=0)


def endpoint(server: EmulatorServer, *, host: bool = False) -> ProviderEndpoint:
    if host:
        return ProviderEndpoint(
            "groq", "openai_compatible", server.base_url + "/hosts/groq/v1", credentials="none"
        )
    return ProviderEndpoint("openai", "openai", server.base_url + "/openai/v1", batch_api=True)


def request(
    text: str, *, operation: str = "responses", custom_id: str = "seq-0", **input_: Any
) -> ProviderRequest:
    if operation == "embeddings":
        body: dict[str, Any] = {"input": text}
        return ProviderRequest(custom_id, "item", operation, EMBEDDER, EMBEDDER, {**body, **input_}, 0)  # type: ignore[arg-type]
    body = {"messages": [{"role": "user", "content": text}]}
    return ProviderRequest(custom_id, "item", operation, "gpt-4o-mini", MODEL, {**body, **input_}, 32)  # type: ignore[arg-type]


# -- (a) every emulator answer parses with the SDK's types ---------------------------------------
def test_chat_answers_parse_as_the_sdk_types(sdk: openai.OpenAI) -> None:
    whole = sdk.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_completion_tokens=20
    )
    assert (
        isinstance(whole, ChatCompletion) and whole.usage is not None and whole.usage.completion_tokens <= 20
    )
    raw = sdk.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": "Hi"}]
    )
    ChatCompletion.model_validate(raw.http_response.json(), strict=False)
    assert "system_fingerprint" not in raw.http_response.json()  # OpenAI leaves it out, not null
    assert raw.http_response.headers["content-type"] == "application/json"
    chunks = list(
        sdk.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "Hi"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert all(isinstance(c, ChatCompletionChunk) for c in chunks)
    assert chunks[-1].usage is not None and chunks[-1].choices == []
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.startswith("Simulated answer from openai/")


def test_embeddings_files_batches_and_models_parse_as_the_sdk_types(sdk: openai.OpenAI) -> None:
    embedded = sdk.embeddings.create(model=EMBEDDER, input=["a", "b"])
    assert isinstance(embedded, CreateEmbeddingResponse) and [d.index for d in embedded.data] == [0, 1]
    CreateEmbeddingResponse.model_validate(
        httpx.post(str(sdk.base_url) + "embeddings", json={"model": EMBEDDER, "input": "a"}).json()
    )
    tokens = sdk.embeddings.create(model=EMBEDDER, input=[1212, 318, 257], dimensions=8)
    assert [len(d.embedding) for d in tokens.data] == [8]  # an array of token ids is one input
    line = (
        b'{"custom_id": "r1", "method": "POST", "url": "/v1/chat/completions", "body": '
        b'{"model": "gpt-4o-mini-2024-07-18", "messages": [{"role": "user", "content": "x"}]}}\n'
    )
    file = sdk.files.create(file=("in.jsonl", line), purpose="batch")
    assert isinstance(file, FileObject) and file.purpose == "batch"
    batch = sdk.batches.create(
        input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    assert isinstance(batch, Batch) and batch.status in ("validating", "in_progress")
    Batch.model_validate(httpx.get(str(sdk.base_url) + f"batches/{batch.id}").json())
    FileObject.model_validate(httpx.get(str(sdk.base_url) + f"files/{file.id}").json())
    time.sleep(0.35)
    done = sdk.batches.retrieve(batch.id)
    assert done.status == "completed" and done.output_file_id and done.request_counts is not None
    assert done.request_counts.completed == 1
    assert sdk.files.content(done.output_file_id).text.count("\n") == 1
    assert sdk.files.delete(file.id).deleted
    assert [m.id for m in sdk.models.list()] == [MODEL, EMBEDDER]
    cancelled = sdk.batches.cancel(
        sdk.batches.create(
            input_file_id=sdk.files.create(file=("i.jsonl", line), purpose="batch").id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
        ).id
    )
    assert cancelled.status == "cancelling" and cancelled.cancelling_at is not None
    again = sdk.batches.retrieve(cancelled.id)
    assert again.status == "cancelled" and again.cancelled_at is not None
    assert None not in httpx.get(str(sdk.base_url) + f"batches/{batch.id}").json().values()


def test_responses_answers_parse_as_the_sdk_types(sdk: openai.OpenAI) -> None:
    tools: Any = [{"type": "web_search"}, {"type": "code_interpreter", "container": {"type": "auto"}}]
    whole = sdk.responses.create(model=MODEL, input="Hi", tools=tools, max_output_tokens=16)
    assert isinstance(whole, Response) and whole.status in ("completed", "incomplete")
    assert [o.type for o in whole.output] == ["web_search_call", "code_interpreter_call", "message"]
    assert whole.output_text.startswith("Simulated answer from openai/") and whole.usage is not None
    raw = httpx.post(str(sdk.base_url) + "responses", json={"model": MODEL, "input": "Hi"}).json()
    Response.model_validate(raw)
    events = list(sdk.responses.create(model=MODEL, input="Hi", tools=tools, stream=True))
    assert events[0].type == "response.created" and events[-1].type == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == events[-1].response.output_text  # type: ignore[union-attr]
    with httpx.stream(
        "POST", str(sdk.base_url) + "responses", json={"model": MODEL, "input": "Hi", "stream": True}
    ) as streamed:
        assert streamed.headers["content-type"].startswith("text/event-stream")
        data = [line[6:] for line in streamed.iter_lines() if line.startswith("data: ")]
    for item in data:
        TypeAdapter(ResponseStreamEvent).validate_json(item)


def test_a_responses_batch_and_a_failed_batch_parse_as_the_sdk_types(sdk: openai.OpenAI) -> None:
    body = {"model": MODEL, "input": "x", "tools": [{"type": "file_search", "vector_store_ids": ["vs_1"]}]}
    line = {"custom_id": "r1", "method": "POST", "url": "/v1/responses", "body": body}
    file = sdk.files.create(file=("in.jsonl", json.dumps(line).encode() + b"\n"), purpose="batch")
    batch = sdk.batches.create(input_file_id=file.id, endpoint="/v1/responses", completion_window="24h")
    time.sleep(0.35)
    done = sdk.batches.retrieve(batch.id)
    assert done.status == "completed" and done.output_file_id
    output = json.loads(sdk.files.content(done.output_file_id).text)
    answer = Response.model_validate(output["response"]["body"])
    assert [o.type for o in answer.output] == ["file_search_call", "message"]
    # a line that is no request of the batch's endpoint fails the whole batch, as OpenAI does
    wrong = {**line, "url": "/v1/chat/completions"}
    lines = json.dumps(line).encode() + b"\n" + json.dumps(wrong).encode() + b"\n" + b"{not json\n"
    bad = sdk.files.create(file=("bad.jsonl", lines), purpose="batch")
    created = sdk.batches.create(input_file_id=bad.id, endpoint="/v1/responses", completion_window="24h")
    failed = sdk.batches.retrieve(created.id)
    assert failed.status == "failed" and failed.errors is not None and failed.errors.data is not None
    assert [(e.line, e.param) for e in failed.errors.data] == [(2, "url"), (3, None)]
    assert failed.errors.data[1].code == "invalid_json_line"


def test_errors_are_the_sdks_typed_errors(sdk: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError):
        sdk.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "[simulate:fail]"}])
    with pytest.raises(openai.BadRequestError) as invalid:
        sdk.responses.create(model=MODEL, input="x", temperature=3)
    assert invalid.value.param == "temperature" and invalid.value.code == "invalid_value"  # type: ignore[attr-defined]
    with pytest.raises(openai.RateLimitError) as limited:
        sdk.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "sdk [simulate:429]"}])
    assert limited.value.response.headers["retry-after-ms"] == "200"
    with pytest.raises(openai.NotFoundError):
        sdk.batches.retrieve("batch_unknown")
    with pytest.raises(openai.NotFoundError) as unknown:
        sdk.chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "x"}])
    assert unknown.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as unknown_response:
        sdk.responses.create(model="gpt-9", input="x")
    assert (unknown_response.value.code, unknown_response.value.param) == ("model_not_found", "model")
    with pytest.raises(openai.PermissionDeniedError):
        sdk.embeddings.create(model=MODEL, input="x")  # a chat model


# -- (b) what OpenAI refuses, the emulator refuses as OpenAI does ----------------------------------
CHAT_TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
WEB_SEARCH = {"type": "web_search"}
LOOSE = {
    "type": "object",
    "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
    "required": ["a"],
    "additionalProperties": False,
}
BAD_CHAT_BODIES = [
    pytest.param({"tools": [{"type": "web_search"}]}, "tools[0].type", id="hosted-tool-to-chat"),
    pytest.param(
        {"tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}]},
        "tools[0].function",
        id="responses-style-function-tool",
    ),
    pytest.param(
        {"tools": [CHAT_TOOL], "tool_choice": {"type": "function", "name": "f"}},
        "tool_choice.function",
        id="responses-style-tool-choice",
    ),
    pytest.param({"stop": ["1", "2", "3", "4", "5"]}, "stop", id="five-stop-sequences"),
    # what the document says only in prose (batchroute_tools/contracts/openai_rules.py)
    pytest.param({"response_format": {"type": "json_object"}}, "messages", id="json-mode-without-json"),
    pytest.param(
        {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "x", "strict": True, "schema": {"type": "object", "properties": {}}},
            }
        },
        "response_format",
        id="strict-schema-without-additional-properties-false",
    ),
    pytest.param(
        {"tools": [{"type": "function", "function": {"name": "f", "strict": True, "parameters": LOOSE}}]},
        "tools[0].function",
        id="strict-function-missing-required",
    ),
    pytest.param(
        {
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "tool", "tool_call_id": "c1", "content": "x"},
            ]
        },
        "messages.[1].role",
        id="tool-answer-without-call",
    ),
    pytest.param(
        {"tools": [CHAT_TOOL], "tool_choice": {"type": "function", "function": {"name": "g"}}},
        "tool_choice",
        id="tool-choice-undeclared",
    ),
    pytest.param(
        {"tools": [{"type": "function", "function": {"name": "a b"}}]}, "tools[0].function.name", id="name"
    ),
    pytest.param({"top_logprobs": 2}, "top_logprobs", id="top-logprobs-without-logprobs"),
    pytest.param(
        {"parallel_tool_calls": False}, "parallel_tool_calls", id="parallel-tool-calls-without-tools"
    ),
    pytest.param(
        {"messages": [{"role": "user", "content": "hi", "name": "Ann Lee"}]},
        "messages[0].name",
        id="message-name",
    ),
]


def _refusal(answer: httpx.Response) -> dict[str, Any]:
    assert answer.status_code == 400 and answer.headers["content-type"] == "application/json"
    error = answer.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error"
    return dict(error)


@pytest.mark.parametrize(("extra", "param"), BAD_CHAT_BODIES)
@pytest.mark.parametrize("prefix", ["/openai", "/hosts/groq"])
def test_a_body_openai_refuses_gets_openais_400_naming_the_param(
    server: EmulatorServer, prefix: str, extra: dict[str, Any], param: str
) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], **extra}
    assert (
        _refusal(httpx.post(server.base_url + prefix + "/v1/chat/completions", json=body))["param"] == param
    )


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"messages": [{"role": "user", "content": "hi", "name": "ann"}]}, "messages[0].name"),
        ({"logit_bias": {"1": 5}}, "logit_bias"),
        ({"n": 2}, "n"),
    ],
)
def test_groq_refuses_the_openai_fields_it_lists_as_unsupported(
    server: EmulatorServer, extra: dict[str, Any], param: str
) -> None:
    # Groq's OpenAI compatibility page: "will result in a 400 error" if supplied; OpenAI takes them
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], **extra}
    assert (
        _refusal(httpx.post(server.base_url + "/hosts/groq/v1/chat/completions", json=body))["param"] == param
    )
    assert httpx.post(server.base_url + "/openai/v1/chat/completions", json=body).status_code == 200


def _chat_batch(sdk: openai.OpenAI, bodies: dict[str, dict[str, Any]]) -> Batch:
    """A Chat Completions batch of one line per body (by custom_id), run to its end."""
    lines = [
        {"custom_id": name, "method": "POST", "url": "/v1/chat/completions", "body": body}
        for name, body in bodies.items()
    ]
    file = sdk.files.create(
        file=("in.jsonl", b"".join(json.dumps(x).encode() + b"\n" for x in lines)), purpose="batch"
    )
    batch = sdk.batches.create(
        input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    time.sleep(0.35)
    return sdk.batches.retrieve(batch.id)


@pytest.mark.parametrize(("extra", "param"), BAD_CHAT_BODIES)
def test_the_same_bodies_in_a_batch_line_get_the_400_in_the_error_file(
    sdk: openai.OpenAI, extra: dict[str, Any], param: str
) -> None:
    good = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
    done = _chat_batch(sdk, {"good": good, "bad": {**good, **extra}})
    assert done.status == "completed" and done.request_counts is not None
    assert (done.request_counts.completed, done.request_counts.failed) == (1, 1) and done.error_file_id
    row = json.loads(sdk.files.content(done.error_file_id).text)
    assert row["custom_id"] == "bad" and row["response"]["status_code"] == 400
    assert row["response"]["body"]["error"]["param"] == param


def test_responses_and_embeddings_bodies_are_checked_too(server: EmulatorServer) -> None:
    base = server.base_url + "/openai/v1"
    flat = {"type": "function", "name": "f", "parameters": None, "strict": True}
    assert (
        _refusal(httpx.post(base + "/responses", json={"model": MODEL, "input": "x", "stop": ["a"]}))["param"]
        == "stop"
    )
    chat_style = {"model": MODEL, "input": "x", "tools": [CHAT_TOOL]}
    assert _refusal(httpx.post(base + "/responses", json=chat_style))["param"] == "tools[0].name"
    assert (
        httpx.post(base + "/responses", json={"model": MODEL, "input": "x", "tools": [flat]}).status_code
        == 200
    )
    assert (
        _refusal(httpx.post(base + "/embeddings", json={"model": EMBEDDER, "input": []}))["param"] == "input"
    )
    for empty in ("", ["a", ""]):
        refused = _refusal(httpx.post(base + "/embeddings", json={"model": EMBEDDER, "input": empty}))
        assert refused["param"] == "input"
    # JSON mode needs the word in the input (not `instructions`); a function is strict unless
    # it says false (null included), and a strict function's schema is the strict subset
    json_mode = {"model": MODEL, "instructions": "Answer in JSON.", "input": "x"}
    json_mode["text"] = {"format": {"type": "json_object"}}
    assert _refusal(httpx.post(base + "/responses", json=json_mode))["param"] == "input"
    said = {
        **json_mode,
        "input": [{"role": "developer", "content": "Answer with JSON."}, {"role": "user", "content": "x"}],
    }
    assert httpx.post(base + "/responses", json=said).status_code == 200
    loose_tool = {"type": "function", "name": "f", "parameters": LOOSE, "strict": None}
    strict_default = {"model": MODEL, "input": "x", "tools": [loose_tool]}
    assert _refusal(httpx.post(base + "/responses", json=strict_default))["param"] == "tools[0]"
    not_strict = {"model": MODEL, "input": "x", "tools": [{**loose_tool, "strict": False}]}
    assert httpx.post(base + "/responses", json=not_strict).status_code == 200
    assert (
        httpx.post(
            server.base_url + "/hosts/groq/v1/responses", json={"model": "m", "input": "x"}
        ).status_code
        == 404
    )


@pytest.mark.parametrize(
    "path",
    [
        "/openai/v1/chat/completions",
        "/openai/v1/responses",
        "/openai/v1/embeddings",
        "/openai/v1/batches",
        "/hosts/groq/v1/chat/completions",
    ],
)
def test_a_body_that_is_not_json_gets_openais_400_not_a_500(server: EmulatorServer, path: str) -> None:
    answer = httpx.post(
        server.base_url + path, content=b'{"model": "x", ', headers={"content-type": "application/json"}
    )
    error = _refusal(answer)
    assert "could not parse the JSON body" in error["message"] and error["param"] is None


def test_base64_embeddings_are_the_vectors_the_sdk_decodes(sdk: openai.OpenAI) -> None:
    as_floats = sdk.embeddings.create(model=EMBEDDER, input="hello", encoding_format="float")
    as_text = sdk.embeddings.create(model=EMBEDDER, input="hello", encoding_format="base64")
    assert isinstance(as_text.data[0].embedding, str)  # as OpenAI sends it when asked
    decoded = sdk.embeddings.create(model=EMBEDDER, input="hello")  # the SDK asks base64, decodes
    assert decoded.data[0].embedding == pytest.approx(as_floats.data[0].embedding, rel=1e-6)


def test_a_faulted_batch_line_is_answered_in_openais_error_shape(sdk: openai.OpenAI) -> None:
    faults = {"fail": "fail", "limited": "429", "broken": "transient"}
    done = _chat_batch(
        sdk,
        {
            name: {"model": MODEL, "messages": [{"role": "user", "content": f"hi [simulate:{fault}]"}]}
            for name, fault in faults.items()
        },
    )
    assert done.error_file_id is not None
    rows = {
        row["custom_id"]: row
        for row in map(json.loads, sdk.files.content(done.error_file_id).text.splitlines())
    }
    # each as the same request alone is answered: OpenAI's Error object, all four keys
    errors = {
        name: (row["response"]["status_code"], row["response"]["body"]["error"]) for name, row in rows.items()
    }
    assert {name: (status, e["type"], e["code"]) for name, (status, e) in errors.items()} == {
        "fail": (400, "invalid_request_error", "simulated_failure"),
        "limited": (429, "requests", "rate_limit_exceeded"),
        "broken": (500, "server_error", "server_error"),
    }
    assert all(set(e) == {"message", "type", "param", "code"} for _, e in errors.values())


# -- (c) every request the adapter sends fits the SDK's request types ----------------------------
def _check_params(params_type: Any, body: dict[str, Any]) -> None:
    TypeAdapter(params_type).validate_python(body)
    declared = set().union(
        *(getattr(k, "__annotations__", {}) for k in params_type.__mro__ if k is not object)
    )
    assert set(body) <= declared, sorted(set(body) - declared)


def test_adapter_requests_fit_the_sdk_request_types() -> None:
    item = request(
        "Describe",
        system="Be brief.",
        temperature=0.1,
        tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        response_format={"type": "json_object"},
    )
    _check_params(CompletionCreateParamsNonStreaming, transform.chat_body(item))
    _check_params(CompletionCreateParamsStreaming, transform.chat_body(item, stream=True))
    _check_params(CompletionCreateParamsNonStreaming, transform.chat_body(item, token_field="max_tokens"))
    hosted = request(
        "Find", tools=[{"type": "web_search"}, {"type": "file_search", "vector_store_ids": ["v"]}]
    )
    for responses_item in (item, hosted):
        _check_params(ResponseCreateParamsNonStreaming, transform.responses_body(responses_item))
        _check_params(ResponseCreateParamsStreaming, transform.responses_body(responses_item, stream=True))
    _check_params(
        EmbeddingCreateParams, transform.embeddings_body(request("x", operation="embeddings", dimensions=8))
    )
    line, hosted_line = transform.OPENAI_ROUTE.batch_line(item), transform.OPENAI_ROUTE.batch_line(hosted)
    for each in (line, hosted_line):
        _check_params(
            BatchCreateParams,
            {"input_file_id": "file-1", "endpoint": each["url"], "completion_window": "24h"},
        )
    _check_params(CompletionCreateParamsNonStreaming, line["body"])
    _check_params(ResponseCreateParamsNonStreaming, hosted_line["body"])
    _check_params(CompletionCreateParamsNonStreaming, transform.HOST_ROUTE.batch_line(item)["body"])


# -- (d) the adapter over HTTP against the emulator ------------------------------------------------
def test_complete_stream_and_embeddings(server: EmulatorServer) -> None:
    chat = make_sync(endpoint(server), "sk-local")
    whole = chat.complete(request("Say hi"))
    assert whole.status == "completed" and whole.usage.completion_tokens > 0
    events = list(chat.stream(request("Say hi")))
    assert isinstance(events[0], StreamStart) and isinstance(events[-1], StreamEnd)
    deltas = "".join(e.text for e in events if isinstance(e, StreamDelta))
    assert deltas == events[-1].result.output["content"] == whole.output["content"]  # type: ignore[index]
    assert events[-1].usage == whole.usage
    one = chat.complete(request("hello", operation="embeddings"))
    assert one.output is not None and len(one.output["embedding"]) == 16
    # OpenAI, no hosted tool: Chat Completions (test_hosted_tools_run_on_the_responses_api...)
    assert whole.raw is not None and whole.raw["object"] == "chat.completion"
    host = make_sync(endpoint(server, host=True), None).complete(request("Say hi"))
    assert host.output["content"].startswith("Simulated answer from groq/")  # type: ignore[index]
    assert host.raw is not None and host.raw["object"] == "chat.completion"
    host_events = list(make_sync(endpoint(server, host=True), None).stream(request("Say hi")))
    assert isinstance(host_events[-1], StreamEnd) and host_events[-1].result.output == host.output


WEATHER_TOOL: Any = {
    "type": "function",
    "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
}


@pytest.mark.parametrize("host", [False, True])
def test_a_forced_function_call_streams_through_the_adapter(server: EmulatorServer, host: bool) -> None:
    # Given an item that must call get_weather, to OpenAI and to a compatible host
    chat = make_sync(endpoint(server, host=host), None if host else "sk-local")
    item = request("Weather?", tools=[WEATHER_TOOL], tool_choice="required")
    # When the adapter streams it
    events = list(chat.stream(item))
    # Then the call comes as OpenAI's fragments (id and name first), and whole at the end
    fragments = [f for e in events if isinstance(e, StreamDelta) for f in e.tool_calls]
    assert [f.to_dict() for f in fragments] == [
        {
            "index": 0,
            "id": fragments[0].id,
            "type": "function",
            "function": {"name": "get_weather", "arguments": ""},
        },
        {"index": 0, "function": {"arguments": "{}"}},
    ]
    end = events[-1]
    assert isinstance(end, StreamEnd) and end.result.output is not None
    assert end.result.output["finish_reason"] == "tool_calls" and end.result.output["content"] == ""
    assert end.result.output["tool_calls"] == [
        {"id": fragments[0].id, "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
    ]
    assert chat.complete(item).output == end.result.output


def test_a_forced_function_call_parses_as_the_sdk_types(sdk: openai.OpenAI) -> None:
    messages: Any = [{"role": "user", "content": "Weather?"}]
    named: Any = {"type": "function", "function": {"name": "get_weather"}}
    whole = sdk.chat.completions.create(
        model=MODEL, messages=messages, tools=[WEATHER_TOOL], tool_choice=named
    )
    assert whole.choices[0].finish_reason == "tool_calls" and whole.choices[0].message.content is None
    assert [c.function.name for c in whole.choices[0].message.tool_calls or []] == ["get_weather"]
    with sdk.chat.completions.stream(
        model=MODEL, messages=messages, tools=[WEATHER_TOOL], tool_choice="required"
    ) as stream:
        final = stream.get_final_completion()
    [call] = final.choices[0].message.tool_calls or []
    assert (call.function.name, call.function.arguments) == ("get_weather", "{}")
    auto = sdk.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER_TOOL])
    assert auto.choices[0].message.content and not auto.choices[0].message.tool_calls  # auto: text


class GetCity(BaseModel):
    city: str
    days: int


def test_a_forced_strict_call_has_arguments_the_sdk_parses_into_the_tool(sdk: openai.OpenAI) -> None:
    # Given a strict function (Structured Outputs: its arguments always fit its schema), forced
    messages: Any = [{"role": "user", "content": "Which city?"}]
    tools = [openai.pydantic_function_tool(GetCity)]
    # When the SDK's parse() and stream() helpers read the call (they validate the arguments
    # against the tool's model: `{}` failed them with a ValidationError)
    parsed = sdk.chat.completions.parse(model=MODEL, messages=messages, tools=tools, tool_choice="required")
    [call] = parsed.choices[0].message.tool_calls or []
    # Then the arguments are the tool's
    assert call.function.parsed_arguments == GetCity(city="simulated", days=0)
    with sdk.chat.completions.stream(
        model=MODEL, messages=messages, tools=tools, tool_choice="required"
    ) as stream:
        [streamed] = stream.get_final_completion().choices[0].message.tool_calls or []
    assert streamed.function.parsed_arguments == GetCity(city="simulated", days=0)


def test_hosted_tools_run_on_the_responses_api_and_are_counted(server: EmulatorServer) -> None:
    chat = make_sync(endpoint(server), "sk-local")
    tools = [{"type": "web_search_preview"}, {"type": "code_interpreter"}]
    whole = chat.complete(request("Look it up", tools=tools, tool_choice={"type": "web_search_preview"}))
    assert whole.usage.tool_uses == (("python_execution", 1), ("web_search", 1))
    events = list(chat.stream(request("Look it up", tools=tools)))
    assert isinstance(events[-1], StreamEnd) and events[-1].usage.tool_uses == whole.usage.tool_uses
    batch = make_batch(endpoint(server), "sk-local")
    job = batch.submit(
        [
            request("a", custom_id="seq-0", tools=[{"type": "file_search", "vector_store_ids": ["vs_1"]}]),
            request("b", custom_id="seq-1", tools=tools),
        ]
    )
    time.sleep(0.35)
    assert batch.poll(job).state == "completed"
    results = {r.custom_id: r for r in batch.results(job)}
    assert results["seq-0"].usage.tool_uses == (("file_search", 1),)
    assert results["seq-1"].usage.tool_uses == (("python_execution", 1), ("web_search", 1))
    assert results["seq-1"].output is not None and results["seq-1"].output["content"].startswith("Simulated")


@pytest.mark.parametrize(
    ("marker", "error", "code"),
    [
        ("[simulate:429]", TransientProviderError, "rate_limited"),
        ("[simulate:overloaded]", TransientProviderError, "overloaded"),
        ("[simulate:transient]", TransientProviderError, "provider_5xx"),
        ("[simulate:down]", ProviderUnavailable, "provider_unreachable"),
        ("[simulate:fail]", PermanentProviderError, "provider_rejected"),
    ],
)
def test_vendor_faults_map_to_provider_errors(
    server: EmulatorServer, marker: str, error: type, code: str
) -> None:
    chat = make_sync(endpoint(server), "sk-local")
    probe = request(f"fault {marker} {code}")
    with pytest.raises(error) as raised:
        chat.complete(probe)
    assert raised.value.code == code
    if code == "rate_limited":
        assert raised.value.retry_after_seconds == 0.2
    if marker in ("[simulate:429]", "[simulate:overloaded]", "[simulate:transient]"):
        assert chat.complete(probe).status == "completed"  # the retry is answered


def test_a_reset_mid_stream_ends_it_after_the_first_byte(server: EmulatorServer) -> None:
    chat = make_sync(endpoint(server), "sk-local")
    events = chat.stream(request("tell me [simulate:reset]"))
    assert isinstance(next(events), StreamStart)
    with pytest.raises(TransientProviderError) as broken:
        list(events)
    assert broken.value.code == "stream_interrupted"


def test_a_silent_host_times_out_before_the_first_byte(server: EmulatorServer) -> None:
    chat = make_sync(endpoint(server), "sk-local")
    slow = ProviderRequest(
        "seq-0",
        "i",
        "responses",
        "m",
        MODEL,
        {"messages": [{"role": "user", "content": "[simulate:timeout:openai]"}]},
        8,
        first_byte_timeout_seconds=0.3,
    )
    with pytest.raises(TransientProviderError) as silent:
        list(chat.stream(slow))
    assert silent.value.code == "provider_timeout"


def test_a_batch_job_end_to_end(server: EmulatorServer) -> None:
    batch = make_batch(endpoint(server), "sk-local")
    items = [
        request(f"item {n}" + marker, custom_id=f"seq-{n}")
        for n, marker in enumerate(["", " [simulate:fail]", " [simulate:malformed]", ""])
    ]
    job = batch.submit(items)
    assert not batch.poll(job).terminal
    time.sleep(0.35)
    status = batch.poll(job)
    assert status.state == "completed" and status.total == 4
    results = {r.custom_id: r for r in batch.results(job)}
    assert set(results) == {"seq-0", "seq-1", "seq-3"}  # the malformed line is skipped: resubmitted
    assert results["seq-1"].status == "failed" and not results["seq-1"].error.transient  # type: ignore[union-attr]
    again = batch.submit([items[2]])
    time.sleep(0.35)
    assert [r.status for r in batch.results(again)] == ["completed"]  # the retry's line is whole


def test_a_batch_holding_a_request_that_finds_openai_down_is_never_made(server: EmulatorServer) -> None:
    batch = make_batch(endpoint(server), "sk-local")
    fine = request("fine [simulate:down:groq]", custom_id="seq-0")  # another provider's mark
    # Then the create is dropped unanswered: the lane is unavailable (it fails over)
    with pytest.raises(ProviderUnavailable) as raised:
        batch.submit([fine, request("gone [simulate:down:openai]", custom_id="seq-1")])
    assert raised.value.code == "provider_unreachable"
    job = batch.submit([fine])
    time.sleep(0.35)
    assert batch.poll(job).state == "completed"


def test_an_expiring_batch_keeps_the_finished_lines(server: EmulatorServer) -> None:
    batch = make_batch(endpoint(server), "sk-local")
    job = batch.submit([request("a", custom_id="seq-0"), request("b [simulate:expire]", custom_id="seq-1")])
    time.sleep(0.35)
    assert batch.poll(job).state == "expired"
    # the line it did not run is in the error file, as OpenAI writes it: `batch_expired`
    results = {r.custom_id: r for r in batch.results(job)}
    assert results["seq-0"].status == "completed"
    expired = results["seq-1"].error
    assert expired is not None and (expired.code, expired.transient) == ("batch_expired", True)


def test_an_unknown_key_of_the_vendor_is_refused_by_the_adapter(server: EmulatorServer) -> None:
    # The emulator accepts any key; a real vendor's 401 is the lane being unusable.
    transport = httpx.MockTransport(
        lambda _: httpx.Response(401, json={"error": {"message": "Incorrect API key"}})
    )
    from batchroute.providers.http import VendorHttp
    from batchroute.providers.openai.client import OpenAIChat

    chat = OpenAIChat("openai", VendorHttp("http://x/v1", vendor="openai", transport=transport))
    with pytest.raises(ProviderUnavailable) as refused:
        chat.complete(request("hi"))
    assert refused.value.code == "provider_auth_failed"


def test_a_reset_halfway_through_a_whole_answer_is_retried(server: EmulatorServer) -> None:
    chat = make_sync(endpoint(server, host=True), None)
    probe = request("whole [simulate:reset]")
    with pytest.raises(TransientProviderError) as broken:
        chat.complete(probe)
    assert broken.value.code == "stream_interrupted"
    assert chat.complete(probe).status == "completed"


def test_a_response_cut_at_the_output_limit_finishes_with_length(server: EmulatorServer) -> None:
    chat = make_sync(endpoint(server), "sk-local")
    story = {"input": "Tell me a long story", "tools": [WEB_SEARCH]}  # a hosted tool: the Responses API
    short = ProviderRequest("seq-0", "i", "responses", "m", MODEL, story, 4)
    whole = chat.complete(short)
    assert whole.raw is not None and whole.raw["status"] == "incomplete"
    assert whole.raw["max_output_tokens"] == 16  # the Responses API's least
    assert whole.output is not None and whole.output["finish_reason"] == "length"
    assert whole.usage.completion_tokens == 16
    events = list(chat.stream(short))
    assert isinstance(events[-1], StreamEnd) and events[-1].result.output == whole.output


def test_stop_on_openai_goes_to_chat_completions_and_cuts_the_answer(server: EmulatorServer) -> None:
    chat = make_sync(endpoint(server), "sk-local")
    stopped = request("Say hi", stop=[" from", "zzz"])
    whole = chat.complete(stopped)
    assert whole.raw is not None and whole.raw["object"] == "chat.completion"
    assert whole.output == {
        "type": "message",
        "role": "assistant",
        "content": "Simulated answer",
        "finish_reason": "stop",
    }
    assert whole.usage.completion_tokens == 2
    events = list(chat.stream(stopped))
    assert isinstance(events[-1], StreamEnd) and events[-1].result.output == whole.output
    assert "".join(e.text for e in events if isinstance(e, StreamDelta)) == "Simulated answer"


# -- (e) a chunk of both APIs: one vendor job per endpoint -----------------------------------------
class ManualClock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clocked() -> Iterator[tuple[EmulatorServer, ManualClock]]:
    clock = ManualClock()
    behaviour = Behaviour(EmulatorConfig(batch_seconds=60.0, ttft_seconds=0.0))
    emulator = OpenAIEmulator(behaviour, provider="openai", prefix="/openai", models=(MODEL,), clock=clock)
    emulators = EmulatorServer([emulator.vendor]).start()
    yield emulators, clock
    emulators.stop()


def mixed_chunk(*, expire: str = "") -> list[ProviderRequest]:
    return [
        request("plain" + expire, custom_id="seq-0"),
        request("search", custom_id="seq-1", tools=[WEB_SEARCH]),
        request("stopped", custom_id="seq-2", stop=" from"),
        request("look", custom_id="seq-3", tools=[{"type": "code_interpreter"}, CHAT_TOOL]),
    ]


def test_a_chunk_of_both_apis_is_one_vendor_job_per_endpoint(
    clocked: tuple[EmulatorServer, ManualClock],
) -> None:
    server, clock = clocked
    batch = make_batch(endpoint(server), "sk-local")
    job = batch.submit(mixed_chunk())
    parts = job.split("+")
    assert len(parts) == 2 and all(p.startswith("batch_") for p in parts)
    base = server.base_url + "/openai/v1/batches/"
    vendor = [Batch.model_validate(httpx.get(base + p).json()) for p in parts]
    assert [b.endpoint for b in vendor] == ["/v1/chat/completions", "/v1/responses"]
    assert [b.request_counts.total for b in vendor if b.request_counts] == [2, 2]
    running = batch.poll(job)
    assert running.state == "validating" and running.total == 4  # both parts are
    clock.now += 61
    done = batch.poll(job)
    assert (done.state, done.total, done.completed_count, done.failed_count) == ("completed", 4, 4, 0)
    results = {r.custom_id: r for r in batch.results(job)}
    assert sorted(results) == ["seq-0", "seq-1", "seq-2", "seq-3"]
    assert {k: r.raw["object"] for k, r in results.items() if r.raw} == {
        "seq-0": "chat.completion",
        "seq-1": "response",
        "seq-2": "chat.completion",
        "seq-3": "response",
    }
    assert results["seq-2"].output is not None and results["seq-2"].output["content"] == "Simulated answer"
    assert results["seq-1"].usage.tool_uses == (("web_search", 1),)
    # one endpoint, one plain vendor id
    assert "+" not in batch.submit([request("a", custom_id="seq-9"), request("b", custom_id="seq-8")])


def test_a_batch_line_that_forces_a_function_call_is_answered_with_the_call(
    clocked: tuple[EmulatorServer, ManualClock],
) -> None:
    # Given a batch line that must call get_weather, as a Chat Completions request would alone
    server, clock = clocked
    batch = make_batch(endpoint(server), "sk-local")
    job = batch.submit([request("Weather?", custom_id="seq-0", tools=[WEATHER_TOOL], tool_choice="required")])
    clock.now += 61
    assert batch.poll(job).state == "completed"
    # Then its result is the call (no text, finish tool_calls), as the SDK's type has it
    (result,) = batch.results(job)
    assert result.raw is not None
    [choice] = ChatCompletion.model_validate(result.raw).choices
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    assert [c.function.name for c in choice.message.tool_calls or []] == ["get_weather"]


def test_a_composite_job_is_cancelled_part_by_part_and_known_only_whole(
    clocked: tuple[EmulatorServer, ManualClock],
) -> None:
    server, clock = clocked
    batch = make_batch(endpoint(server), "sk-local")
    job = batch.submit(mixed_chunk())
    batch.cancel(job)
    base = server.base_url + "/openai/v1/batches/"
    assert [httpx.get(base + p).json()["status"] for p in job.split("+")] == ["cancelling"] * 2
    assert batch.poll(job).state == "in_progress"  # cancelling is still under way
    clock.now += 1
    assert batch.poll(job).state == "cancelled"
    with pytest.raises(UnknownJob):
        batch.poll(job.split("+")[0] + "+batch_unknown")
    with pytest.raises(UnknownJob):
        batch.cancel("batch_unknown+" + job.split("+")[1])


def test_a_composite_job_with_an_expired_part_keeps_the_other_parts_results(
    clocked: tuple[EmulatorServer, ManualClock],
) -> None:
    server, clock = clocked
    batch = make_batch(endpoint(server), "sk-local")
    job = batch.submit(mixed_chunk(expire=" [simulate:expire]"))
    clock.now += 61
    status = batch.poll(job)
    assert (status.state, status.total, status.completed_count) == ("expired", 4, 3)
    results = {r.custom_id: r for r in batch.results(job)}
    assert sorted(results) == ["seq-0", "seq-1", "seq-2", "seq-3"]
    assert sorted(k for k, r in results.items() if r.status == "completed") == ["seq-1", "seq-2", "seq-3"]
    assert results["seq-0"].error is not None and results["seq-0"].error.code == "batch_expired"


def test_a_part_that_fails_fails_the_job_at_once_and_stops_the_others(
    clocked: tuple[EmulatorServer, ManualClock],
) -> None:
    server, clock = clocked
    batch = make_batch(endpoint(server), "sk-local")
    chunk = mixed_chunk()
    # the same custom_id twice: OpenAI fails that part's batch when it validates the file
    job = batch.submit([*chunk, replace(chunk[1], input={"input": "again", "tools": [WEB_SEARCH]})])
    chat_part, responses_part = job.split("+")
    clock.now += 1  # validated; the chat part runs for a minute
    status = batch.poll(job)
    assert status.state == "failed" and status.total == 2  # the failed part holds none
    assert len(status.errors) == 1 and "custom_id" in status.errors[0].message
    base = server.base_url + "/openai/v1/batches/"
    assert httpx.get(base + responses_part).json()["status"] == "failed"
    assert httpx.get(base + chat_part).json()["status"] == "cancelling"  # not left running


def test_a_stuck_batch_stays_at_40_percent_until_it_is_cancelled(
    clocked: tuple[EmulatorServer, ManualClock],
) -> None:
    # [simulate:stuck_batch]: a late vendor, held back deterministically (deadline rescue)
    server, clock = clocked
    batch = make_batch(endpoint(server), "sk-local")
    items = [
        request(f"q {n}" + (" [simulate:stuck_batch]" if n == 0 else ""), custom_id=f"seq-{n}")
        for n in range(5)
    ]
    job = batch.submit(items)
    clock.now += 86_400  # a day on: still running, 2 of 5 done
    stuck = batch.poll(job)
    assert (stuck.state, stuck.total, stuck.completed_count) == ("in_progress", 5, 2)
    batch.cancel(job)
    clock.now += 1
    assert batch.poll(job).state == "cancelled"
    # and what it finished before the cancel is in its output file, as OpenAI leaves it
    finished = {r.custom_id: r.status for r in batch.results(job)}
    assert finished == {"seq-0": "completed", "seq-1": "completed"}


def test_the_share_a_stuck_batch_reports_done_is_a_setting() -> None:
    # simulated_stuck_batch_percent: 0 is a vendor that answered nothing yet (the e2e rescue)
    settings = Settings(simulated_stuck_batch_percent=0)
    behaviour = Behaviour(replace(EmulatorConfig.from_settings(settings), batch_seconds=60.0))
    emulator = OpenAIEmulator(behaviour, provider="openai", prefix="/openai", models=(MODEL,))
    server = EmulatorServer([emulator.vendor]).start()
    try:
        batch = make_batch(endpoint(server), "sk-local")
        job = batch.submit([request(f"q {n} [simulate:stuck_batch]", custom_id=f"seq-{n}") for n in range(5)])
        stuck = batch.poll(job)
        assert (stuck.state, stuck.total, stuck.completed_count) == ("in_progress", 5, 0)
        assert Settings().simulated_stuck_batch_percent == 40
    finally:
        server.stop()


TICKET = next(p for p in builtin_catalog().workflow_products if p.slug == "ticket-classification")


def test_structured_output_is_answered_with_json_valid_under_its_schema(
    server: EmulatorServer,
) -> None:
    # as constrained decoding answers one (docs/emulators.md): local mode parses real JSON
    fmt = {"type": "json_schema", "json_schema": {"name": "ticket", "schema": TICKET.output_schema}}
    chat = make_sync(endpoint(server), "sk-local")
    for given in (
        request("Classify", response_format=fmt),
        request("Classify", response_format=fmt, tools=[WEB_SEARCH]),
    ):
        answer = chat.complete(replace(given, max_output_tokens=4096))
        assert answer.output is not None
        jsonschema.validate(json.loads(answer.output["content"]), TICKET.output_schema)
    json_mode = chat.complete(request("Classify", response_format={"type": "json_object"}))
    assert json_mode.output is not None and json.loads(json_mode.output["content"]) == {}


def test_a_job_cancelled_unpolled_keeps_what_it_finished_by_the_cancel(
    clocked: tuple[EmulatorServer, ManualClock],
) -> None:
    # Given a job of 4 requests nobody polled, half its time gone when it is cancelled
    server, clock = clocked
    batch = make_batch(endpoint(server), "sk-local")
    job = batch.submit([request(f"q {n}", custom_id=f"seq-{n}") for n in range(4)])
    clock.now += 30
    batch.cancel(job)
    clock.now += 1
    # Then it keeps the half it had finished by the cancel, as the vendor would
    assert batch.poll(job).state == "cancelled"
    assert sorted(r.custom_id for r in batch.results(job) if r.status == "completed") == ["seq-0", "seq-1"]


def test_a_chat_request_past_the_models_window_is_refused_as_openai_refuses_it(
    server: EmulatorServer,
) -> None:
    # Given a model of a 1,000-token window (a catalog lane's, by its vendor name)
    emulator = OpenAIEmulator(
        Behaviour(EmulatorConfig(ttft_seconds=0.0)),
        provider="openai",
        prefix="/small",
        models=(MODEL,),
        windows={MODEL: 1_000},
    )
    small = EmulatorServer([emulator.vendor]).start()
    try:
        sdk = openai.OpenAI(base_url=small.base_url + "/small/v1", api_key="sk-local", max_retries=0)
        messages: Any = [{"role": "user", "content": "word " * 400}]
        # When the messages and the output limit asked exceed it / Then OpenAI's 400
        with pytest.raises(openai.BadRequestError) as refused:
            sdk.chat.completions.create(model=MODEL, messages=messages, max_completion_tokens=600)
        assert (refused.value.code, refused.value.param) == ("context_length_exceeded", "messages")
        assert "maximum context length is 1000 tokens" in refused.value.message
        # And what fits is answered (no limit asked: the messages alone are counted)
        assert sdk.chat.completions.create(model=MODEL, messages=messages, max_tokens=100).choices
        assert sdk.chat.completions.create(model=MODEL, messages=messages).choices
        # And a batch line past the window gets the same 400 in the error file
        assert (
            emulator.refusal(
                "/v1/chat/completions", {"model": MODEL, "messages": messages, "max_tokens": 900}
            )
            is not None
        )
    finally:
        small.stop()


def test_a_vllm_host_refuses_top_p_zero_as_vllm_does() -> None:
    emulator = OpenAIEmulator(
        Behaviour(EmulatorConfig(ttft_seconds=0.0)),
        provider="edge-eu",
        prefix="/edge",
        models=(MODEL,),
        vllm=True,
    )
    edge = EmulatorServer([emulator.vendor]).start()
    try:
        sdk = openai.OpenAI(base_url=edge.base_url + "/edge/v1", api_key="sk-local", max_retries=0)
        messages: Any = [{"role": "user", "content": "hi"}]
        with pytest.raises(openai.BadRequestError) as refused:
            sdk.chat.completions.create(model=MODEL, messages=messages, top_p=0)
        assert "top_p must be in (0, 1]" in refused.value.message
        assert sdk.chat.completions.create(model=MODEL, messages=messages, top_p=1e-9).choices
    finally:
        edge.stop()
