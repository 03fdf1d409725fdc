"""The Gemini emulator and adapter against the official google-genai SDK, over HTTP on loopback:

(a) the SDK itself (`genai.Client` with the emulator as its base URL) calls every route and
    parses every kind of answer into its types; the raw JSON is also validated strictly
    (the SDK's models forbid unknown fields), and so are the recorded fixtures;
(b) what the adapter sends is validated against the SDK's request types (camelCase REST
    names; an unknown or snake_case key fails);
(c) the adapter drives the emulator: answers, streams, embeddings, every fault, and batch
    jobs end to end.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pydantic
import pytest
from google import genai
from google.genai import batches as sdk_batches
from google.genai import errors as sdk_errors
from google.genai import types

from batchroute.catalog import builtin_catalog
from batchroute.providers.base import (
    PermanentProviderError,
    ProviderRequest,
    ProviderResult,
    ProviderUnavailable,
    StreamDelta,
    StreamEnd,
    StreamStart,
    TransientProviderError,
    UnknownJob,
)
from batchroute.providers.endpoints import ProviderEndpoint
from batchroute.providers.gemini import make_batch, make_sync
from batchroute.providers.gemini.client import GeminiBatches, GeminiModels
from batchroute.providers.http import Timeouts
from batchroute_tools.emulators.behaviour import Behaviour, EmulatorConfig
from batchroute_tools.emulators.gemini import GeminiEmulator
from batchroute_tools.emulators.server import EmulatorServer, Handler, Reply, Request

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures/vendors/gemini"
MODEL = "gemini-2.0-flash-001"
EMBEDDER = "text-embedding-004"
BATCH_SECONDS = 60.0
T0 = 1_772_000_000.0


@dataclass
class Stack:
    server: EmulatorServer
    emulator: GeminiEmulator
    clock: list[float]
    sent: list[tuple[str, Any]] = field(default_factory=list)  # (path, JSON body) the emulator got
    _sdk: genai.Client | None = None

    @property
    def base_url(self) -> str:
        return f"{self.server.base_url}/google"

    def endpoint(self, **timeouts: float) -> ProviderEndpoint:
        return ProviderEndpoint("google", "gemini", base_url=self.base_url, timeouts=Timeouts(**timeouts))

    def sync(self, key: str | None = "test-key") -> GeminiModels:
        return make_sync(self.endpoint(read=10), key)

    def batches(self) -> GeminiBatches:
        return make_batch(self.endpoint(read=10), "test-key")

    def sdk(self) -> genai.Client:
        """One SDK client for the test (a client closes its connections when dropped)."""
        if self._sdk is None:
            options = types.HttpOptions(base_url=self.base_url, api_version="v1beta")
            self._sdk = genai.Client(api_key="test-key", http_options=options)
        return self._sdk

    def raw(self, method: str, path: str, body: Any = None) -> httpx.Response:
        headers = {"x-goog-api-key": "test-key"}
        return httpx.request(method, f"{self.base_url}{path}", json=body, headers=headers, timeout=10)


@pytest.fixture(scope="module")
def served() -> Iterator[Stack]:
    """One server for the module (stopping one waits out its poll interval)."""
    clock = [T0]
    emulator = GeminiEmulator(Behaviour(EmulatorConfig()), clock=lambda: clock[0])
    server = EmulatorServer([emulator.vendor]).start()
    found = Stack(server, emulator, clock)
    routes = emulator.vendor.routes
    routes[:] = [(method, pattern, _recording(handler, found)) for method, pattern, handler in routes]
    try:
        yield found
    finally:
        server.stop()


@pytest.fixture
def stack(served: Stack) -> Stack:
    """The module's server, as new: a fresh behaviour (no fault seen yet), no jobs, the clock
    at T0, nothing recorded."""
    served.emulator.behaviour = Behaviour(EmulatorConfig(batch_seconds=BATCH_SECONDS))
    served.emulator._jobs.clear()
    served.clock[0] = T0
    served.sent.clear()
    served._sdk = None
    return served


def _recording(handler: Handler, stack: Stack) -> Handler:
    def record(request: Request) -> Reply:
        if request.body:
            stack.sent.append((request.path, json.loads(request.body)))
        return handler(request)

    return record


def item(
    payload: Mapping[str, Any], *, custom_id: str = "seq-0", max_output_tokens: int = 200
) -> ProviderRequest:
    return ProviderRequest(
        custom_id, f"item-{custom_id}", "responses", "gemini-2.0-flash", MODEL, payload, max_output_tokens
    )


def embedding(value: object) -> ProviderRequest:
    return ProviderRequest("seq-0", "item-0", "embeddings", "text-embedding", EMBEDDER, {"input": value}, 0)


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def strict_model(raw: Mapping[str, Any]) -> types.Model:
    """A REST Model as the SDK's type: its one renamed field (supportedGenerationMethods ->
    supported_actions, as models.py converts it) and every other field as it is."""
    found = {k: v for k, v in raw.items() if k != "supportedGenerationMethods"}
    return types.Model.model_validate({**found, "supportedActions": raw["supportedGenerationMethods"]})


def strict(model: type[pydantic.BaseModel], value: Any) -> Any:
    """`value` as the SDK's type, which must say it back exactly: an unknown field, a
    snake_case name or a wrong type fails."""
    parsed = model.model_validate_json(json.dumps(value))
    assert parsed.model_dump(mode="json", by_alias=True, exclude_none=True) == value
    return parsed


# -- (a) the SDK against the emulator ----------------------------------------------------------
def test_sdk_generate_content(stack: Stack) -> None:
    client = stack.sdk()
    config = types.GenerateContentConfig(
        system_instruction="Be brief.", max_output_tokens=200, temperature=0.1
    )
    answer = client.models.generate_content(model=MODEL, contents="What is batch mode?", config=config)
    assert answer.text is not None
    assert answer.text.startswith(f"Simulated answer from google/{MODEL}:")
    assert answer.candidates is not None
    assert answer.candidates[0].finish_reason == types.FinishReason.STOP
    assert answer.usage_metadata is not None
    assert answer.usage_metadata.candidates_token_count == len(answer.text.split())
    cut = client.models.generate_content(
        model=MODEL, contents="x", config=types.GenerateContentConfig(max_output_tokens=3)
    )
    assert cut.candidates is not None
    assert cut.candidates[0].finish_reason == types.FinishReason.MAX_TOKENS
    raw = stack.raw(
        "POST", f"/v1beta/models/{MODEL}:generateContent", {"contents": [{"parts": [{"text": "x"}]}]}
    )
    types.GenerateContentResponse.model_validate(raw.json())  # no field the SDK lacks


def test_sdk_stream(stack: Stack) -> None:
    chunks = list(stack.sdk().models.generate_content_stream(model=MODEL, contents="Stream this."))
    assert len(chunks) > 2
    assert "".join(c.text or "" for c in chunks).startswith("Simulated answer")
    assert chunks[-1].candidates is not None
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP
    assert chunks[-1].usage_metadata is not None
    assert chunks[-1].usage_metadata.candidates_token_count == len(chunks)
    with httpx.stream(
        "POST",
        f"{stack.base_url}/v1beta/models/{MODEL}:streamGenerateContent?alt=sse",
        json={"contents": [{"parts": [{"text": "x"}]}]},
        headers={"x-goog-api-key": "k"},
    ) as response:
        assert response.headers["content-type"] == "text/event-stream"
        events = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    for data in events:
        types.GenerateContentResponse.model_validate_json(data)


def test_sdk_embeddings(stack: Stack) -> None:
    many = stack.sdk().models.embed_content(model=EMBEDDER, contents=["one", "two", "three"])
    assert many.embeddings is not None
    assert [len(e.values or []) for e in many.embeddings] == [16, 16, 16]
    sized = stack.sdk().models.embed_content(
        model=EMBEDDER, contents="one", config=types.EmbedContentConfig(output_dimensionality=8)
    )
    assert sized.embeddings is not None
    assert sized.embeddings[0].values == many.embeddings[0].values[:8]  # type: ignore[index]
    body = {"content": {"parts": [{"text": "one"}]}}
    single = stack.raw("POST", f"/v1beta/models/{EMBEDDER}:embedContent", body).json()
    assert set(single) == {"embedding"}
    assert strict(types.ContentEmbedding, single["embedding"]).values == many.embeddings[0].values
    batch = {"requests": [{"model": f"models/{EMBEDDER}", **body}]}
    types.EmbedContentResponse.model_validate(
        stack.raw("POST", f"/v1beta/models/{EMBEDDER}:batchEmbedContents", batch).json()
    )


def test_sdk_models(stack: Stack) -> None:
    listed = list(stack.sdk().models.list())
    assert [m.name for m in listed] == [f"models/{m}" for m in stack.emulator.models]
    one = stack.sdk().models.get(model=MODEL)
    assert one.supported_actions is not None
    assert "batchGenerateContent" in one.supported_actions
    for raw in stack.raw("GET", "/v1beta/models").json()["models"]:
        strict_model(raw)


def test_sdk_batch_job(stack: Stack) -> None:
    client = stack.sdk()
    requests: list[types.InlinedRequestDict] = [
        {"contents": [{"role": "user", "parts": [{"text": "First."}]}], "metadata": {"key": "a"}},
        {"contents": [{"role": "user", "parts": [{"text": "[simulate:fail]"}]}], "metadata": {"key": "b"}},
    ]
    job = client.batches.create(model=MODEL, src=requests, config={"display_name": "sdk"})
    assert job.name is not None
    assert job.state == types.JobState.JOB_STATE_PENDING
    assert job.display_name == "sdk"
    stack.clock[0] += 1
    assert client.batches.get(name=job.name).state == types.JobState.JOB_STATE_RUNNING
    stack.clock[0] += BATCH_SECONDS
    done = client.batches.get(name=job.name)
    assert done.state == types.JobState.JOB_STATE_SUCCEEDED
    assert done.dest is not None
    assert done.dest.inlined_responses is not None
    answered = {(r.metadata or {})["key"]: r for r in done.dest.inlined_responses}
    assert answered["a"].response is not None
    assert (answered["a"].response.text or "").startswith("Simulated answer")
    assert answered["b"].error is not None
    assert answered["b"].error.code == 3
    raw = stack.raw("GET", f"/v1beta/{job.name}").json()
    types.BatchJob.model_validate(sdk_batches._BatchJob_from_mldev(raw))
    for entry in raw["response"]["inlinedResponses"]["inlinedResponses"]:
        types.InlinedResponse.model_validate(entry)
    client.batches.delete(name=job.name)
    with pytest.raises(sdk_errors.ClientError) as gone:
        client.batches.get(name=job.name)
    assert (gone.value.code, gone.value.status) == (404, "NOT_FOUND")


def test_sdk_batch_cancelled_and_expired(stack: Stack) -> None:
    client = stack.sdk()
    sources: list[list[types.InlinedRequestDict]] = [
        [{"contents": [{"parts": [{"text": text}]}], "metadata": {"key": "a"}}]
        for text in ("Cancel me.", "Too slow [simulate:expire]")
    ]
    jobs = [client.batches.create(model=MODEL, src=src).name for src in sources]
    assert jobs[0] is not None
    assert jobs[1] is not None
    client.batches.cancel(name=jobs[0])
    stack.clock[0] += BATCH_SECONDS
    assert client.batches.get(name=jobs[0]).state == types.JobState.JOB_STATE_CANCELLED
    expired = client.batches.get(name=jobs[1])
    assert expired.state == types.JobState.JOB_STATE_EXPIRED
    assert expired.dest is not None
    assert expired.dest.inlined_responses == []


@pytest.mark.parametrize(
    ("marker", "code", "status"),
    [
        ("[simulate:fail]", 400, "INVALID_ARGUMENT"),
        ("[simulate:transient]", 500, "INTERNAL"),
        ("[simulate:429]", 429, "RESOURCE_EXHAUSTED"),
        ("[simulate:overloaded]", 503, "UNAVAILABLE"),
    ],
)
def test_sdk_reads_the_errors(stack: Stack, marker: str, code: int, status: str) -> None:
    with pytest.raises(sdk_errors.APIError) as raised:
        stack.sdk().models.generate_content(model=MODEL, contents=f"hello {marker}")
    assert (raised.value.code, raised.value.status) == (code, status)
    assert raised.value.message is not None
    assert "simulated" in raised.value.message


def test_sdk_unknown_model_and_missing_key(stack: Stack) -> None:
    with pytest.raises(sdk_errors.ClientError) as unknown:
        stack.sdk().models.generate_content(model="gemini-0.1-nope", contents="x")
    assert (unknown.value.code, unknown.value.status) == (404, "NOT_FOUND")
    keyless = httpx.post(f"{stack.base_url}/v1beta/models/{MODEL}:generateContent", json={})
    assert keyless.status_code == 403
    assert keyless.json()["error"]["status"] == "PERMISSION_DENIED"


GENERATE_FIXTURES = (
    "generate_text",
    "generate_max_tokens",
    "generate_function_call",
    "generate_prompt_blocked",
    "generate_safety_finish",
    "generate_grounded_code",
)


@pytest.mark.parametrize("name", GENERATE_FIXTURES)
def test_fixtures_are_sdk_responses(name: str) -> None:
    types.GenerateContentResponse.model_validate(fixture(name))


def test_other_fixtures_are_sdk_types() -> None:
    for chunk in fixture("stream_chunks"):
        types.GenerateContentResponse.model_validate(chunk)
    types.ContentEmbedding.model_validate(fixture("embed_content")["embedding"])
    types.EmbedContentResponse.model_validate(fixture("batch_embed_contents"))
    for name in ("batch_created", "batch_running", "batch_succeeded", "batch_expired", "batch_cancelled"):
        job = types.BatchJob.model_validate(sdk_batches._BatchJob_from_mldev(fixture(name)))
        assert job.state is not None
    done = fixture("batch_succeeded")
    for entry in done["metadata"]["output"]["inlinedResponses"]["inlinedResponses"]:
        types.InlinedResponse.model_validate(entry)
    for raw in fixture("models_list")["models"]:
        strict_model(raw)
    for name in ("error_429", "error_400", "error_400_api_key", "error_503", "error_404_batch"):
        error = sdk_errors.APIError(0, fixture(name))
        assert error.code == fixture(name)["error"]["code"]
        assert error.status == fixture(name)["error"]["status"]


# -- (b) what the adapter sends, against the SDK's request types -------------------------------
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "rank": {"type": ["integer", "null"]}},
    "required": ["city"],
    "additionalProperties": False,
}
RICH = {
    "system": "Be brief.",
    "messages": [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Describe, then call the tool."},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                {"type": "image_url", "image_url": {"url": "https://example.com/a.jpg"}},
            ],
        },
        {
            "role": "assistant",
            "content": "Calling it.",
            "tool_calls": [
                {
                    "id": "call_0",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"q": "cats"}'},
                    "extra_content": {"google": {"thought_signature": "c2ln"}},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_0", "content": "no results"},
    ],
    "temperature": 0.2,
    "top_p": 0.9,
    "stop": ["END"],
    "seed": 3,
    "tools": [
        {"type": "function", "function": {"name": "lookup", "description": "Search", "parameters": SCHEMA}},
        {"type": "function", "function": {"name": "fetch", "parameters": {"$ref": "#/defs/x"}}},
        # (no hosted tool beside them: Gemini 2.x refuses the mix, and routing keeps it away)
    ],
    "tool_choice": {"type": "function", "function": {"name": "lookup"}},
    # (no JSON response_format beside the tools: Gemini 2.x refuses that mix too, and routing
    # keeps it away, `tools_with_json_output`)
}
FORMATTED = {
    "input": "Name a city.",
    "response_format": {"type": "json_schema", "json_schema": {"name": "city", "schema": SCHEMA}},
}
GENERATE_PARTS: dict[str, type[pydantic.BaseModel]] = {
    "systemInstruction": types.Content,
    "toolConfig": types.ToolConfig,
    "generationConfig": types.GenerationConfig,
}


def check_generate_request(body: Mapping[str, Any]) -> None:
    """A GenerateContentRequest in REST JSON: every part as the SDK's types say it."""
    assert set(body) <= {"contents", "tools", *GENERATE_PARTS}
    for content in body["contents"]:
        strict(types.Content, content)
    for tool in body.get("tools", []):
        strict(types.Tool, tool)
    for key, model in GENERATE_PARTS.items():
        if key in body:
            strict(model, body[key])


def test_adapter_generate_requests_are_sdk_types(stack: Stack) -> None:
    sync = stack.sync()
    sync.complete(item(RICH))
    sync.complete(item(FORMATTED))
    list(sync.stream(item({"input": "Stream.", "response_format": {"type": "json_object"}})))
    other = {
        **FORMATTED,
        "response_format": {"type": "json_schema", "json_schema": {"schema": {"$ref": "#/x"}}},
    }
    sync.complete(item(other))
    sent = [body for path, body in stack.sent if "Generate" in path or "generate" in path]
    assert len(sent) == 4
    for body in sent:
        check_generate_request(body)
    config = sent[1]["generationConfig"]
    assert config["responseSchema"]["properties"]["rank"] == {"type": "INTEGER", "nullable": True}
    assert sent[3]["generationConfig"]["responseJsonSchema"] == {"$ref": "#/x"}
    assert sent[0]["tools"][0]["functionDeclarations"][1]["parametersJsonSchema"] == {"$ref": "#/defs/x"}


def test_adapter_requests_match_what_the_sdk_sends(stack: Stack) -> None:
    """The SDK's own request conversion of the same content gives the adapter's body."""
    stack.sync().complete(item({"system": "Be brief.", "input": "Hello", "temperature": 0.5, "stop": "END"}))
    ours = stack.sent[-1][1]
    config = types.GenerateContentConfig(
        system_instruction=types.Content(parts=[types.Part(text="Be brief.")]),
        max_output_tokens=200,
        temperature=0.5,
        stop_sequences=["END"],
    )
    stack.sdk().models.generate_content(
        model=MODEL, contents=[types.Content(role="user", parts=[types.Part(text="Hello")])], config=config
    )
    assert stack.sent[-1][1] == ours


def test_adapter_embedding_requests_are_sdk_types(stack: Stack) -> None:
    sync = stack.sync()
    sync.complete(embedding("one"))
    sync.complete(
        ProviderRequest("seq-1", "i", "embeddings", "e", EMBEDDER, {"input": ["a", "b"], "dimensions": 8}, 0)
    )
    (_, single), (_, many) = stack.sent
    assert set(single) == {"model", "content"}
    strict(types.Content, single["content"])
    for entry in many["requests"]:
        assert entry["model"] == f"models/{EMBEDDER}"
        strict(types.Content, entry["content"])
        strict(types.EmbedContentConfig, {"outputDimensionality": entry["outputDimensionality"]})
    sdk_sent = stack.sdk().models.embed_content(
        model=EMBEDDER, contents=["a", "b"], config=types.EmbedContentConfig(output_dimensionality=8)
    )
    assert sdk_sent.embeddings is not None
    # batchEmbedContents as the SDK sends it, but for the role the SDK writes into every
    # content (Google's reference leaves it out of embedding requests; it means nothing there)
    for entry in stack.sent[-1][1]["requests"]:
        assert entry["content"].pop("role") == "user"
    assert stack.sent[-1][1] == many


def test_adapter_batch_request_is_sdk_types(stack: Stack) -> None:
    stack.batches().submit(
        [
            item(RICH, custom_id="seq-0"),
            item({"input": "Two"}, custom_id="seq-1"),
            item(FORMATTED, custom_id="seq-2"),
        ]
    )
    ((path, body),) = stack.sent
    assert path == f"/v1beta/models/{MODEL}:batchGenerateContent"
    assert set(body) == {"batch"}
    assert set(body["batch"]) == {"displayName", "inputConfig"}
    strict(types.CreateBatchJobConfig, {"displayName": body["batch"]["displayName"]})
    inlined = body["batch"]["inputConfig"]["requests"]["requests"]
    for entry in inlined:
        assert set(entry) == {"request", "metadata"}
        check_generate_request(entry["request"])
        types.InlinedRequest.model_validate({"metadata": entry["metadata"]})
    assert [e["metadata"]["key"] for e in inlined] == ["seq-0", "seq-1", "seq-2"]


# -- (c) the adapter against the emulator ------------------------------------------------------
def test_stop_sequences_cut_the_answer_as_gemini_does(stack: Stack) -> None:
    # Given a request whose stop sequences the answer meets (" from" in "Simulated answer from")
    stopped = item({"input": "Say hi", "stop": [" from", "zzz"]})
    whole = stack.sync().complete(stopped)
    # Then the answer ends before it (finishReason STOP)
    assert whole.output is not None and whole.raw is not None
    assert (whole.output["content"], whole.output["finish_reason"]) == ("Simulated answer", "stop")
    assert whole.raw["candidates"][0]["finishReason"] == "STOP"
    events = list(stack.sync().stream(stopped))
    assert "".join(e.text for e in events if isinstance(e, StreamDelta)) == "Simulated answer"


def test_complete(stack: Stack) -> None:
    result = stack.sync().complete(item({"input": "What is batch mode?"}))
    assert result.status == "completed"
    assert result.output is not None
    assert result.output["content"].startswith(f"Simulated answer from google/{MODEL}:")
    assert result.output["finish_reason"] == "stop"
    assert result.raw is not None
    meta = result.raw["usageMetadata"]
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (
        meta["promptTokenCount"],
        meta["candidatesTokenCount"],
    )
    cut = stack.sync().complete(item({"input": "What is batch mode?"}, max_output_tokens=2))
    assert cut.output is not None
    assert cut.output["finish_reason"] == "length"
    assert cut.usage.completion_tokens == 2


def test_stream(stack: Stack) -> None:
    events = list(stack.sync().stream(item({"input": "Stream this."})))
    assert isinstance(events[0], StreamStart)
    deltas = [e.text for e in events if isinstance(e, StreamDelta)]
    end = events[-1]
    assert isinstance(end, StreamEnd)
    assert end.result.output is not None
    assert end.result.output["content"] == "".join(deltas)
    assert end.usage.completion_tokens == len(deltas)
    assert end.result.raw is not None
    types.GenerateContentResponse.model_validate(end.result.raw)
    whole = stack.sync().complete(item({"input": "Stream this."}))
    assert whole.output is not None
    assert whole.output["content"] == end.result.output["content"]


def test_embeddings_one_and_many(stack: Stack) -> None:
    one = stack.sync().complete(embedding("hello"))
    assert one.output is not None
    assert one.output["dimensions"] == 16
    assert len(one.output["embedding"]) == 16
    assert one.usage.prompt_tokens == 5  # estimated: ceil(5 / 3) + 3
    texts = [f"text {i}" for i in range(130)]
    many = stack.sync().complete(embedding(texts))
    assert many.output is not None
    assert len(many.output["embeddings"]) == 130
    assert many.output["embeddings"][0] == stack.sync().complete(embedding("text 0")).output["embedding"]  # type: ignore[index]
    assert [len(body["requests"]) for path, body in stack.sent if path.endswith(":batchEmbedContents")] == [
        100,
        30,
    ]
    assert many.raw is not None
    types.EmbedContentResponse.model_validate(many.raw)


def test_rate_limited_then_answered(stack: Stack) -> None:
    request = item({"input": "Busy? [simulate:429]"})
    with pytest.raises(TransientProviderError) as raised:
        stack.sync().complete(request)
    assert raised.value.code == "rate_limited"
    assert raised.value.retry_after_seconds == pytest.approx(0.2)  # RetryInfo, not the header's 1 s
    assert stack.sync().complete(request.next_attempt()).status == "completed"


@pytest.mark.parametrize(
    ("marker", "code"), [("[simulate:overloaded]", "overloaded"), ("[simulate:transient]", "provider_5xx")]
)
def test_5xx_then_answered(stack: Stack, marker: str, code: str) -> None:
    request = item({"input": f"Now {marker}"})
    with pytest.raises(TransientProviderError) as raised:
        stack.sync().complete(request)
    assert raised.value.code == code
    assert stack.sync().complete(request).status == "completed"


def test_permanent_400(stack: Stack) -> None:
    for _ in range(2):
        with pytest.raises(PermanentProviderError) as raised:
            stack.sync().complete(item({"input": "No. [simulate:fail]"}))
        assert raised.value.code == "provider_rejected"
        assert "simulated permanent failure" in raised.value.message


def test_dropped_connection_is_unavailable(stack: Stack) -> None:
    with pytest.raises(ProviderUnavailable) as raised:
        stack.sync().complete(item({"input": "[simulate:down:google]"}))
    assert raised.value.code == "provider_unreachable"
    stream = stack.sync().stream(item({"input": "[simulate:down]"}))
    with pytest.raises(ProviderUnavailable):
        next(stream)  # before the first byte: failover is allowed


def test_stream_reset_midway(stack: Stack) -> None:
    events = stack.sync().stream(item({"input": "Long answer [simulate:reset]"}))
    seen = [next(events), next(events)]
    with pytest.raises(TransientProviderError) as raised:
        seen.extend(events)
    assert raised.value.code == "stream_interrupted"
    assert isinstance(seen[0], StreamStart)
    assert isinstance(seen[1], StreamDelta)
    assert not any(isinstance(e, StreamEnd) for e in seen)
    retried = list(stack.sync().stream(item({"input": "Long answer [simulate:reset]"})))
    assert isinstance(retried[-1], StreamEnd)


def test_stream_faults_before_the_first_byte(stack: Stack) -> None:
    with pytest.raises(TransientProviderError) as failed:
        next(stack.sync().stream(item({"input": "[simulate:5xx:google]"})))
    assert failed.value.code == "provider_5xx"
    silent = ProviderRequest(
        "seq-0",
        "i",
        "responses",
        "m",
        MODEL,
        {"input": "[simulate:timeout:google]"},
        50,
        first_byte_timeout_seconds=0.3,
    )
    with pytest.raises(TransientProviderError) as waited:
        next(stack.sync().stream(silent))
    assert waited.value.code == "provider_timeout"


def test_auth_and_unknown_model(stack: Stack) -> None:
    with pytest.raises(ProviderUnavailable) as keyless:
        stack.sync(key=None).complete(item({"input": "x"}))
    assert keyless.value.code == "provider_auth_failed"
    unknown = ProviderRequest("seq-0", "i", "responses", "m", "gemini-0.1-nope", {"input": "x"}, 10)
    with pytest.raises(PermanentProviderError) as missing:
        stack.sync().complete(unknown)
    assert missing.value.code == "not_found"
    assert stack.sync().check() == list(stack.emulator.models)


def by_id(results: Iterator[ProviderResult]) -> dict[str, ProviderResult]:
    return {r.custom_id: r for r in results}


def test_batch_job_end_to_end(stack: Stack) -> None:
    batches = stack.batches()
    job = batches.submit(
        [
            item({"input": "First question."}, custom_id="seq-0"),
            item({"input": "Refuse me [simulate:fail]"}, custom_id="seq-1"),
            item({"input": "Flaky [simulate:transient]"}, custom_id="seq-2"),
            item({"input": "Busy [simulate:429]"}, custom_id="seq-3"),
        ]
    )
    assert job.startswith("batches/")
    assert batches.poll(job).state == "validating"
    stack.clock[0] += BATCH_SECONDS / 2
    running = batches.poll(job)
    assert (running.state, running.total, running.completed_count) == ("in_progress", 4, 2)
    stack.clock[0] += BATCH_SECONDS
    done = batches.poll(job)
    assert (done.state, done.total, done.completed_count, done.failed_count) == ("completed", 4, 1, 3)
    batches.cancel(job)  # a finished job: nothing to stop, no error
    results = by_id(batches.results(job))
    assert set(results) == {"seq-0", "seq-1", "seq-2", "seq-3"}
    assert results["seq-0"].status == "completed"
    assert results["seq-0"].output is not None
    assert results["seq-0"].output["content"].startswith("Simulated answer")
    assert results["seq-0"].usage.completion_tokens > 0
    errors = {k: r.error for k, r in results.items() if r.error is not None}
    assert {k: (e.code, e.transient) for k, e in errors.items()} == {
        "seq-1": ("provider_rejected", False),
        "seq-2": ("provider_5xx", True),
        "seq-3": ("rate_limited", True),
    }
    with pytest.raises(UnknownJob):  # read and deleted
        batches.poll(job)
    retry = batches.submit([item({"input": "Flaky [simulate:transient]"}, custom_id="seq-2")])
    stack.clock[0] += BATCH_SECONDS
    assert by_id(batches.results(retry))["seq-2"].status == "completed"


def test_batch_job_expires(stack: Stack) -> None:
    batches = stack.batches()
    job = batches.submit(
        [
            item({"input": "Quick."}, custom_id="seq-0"),
            item({"input": "Slow [simulate:expire]"}, custom_id="seq-1"),
        ]
    )
    stack.clock[0] += BATCH_SECONDS
    status = batches.poll(job)
    assert (status.state, status.completed_count) == ("expired", 1)
    assert status.terminal
    assert set(by_id(batches.results(job))) == {"seq-0"}


def test_batch_malformed_is_left_out_once(stack: Stack) -> None:
    batches = stack.batches()
    lost = item({"input": "Lost [simulate:malformed]"}, custom_id="seq-1")
    job = batches.submit([item({"input": "Kept."}, custom_id="seq-0"), lost])
    stack.clock[0] += BATCH_SECONDS
    assert batches.poll(job).state == "completed"
    assert set(by_id(batches.results(job))) == {"seq-0"}
    again = batches.submit([lost])
    stack.clock[0] += BATCH_SECONDS
    assert by_id(batches.results(again))["seq-1"].status == "completed"


def test_batch_cancel_and_unknown(stack: Stack) -> None:
    batches = stack.batches()
    job = batches.submit([item({"input": "x"})])
    stack.clock[0] += 1
    batches.cancel(job)
    stack.clock[0] += BATCH_SECONDS
    assert batches.poll(job).state == "cancelled"
    assert list(batches.results(job)) == []
    with pytest.raises(UnknownJob):
        batches.poll("batches/doesnotexist")
    with pytest.raises(UnknownJob):
        list(batches.results("batches/doesnotexist"))


def test_down_provider_refuses_the_submit(stack: Stack) -> None:
    down = GeminiEmulator(Behaviour(EmulatorConfig(providers_down=frozenset({"google"}))), prefix="/down")
    server = EmulatorServer([down.vendor]).start()
    try:
        endpoint = ProviderEndpoint("google", "gemini", base_url=f"{server.base_url}/down")
        with pytest.raises(ProviderUnavailable):
            make_batch(endpoint, "k").submit([item({"input": "x"})])
        with pytest.raises(ProviderUnavailable):
            make_sync(endpoint, "k").check()
    finally:
        server.stop()


# -- (d) as strict as Google: bad bodies refused, hosted tools run -----------------------------
PLAIN = {"contents": [{"role": "user", "parts": [{"text": "x"}]}]}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**PLAIN, "maxTokens": 5}, "maxTokens"),
        (
            {**PLAIN, "generationConfig": {"stopSequences": ["1", "2", "3", "4", "5", "6"]}},
            "generationConfig.stopSequences",
        ),
        ({**PLAIN, "tools": [{"type": "web_search_preview"}]}, "tools[0].type"),
        (
            {**PLAIN, "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}]},
            "tools[0].type",
        ),
        ({"contents": [{"role": "assistant", "parts": [{"text": "x"}]}]}, "contents[0].role"),
    ],
)
def test_bad_bodies_get_googles_400(stack: Stack, body: dict[str, Any], field: str) -> None:
    for method in ("generateContent", "streamGenerateContent?alt=sse"):
        answer = stack.raw("POST", f"/v1beta/models/{MODEL}:{method}", body)
        assert answer.status_code == 400
        assert answer.headers["content-type"] == "application/json; charset=UTF-8"
        error = answer.json()["error"]
        assert (error["code"], error["status"]) == (400, "INVALID_ARGUMENT")
        (details,) = error["details"]
        assert details["@type"] == "type.googleapis.com/google.rpc.BadRequest"
        assert field in [v["field"] for v in details["fieldViolations"]]
        parsed = sdk_errors.APIError(400, answer.json())
        assert (parsed.code, parsed.status) == (400, "INVALID_ARGUMENT")


def test_the_sdk_meets_the_400_too(stack: Stack) -> None:
    config = types.GenerateContentConfig(stop_sequences=["1", "2", "3", "4", "5", "6"])
    with pytest.raises(sdk_errors.ClientError) as raised:
        stack.sdk().models.generate_content(model=MODEL, contents="x", config=config)
    assert (raised.value.code, raised.value.status) == (400, "INVALID_ARGUMENT")
    assert raised.value.message is not None
    assert "at most 5 stop sequences" in raised.value.message


def test_bad_batch_and_embedding_bodies_get_googles_400(stack: Stack) -> None:
    inlined = {"requests": {"requests": [{"request": {**PLAIN, "stop": ["x"]}, "metadata": {"key": "a"}}]}}
    created = stack.raw(
        "POST", f"/v1beta/models/{MODEL}:batchGenerateContent", {"batch": {"inputConfig": inlined}}
    )
    assert created.status_code == 400
    assert "requests[0].request.stop" in created.json()["error"]["message"]
    assert stack.emulator._jobs == {}
    other = {"requests": [{"model": "models/another", "content": {"parts": [{"text": "x"}]}}]}
    embedded = stack.raw("POST", f"/v1beta/models/{EMBEDDER}:batchEmbedContents", other)
    assert embedded.status_code == 400
    assert embedded.json()["error"]["status"] == "INVALID_ARGUMENT"
    sized = {"content": {"parts": [{"text": "x"}]}, "outputDimensionality": 0}
    assert stack.raw("POST", f"/v1beta/models/{EMBEDDER}:embedContent", sized).status_code == 400


def test_answers_leave_out_what_google_leaves_out(stack: Stack) -> None:
    answer = stack.raw("POST", f"/v1beta/models/{MODEL}:generateContent", PLAIN)
    assert answer.headers["content-type"] == "application/json; charset=UTF-8"
    assert "index" not in answer.json()["candidates"][0]
    assert "groundingMetadata" not in answer.json()["candidates"][0]
    inlined = {"requests": {"requests": [{"request": PLAIN, "metadata": {"key": "a"}}]}}
    created = stack.raw(
        "POST", f"/v1beta/models/{MODEL}:batchGenerateContent", {"batch": {"inputConfig": inlined}}
    )
    pending = created.json()
    assert "done" not in pending
    assert pending["metadata"]["batchStats"] == {"requestCount": "1", "pendingRequestCount": "1"}
    types.BatchJob.model_validate(sdk_batches._BatchJob_from_mldev(pending))
    stack.clock[0] += BATCH_SECONDS
    done = stack.raw("GET", f"/v1beta/{pending['name']}").json()
    assert done["done"] is True
    assert done["metadata"]["batchStats"] == {"requestCount": "1", "successfulRequestCount": "1"}


HOSTED = {
    "input": "Who won the 2022 World Cup? Check the score with code.",
    "tools": [{"type": "web_search"}, {"type": "code_interpreter", "container": {"type": "auto"}}],
}
BILLED = (("python_execution", 1), ("web_search", 1))


def test_hosted_tools_whole_and_streamed(stack: Stack) -> None:
    whole = stack.sync().complete(item(HOSTED))
    assert whole.status == "completed"
    assert whole.usage.tool_uses == BILLED
    assert whole.output is not None
    assert whole.output["content"].startswith("Simulated answer")  # the code's parts are not text
    assert whole.raw is not None
    response = types.GenerateContentResponse.model_validate(whole.raw)
    assert response.candidates is not None
    grounding = response.candidates[0].grounding_metadata
    assert grounding is not None
    assert grounding.web_search_queries == ["Who won the 2022 World Cup? Check the"]  # 8 words
    assert response.executable_code == "print(len('Who won the 2022 World Cup? Check the'))"
    assert response.code_execution_result == "37\n"
    sent = stack.sent[-1][1]
    assert sent["tools"] == [{"googleSearch": {}}, {"codeExecution": {}}]
    events = list(stack.sync().stream(item(HOSTED)))
    end = events[-1]
    assert isinstance(end, StreamEnd)
    assert end.usage.tool_uses == BILLED
    assert end.result.output is not None
    assert end.result.output["content"] == whole.output["content"]
    assert "".join(e.text for e in events if isinstance(e, StreamDelta)) == whole.output["content"]


def test_a_batch_holding_a_request_that_finds_google_down_is_never_made(stack: Stack) -> None:
    batches = stack.batches()
    fine = item({"input": "Fine [simulate:down:openai]"}, custom_id="seq-0")  # another provider's mark
    # Then the create is dropped unanswered: the lane is unavailable (it fails over)
    with pytest.raises(ProviderUnavailable) as raised:
        batches.submit([fine, item({"input": "Gone [simulate:down:google]"}, custom_id="seq-1")])
    assert raised.value.code == "provider_unreachable"
    job = batches.submit([fine])
    stack.clock[0] += BATCH_SECONDS
    assert by_id(batches.results(job))["seq-0"].status == "completed"


def test_hosted_tools_in_a_batch_job(stack: Stack) -> None:
    batches = stack.batches()
    job = batches.submit([item(HOSTED, custom_id="seq-0"), item({"input": "Plain."}, custom_id="seq-1")])
    stack.clock[0] += BATCH_SECONDS
    results = by_id(batches.results(job))
    assert results["seq-0"].usage.tool_uses == BILLED
    assert results["seq-1"].usage.tool_uses == ()
    assert results["seq-0"].raw is not None
    types.GenerateContentResponse.model_validate(results["seq-0"].raw)


def test_the_sdk_reads_grounded_and_code_answers(stack: Stack) -> None:
    config = types.GenerateContentConfig(
        tools=[
            types.Tool(google_search=types.GoogleSearch()),
            types.Tool(code_execution=types.ToolCodeExecution()),
        ]
    )
    answer = stack.sdk().models.generate_content(model=MODEL, contents="Search and run.", config=config)
    assert answer.candidates is not None
    assert answer.candidates[0].grounding_metadata is not None
    assert answer.executable_code is not None
    chunks = list(
        stack.sdk().models.generate_content_stream(model=MODEL, contents="Search and run.", config=config)
    )
    assert chunks[0].executable_code == answer.executable_code
    assert chunks[-1].candidates is not None
    assert chunks[-1].candidates[0].grounding_metadata == answer.candidates[0].grounding_metadata


# -- forced function calls --------------------------------------------------------------------
CITY = types.Schema(type=types.Type.OBJECT, properties={"city": types.Schema(type=types.Type.STRING)})
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


def test_the_sdk_reads_a_forced_function_call(stack: Stack) -> None:
    # Given a request that must call get_weather (mode ANY, the allowed name)
    declarations = [
        types.FunctionDeclaration(name="get_time", parameters=CITY),
        types.FunctionDeclaration(name="get_weather", parameters=CITY),
    ]
    calling = types.FunctionCallingConfig(
        mode=types.FunctionCallingConfigMode.ANY, allowed_function_names=["get_weather"]
    )
    config = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=declarations)],
        tool_config=types.ToolConfig(function_calling_config=calling),
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    # When the SDK asks, whole and streamed
    answer = stack.sdk().models.generate_content(model=MODEL, contents="Weather?", config=config)
    chunks = list(stack.sdk().models.generate_content_stream(model=MODEL, contents="Weather?", config=config))
    # Then the answer is that call, finishReason STOP, usage as for text
    assert answer.function_calls is not None
    # its args valid under the declaration's parameters, as a model fills them in (were `{}`)
    assert [(c.name, c.args) for c in answer.function_calls] == [("get_weather", {"city": "simulated"})]
    assert answer.candidates is not None and answer.candidates[0].finish_reason == types.FinishReason.STOP
    assert answer.usage_metadata is not None and (answer.usage_metadata.candidates_token_count or 0) > 0
    [chunk] = chunks
    assert chunk.function_calls is not None and [c.name for c in chunk.function_calls] == ["get_weather"]
    assert chunk.candidates is not None and chunk.candidates[0].finish_reason == types.FinishReason.STOP
    assert chunk.usage_metadata == answer.usage_metadata
    # And the wire answer is the SDK's type, field for field
    body = {
        "contents": [{"role": "user", "parts": [{"text": "Weather?"}]}],
        "tools": [{"functionDeclarations": [{"name": "get_time"}, {"name": "get_weather"}]}],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY"}},
    }
    raw = stack.raw("POST", f"/v1beta/models/{MODEL}:generateContent", body).json()
    strict(types.GenerateContentResponse, raw)
    assert raw["candidates"][0]["content"]["parts"] == [{"functionCall": {"name": "get_time", "args": {}}}]
    auto = {**body, "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}}}
    text = stack.raw("POST", f"/v1beta/models/{MODEL}:generateContent", auto).json()
    assert "text" in text["candidates"][0]["content"]["parts"][0]  # AUTO: text, as before


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_weather"}}])
def test_a_forced_call_comes_back_through_the_adapter(stack: Stack, choice: Any) -> None:
    # Given an item that must call a function (the first, or the one it names)
    request = item({"input": "Weather?", "tools": CHAT_TOOLS, "tool_choice": choice})
    name = "get_time" if choice == "required" else "get_weather"
    # When the adapter completes it, Then the call is its tool_calls, finish_reason tool_calls
    whole = stack.sync().complete(request)
    assert whole.status == "completed" and whole.output is not None
    [call] = whole.output["tool_calls"]
    assert call["type"] == "function" and call["function"] == {"name": name, "arguments": "{}"}
    assert whole.output["finish_reason"] == "tool_calls" and whole.usage.completion_tokens > 0
    # And streamed, the deltas' fragments joined are the call
    events = list(stack.sync().stream(request))
    fragments = [f for e in events if isinstance(e, StreamDelta) for f in e.tool_calls]
    assert fragments[0].name == name and fragments[0].id is not None
    assert {f.index for f in fragments} == {0} and "".join(f.arguments for f in fragments) == "{}"
    end = events[-1]
    assert isinstance(end, StreamEnd) and end.result.output is not None
    assert end.result.output["finish_reason"] == "tool_calls"
    assert [c["function"] for c in end.result.output["tool_calls"]] == [call["function"]]
    assert end.usage == whole.usage


def test_structured_output_is_answered_with_json_valid_under_its_schema(stack: Stack) -> None:
    schema = next(
        p for p in builtin_catalog().workflow_products if p.slug == "document-summary"
    ).output_schema
    fmt = {"type": "json_schema", "json_schema": {"name": "summary", "schema": schema}}
    answer = stack.sync().complete(
        item({"input": "Summarize", "response_format": fmt}, max_output_tokens=4096)
    )
    assert answer.output is not None
    jsonschema.validate(json.loads(answer.output["content"]), schema)
    json_mode = stack.sync().complete(
        item({"input": "Summarize as JSON", "response_format": {"type": "json_object"}})
    )
    assert json_mode.output is not None and json.loads(json_mode.output["content"]) == {}
