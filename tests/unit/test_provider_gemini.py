"""The Gemini adapter without a network: every recorded answer (tests/fixtures/vendors/gemini,
hand-written from the Gemini API reference) replayed through the pure transform, the request
bodies it builds, and the client over an in-memory transport."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from batchroute.domain import tokens
from batchroute.providers.base import (
    PermanentProviderError,
    ProviderRequest,
    ProviderUnavailable,
    StreamDelta,
    StreamEnd,
    StreamStart,
    TransientProviderError,
    UnknownJob,
    Usage,
)
from batchroute.providers.endpoints import ProviderEndpoint
from batchroute.providers.gemini import DEFAULT_BASE_URL, make_batch, make_sync, transform
from batchroute.providers.gemini.client import GeminiBatches, GeminiModels
from batchroute.providers.http import VendorHttp

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures/vendors/gemini"
MODEL = "gemini-2.0-flash-001"


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def request(
    payload: Mapping[str, Any],
    *,
    operation: str = "responses",
    custom_id: str = "seq-0",
    model: str = MODEL,
    max_output_tokens: int = 256,
) -> ProviderRequest:
    return ProviderRequest(
        custom_id=custom_id,
        customer_item_id=f"item-{custom_id}",
        operation=operation,  # type: ignore[arg-type]
        model="gemini-2.0-flash",
        provider_model_id=model,
        input=payload,
        max_output_tokens=max_output_tokens,
    )


# -- answers ---------------------------------------------------------------------------------
def test_every_fixture_is_replayed_here() -> None:
    replayed = {
        "generate_text",
        "generate_max_tokens",
        "generate_function_call",
        "generate_prompt_blocked",
        "generate_safety_finish",
        "stream_chunks",
        "embed_content",
        "batch_embed_contents",
        "batch_created",
        "batch_running",
        "batch_succeeded",
        "batch_expired",
        "batch_cancelled",
        "batch_failed",
        "error_429",
        "error_400",
        "error_400_api_key",
        "error_400_location",
        "error_503",
        "error_404_batch",
        "models_list",
    }
    assert {p.stem for p in FIXTURES.glob("*.json")} == replayed


def test_text_answer() -> None:
    body = fixture("generate_text")
    result = transform.generate_result("seq-0", body)
    assert result.status == "completed"
    assert result.output == {
        "type": "message",
        "role": "assistant",
        "content": "The capital of France is Paris.",
        "finish_reason": "stop",
    }
    assert result.usage == Usage(12, 8)
    assert result.raw == body


def test_max_tokens_is_length_and_thoughts_are_output_not_text() -> None:
    result = transform.generate_result("seq-0", fixture("generate_max_tokens"))
    assert result.output is not None
    assert result.output["finish_reason"] == "length"
    assert result.output["content"] == "Batch processing trades latency for cost: jobs are queued and"
    assert result.usage == Usage(25, 16 + 48)  # thinking tokens are billed as output


def test_function_calls_become_tool_calls() -> None:
    result = transform.generate_result("seq-0", fixture("generate_function_call"))
    assert result.output is not None
    assert result.output["content"] == ""
    assert result.output["tool_calls"] == [
        {
            "id": "call_0",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris","unit":"celsius"}'},
            "extra_content": {"google": {"thought_signature": "CiQB0e2Kb7fXcJxk3Q=="}},
        },
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_time", "arguments": '{"timezone":"Europe/Paris"}'},
        },
    ]
    assert result.usage == Usage(61 + 18, 22)  # tool-use prompt tokens are input


@pytest.mark.parametrize(
    ("name", "says"), [("generate_prompt_blocked", "prompt (SAFETY)"), ("generate_safety_finish", "(SAFETY)")]
)
def test_blocked_answers_fail_for_good(name: str, says: str) -> None:
    body = fixture(name)
    result = transform.generate_result("seq-0", body)
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.code == "content_blocked"
    assert says in result.error.message
    assert not result.transient_failure
    assert result.raw == body


def test_no_candidate_is_a_transient_failure() -> None:
    result = transform.generate_result("seq-0", {"candidates": [], "modelVersion": MODEL})
    assert result.transient_failure


def test_stream_chunks_accumulate() -> None:
    acc = transform.StreamAccumulator("seq-0")
    deltas = [acc.add(chunk) for chunk in fixture("stream_chunks")]
    assert deltas == ["Batch", " jobs run at half", " price", " on Gemini."]
    assert acc.finished
    result = acc.result()
    assert result.output is not None
    assert result.output["content"] == "Batch jobs run at half price on Gemini."
    assert result.output["finish_reason"] == "stop"
    assert result.usage == Usage(9, 11)  # from the last chunk
    assert result.raw is not None
    assert result.raw["responseId"] == "j9MVaNGcL8ybz7IPlNSL8Qw"
    assert result.raw["candidates"][0]["content"]["parts"] == [
        {"text": "Batch jobs run at half price on Gemini."}
    ]


def test_stream_without_finish_is_not_finished() -> None:
    acc = transform.StreamAccumulator("seq-0")
    acc.add(fixture("stream_chunks")[0])
    assert not acc.finished


def test_stream_blocked_chunk_raises() -> None:
    acc = transform.StreamAccumulator("seq-0")
    with pytest.raises(PermanentProviderError) as raised:
        acc.add(fixture("generate_prompt_blocked"))
    assert raised.value.code == "content_blocked"


def test_stream_error_event_raises_mapped() -> None:
    acc = transform.StreamAccumulator("seq-0")
    with pytest.raises(TransientProviderError) as raised:
        acc.add(fixture("error_503"))
    assert raised.value.code == "overloaded"


def test_stream_function_calls_reach_the_result() -> None:
    acc = transform.StreamAccumulator("seq-0")
    acc.add(fixture("generate_function_call"))
    result = acc.result()
    assert result.output is not None
    assert [c["function"]["name"] for c in result.output["tool_calls"]] == ["get_weather", "get_time"]


def test_embed_content_single() -> None:
    body = fixture("embed_content")
    result = transform.embeddings_result("seq-0", ["hello world"], [body], single=True)
    assert result.output == {"type": "embedding", "dimensions": 8, "embedding": body["embedding"]["values"]}
    assert result.raw == body
    # Gemini reports no usage for embeddings: the quote's estimate stands in.
    assert result.usage == Usage(tokens.prompt_tokens(text_bytes=11, messages=0, images=0), 0)


def test_batch_embed_contents_many_in_order() -> None:
    body = fixture("batch_embed_contents")
    result = transform.embeddings_result("seq-0", ["a", "bb"], [body], single=False)
    assert result.output is not None
    assert result.output["embeddings"] == [e["values"] for e in body["embeddings"]]
    assert result.output["dimensions"] == 4
    assert result.raw == body
    assert result.usage == Usage(tokens.prompt_tokens(text_bytes=3, messages=0, images=0), 0)


def test_embeddings_usage_reported_wins() -> None:
    body = {**fixture("embed_content"), "usageMetadata": {"promptTokenCount": 4}}
    assert transform.embeddings_result("seq-0", ["x"], [body], single=True).usage == Usage(4, 0)


def test_embeddings_count_mismatch_is_transient() -> None:
    result = transform.embeddings_result(
        "seq-0", ["a", "b", "c"], [fixture("batch_embed_contents")], single=False
    )
    assert result.transient_failure


@pytest.mark.parametrize(
    ("name", "state", "total", "done", "failed"),
    [
        ("batch_created", "validating", 3, 0, 0),
        ("batch_running", "in_progress", 3, 1, 0),
        ("batch_succeeded", "completed", 4, 2, 2),
        ("batch_expired", "expired", 3, 1, 0),
        ("batch_cancelled", "cancelled", 3, 0, 0),
        ("batch_failed", "failed", 3, 0, 3),
    ],
)
def test_job_states(name: str, state: str, total: int, done: int, failed: int) -> None:
    status = transform.job_status(fixture(name))
    assert (status.state, status.total, status.completed_count, status.failed_count) == (
        state,
        total,
        done,
        failed,
    )


@pytest.mark.parametrize(
    ("wire", "ours"),
    [
        ("BATCH_STATE_PENDING", "validating"),
        ("JOB_STATE_RUNNING", "in_progress"),
        ("JOB_STATE_SUCCEEDED", "completed"),
        ("BATCH_STATE_UNSPECIFIED", "in_progress"),
        (None, "in_progress"),
    ],
)
def test_job_state_names(wire: str | None, ours: str) -> None:
    assert transform.job_state(wire) == ours


def test_succeeded_job_results_by_key() -> None:
    results = {r.custom_id: r for r in transform.job_results(fixture("batch_succeeded"))}
    assert set(results) == {"seq-0", "seq-1", "seq-2", "seq-3"}
    assert results["seq-0"].status == "completed"
    assert results["seq-0"].output is not None
    assert results["seq-0"].output["content"] == "Paris."
    assert results["seq-0"].usage == Usage(10, 2)
    assert results["seq-1"].error is not None
    assert (results["seq-1"].error.code, results["seq-1"].error.transient) == ("provider_rejected", False)
    assert results["seq-2"].error is not None
    assert results["seq-2"].error.code == "content_blocked"
    assert results["seq-3"].error is not None
    assert (results["seq-3"].error.code, results["seq-3"].error.transient) == ("provider_5xx", True)
    assert results["seq-1"].raw == {"error": {"code": 3, "message": "Request contains an invalid argument."}}


def test_expired_job_has_the_finished_results_only() -> None:
    assert [r.custom_id for r in transform.job_results(fixture("batch_expired"))] == ["seq-0"]


def test_results_read_from_the_operation_response_too() -> None:
    operation = fixture("batch_succeeded")
    del operation["metadata"]["output"]
    assert len(list(transform.job_results(operation))) == 4


def test_cancelled_job_and_keyless_responses_give_nothing() -> None:
    assert list(transform.job_results(fixture("batch_cancelled"))) == []
    assert transform.inlined_result({"response": fixture("generate_text")}) is None


# -- errors ----------------------------------------------------------------------------------
def status_error(name: str, headers: Mapping[str, str] | None = None) -> Exception:
    body = fixture(name)
    return transform.status_error(body["error"]["code"], headers or {}, json.dumps(body), vendor="google")


def test_429_waits_as_retry_info_says() -> None:
    error = status_error("error_429", {"retry-after": "5"})
    assert isinstance(error, TransientProviderError)
    assert error.code == "rate_limited"
    assert error.retry_after_seconds == 34.0  # google.rpc.RetryInfo wins over the header
    assert "exceeded your current quota" in error.message


def test_429_without_retry_info_uses_the_header() -> None:
    body = json.dumps(
        {"error": {"code": 429, "message": "Resource exhausted.", "status": "RESOURCE_EXHAUSTED"}}
    )
    error = transform.status_error(429, {"retry-after": "2"}, body, vendor="google")
    assert isinstance(error, TransientProviderError)
    assert error.retry_after_seconds == 2.0


def test_400_is_permanent() -> None:
    error = status_error("error_400")
    assert isinstance(error, PermanentProviderError)
    assert error.code == "provider_rejected"


@pytest.mark.parametrize(
    ("name", "code"),
    [("error_400_api_key", "provider_auth_failed"), ("error_400_location", "provider_precondition_failed")],
)
def test_lane_wide_400s_make_the_lane_unavailable(name: str, code: str) -> None:
    error = status_error(name)
    assert isinstance(error, ProviderUnavailable)
    assert error.code == code


def test_503_overloaded_is_transient() -> None:
    error = status_error("error_503")
    assert isinstance(error, TransientProviderError)
    assert error.code == "overloaded"


def test_404_is_not_found() -> None:
    error = status_error("error_404_batch")
    assert isinstance(error, PermanentProviderError)
    assert error.code == "not_found"


def test_deadline_exceeded_is_a_timeout() -> None:
    body = json.dumps({"error": {"code": 504, "message": "Deadline expired.", "status": "DEADLINE_EXCEEDED"}})
    error = transform.status_error(504, {}, body, vendor="google")
    assert isinstance(error, TransientProviderError)
    assert error.code == "provider_timeout"


# -- requests --------------------------------------------------------------------------------
def test_plain_prompt() -> None:
    body = transform.generate_body(request({"input": "Hello"}, max_output_tokens=64))
    assert body == {
        "contents": [{"role": "user", "parts": [{"text": "Hello"}]}],
        "generationConfig": {"maxOutputTokens": 64},
    }


def test_system_text_goes_to_system_instruction() -> None:
    body = transform.generate_body(
        request(
            {
                "system": "Be brief.",
                "messages": [
                    {"role": "system", "content": "Answer in French."},
                    {"role": "user", "content": "Capital of France?"},
                    {"role": "assistant", "content": "Paris."},
                    {"role": "user", "content": "And Spain?"},
                ],
            }
        )
    )
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief.\n\nAnswer in French."}]}
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "Capital of France?"}]},
        {"role": "model", "parts": [{"text": "Paris."}]},
        {"role": "user", "parts": [{"text": "And Spain?"}]},
    ]


def test_images_inline_or_by_uri() -> None:
    body = transform.generate_body(
        request(
            {
                "input": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "input_text", "text": "Compare these."},
                            {"type": "input_image", "image_url": "data:image/jpeg;base64,/9j/4AAQSkZJRg=="},
                            {"type": "input_image", "image_url": "https://example.com/b.png?size=large"},
                            {"type": "input_image", "image_url": "https://example.com/render"},
                        ],
                    }
                ]
            },
            operation="vision",
        )
    )
    assert body["contents"][0]["parts"] == [
        {"text": "Compare these."},
        {"inlineData": {"mimeType": "image/jpeg", "data": "/9j/4AAQSkZJRg=="}},
        {"fileData": {"fileUri": "https://example.com/b.png?size=large", "mimeType": "image/png"}},
        {"fileData": {"fileUri": "https://example.com/render"}},
    ]


def test_tool_turns_hand_back_the_calls_gemini_made() -> None:
    answered = transform.generate_result("seq-0", fixture("generate_function_call")).output
    assert answered is not None
    messages = [
        {"role": "user", "content": "Weather and time in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": answered["tool_calls"]},
        {"role": "tool", "tool_call_id": "call_0", "content": '{"celsius": 18}'},
        {"role": "tool", "tool_call_id": "call_1", "content": "09:30"},
    ]
    body = transform.generate_body(request({"messages": messages}))
    made = fixture("generate_function_call")["candidates"][0]["content"]["parts"]
    for ident, part in zip(("call_0", "call_1"), made, strict=True):
        part["functionCall"]["id"] = ident  # ours, as the answer named them
    assert body["contents"][1:] == [
        {"role": "model", "parts": made},  # the thought signature goes back as it came
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"celsius": 18}, "id": "call_0"}},
                {"functionResponse": {"name": "get_time", "response": {"output": "09:30"}, "id": "call_1"}},
            ],
        },
    ]


def test_bad_tool_arguments_are_refused() -> None:
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{not json"}}
    payload = {"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [call]}]}
    with pytest.raises(PermanentProviderError):
        transform.generate_body(request(payload))


def test_generation_options() -> None:
    body = transform.generate_body(
        request(
            {"input": "x", "temperature": 0.3, "top_p": 0.9, "stop": "END", "seed": 7}, max_output_tokens=10
        )
    )
    assert body["generationConfig"] == {
        "maxOutputTokens": 10,
        "temperature": 0.3,
        "topP": 0.9,
        "stopSequences": ["END"],
        "seed": 7,
    }
    listed = transform.generate_body(request({"input": "x", "stop": ["a", "b"]}, max_output_tokens=0))
    assert listed["generationConfig"] == {"stopSequences": ["a", "b"]}
    odd = transform.generate_body(request({"input": "x", "stop": 5}, max_output_tokens=0))
    assert "generationConfig" not in odd


SIMPLE_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "A city"},
        "population": {"type": ["integer", "null"]},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 3},
        "kind": {"const": "town"},
        "when": {"type": "string", "format": "date-time"},
    },
    "required": ["city"],
    "additionalProperties": False,
    "$schema": "http://json-schema.org/draft-07/schema#",
}


def test_structured_output_in_gemini_schema() -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "city", "schema": SIMPLE_SCHEMA, "strict": True}}
    config = transform.generate_body(request({"input": "x", "response_format": fmt}))["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseSchema"] == {
        "type": "OBJECT",
        "properties": {
            "city": {"type": "STRING", "description": "A city"},
            "population": {"type": "INTEGER", "nullable": True},
            "tags": {"type": "ARRAY", "items": {"type": "STRING", "enum": ["a", "b"]}, "maxItems": 3},
            "kind": {"enum": ["town"]},
            "when": {"type": "STRING", "format": "date-time"},
        },
        "required": ["city"],
    }
    assert "responseJsonSchema" not in config


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/b"}}, "$defs": {"b": {"type": "string"}}},
        {"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}},
        {"type": ["string", "integer"]},
        {"type": "integer", "enum": [1, 2]},
        {"type": "string", "format": "email"},
        {"type": "object", "additionalProperties": {"type": "string"}},
    ],
)
def test_structured_output_beyond_the_subset_goes_as_json_schema(schema: dict[str, Any]) -> None:
    payload = {"input": "x", "text": {"format": {"type": "json_schema", "name": "s", "schema": schema}}}
    config = transform.generate_body(request(payload))["generationConfig"]
    assert config["responseJsonSchema"] == schema
    assert "responseSchema" not in config


def test_json_object_is_json_mime_only() -> None:
    config = transform.generate_body(request({"input": "x", "response_format": {"type": "json_object"}}))[
        "generationConfig"
    ]
    assert config == {"maxOutputTokens": 256, "responseMimeType": "application/json"}


def test_tools_and_tool_choice() -> None:
    tools = [
        {
            "type": "function",
            "function": {"name": "lookup", "description": "Find", "parameters": SIMPLE_SCHEMA},
        },
        {"type": "function", "name": "flat", "parameters": {"type": "object", "properties": {}}},
        {"type": "function", "function": {"name": "bare"}},
        {"type": "function", "name": "refs", "parameters": {"$ref": "#/x"}},
        {"type": "web_search_preview"},
        {"type": "code_interpreter", "container": {"type": "auto"}},
    ]
    body = transform.generate_body(request({"input": "x", "tools": tools, "tool_choice": "required"}))
    declarations = body["tools"][0]["functionDeclarations"]
    assert [d["name"] for d in declarations] == ["lookup", "flat", "bare", "refs"]
    assert declarations[0]["description"] == "Find"
    assert declarations[0]["parameters"]["type"] == "OBJECT"
    assert "parameters" not in declarations[1]  # no arguments: Gemini's OBJECT names properties
    assert "parameters" not in declarations[2]
    assert declarations[3]["parametersJsonSchema"] == {"$ref": "#/x"}
    assert body["tools"][1:] == [{"googleSearch": {}}, {"codeExecution": {}}]
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}


@pytest.mark.parametrize(
    ("choice", "config"),
    [
        ("auto", {"mode": "AUTO"}),
        ("none", {"mode": "NONE"}),
        ({"type": "function", "function": {"name": "f"}}, {"mode": "ANY", "allowedFunctionNames": ["f"]}),
        ({"type": "function", "name": "f"}, {"mode": "ANY", "allowedFunctionNames": ["f"]}),
        ({"type": "auto"}, {"mode": "AUTO"}),
    ],
)
def test_tool_choice(choice: object, config: dict[str, Any]) -> None:
    tools = [{"type": "function", "function": {"name": "f"}}]
    body = transform.generate_body(request({"input": "x", "tools": tools, "tool_choice": choice}))
    assert body["toolConfig"] == {"functionCallingConfig": config}


def test_unknown_tool_is_refused() -> None:
    with pytest.raises(PermanentProviderError) as raised:
        transform.generate_body(request({"input": "x", "tools": [{"type": "file_search"}]}))
    assert raised.value.code == "tool_not_supported"


def test_no_message_is_refused() -> None:
    with pytest.raises(PermanentProviderError) as raised:
        transform.generate_body(request({"messages": [{"role": "system", "content": "only a system"}]}))
    assert raised.value.code == "invalid_item"


def test_embedding_bodies() -> None:
    one = request({"input": "hello", "dimensions": 8}, operation="embeddings", model="text-embedding-004")
    texts, single = transform.embed_inputs(one)
    assert (texts, single) == (["hello"], True)
    assert transform.embed_body(one, "hello") == {
        "model": "models/text-embedding-004",
        "content": {"parts": [{"text": "hello"}]},
        "outputDimensionality": 8,
    }
    many = request({"input": [f"t{i}" for i in range(250)]}, operation="embeddings")
    texts, single = transform.embed_inputs(many)
    bodies = transform.batch_embed_bodies(many, texts)
    assert not single
    assert [len(b["requests"]) for b in bodies] == [100, 100, 50]
    assert bodies[2]["requests"][-1]["content"] == {"parts": [{"text": "t249"}]}


@pytest.mark.parametrize("value", [[1, 2, 3], [], None, 7])
def test_embeddings_of_anything_but_text_are_refused(value: object) -> None:
    with pytest.raises(PermanentProviderError):
        transform.embed_inputs(request({"input": value}, operation="embeddings"))


def test_batch_body() -> None:
    body = transform.batch_body([request({"input": "a"}), request({"input": "b"}, custom_id="seq-1")])
    inlined = body["batch"]["inputConfig"]["requests"]["requests"]
    assert body["batch"]["displayName"] == "batchroute 2 requests"
    assert [r["metadata"] for r in inlined] == [{"key": "seq-0"}, {"key": "seq-1"}]
    assert inlined[1]["request"]["contents"] == [{"role": "user", "parts": [{"text": "b"}]}]
    with pytest.raises(PermanentProviderError):
        transform.batch_body([request({"input": "a"}, operation="embeddings")])


def test_batch_body_over_the_inline_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transform, "MAX_INLINE_BYTES", 500)
    transform.batch_body([request({"input": "x" * 100})])
    with pytest.raises(PermanentProviderError) as raised:
        transform.batch_body([request({"input": "x" * 100}, custom_id=f"seq-{i}") for i in range(5)])
    assert raised.value.code == "batch_too_large"


def test_names_and_paths() -> None:
    assert transform.model_path(MODEL, "generateContent") == f"/v1beta/models/{MODEL}:generateContent"
    assert transform.model_name("models/x") == "models/x"
    assert transform.model_name("tunedModels/mine") == "tunedModels/mine"
    assert transform.batch_name("batches/abc-1") == "batches/abc-1"
    assert transform.batch_name("abc") == "batches/abc"
    assert transform.batch_name("batches/../models") is None


# -- the client, over an in-memory transport ---------------------------------------------------
Route = Callable[[httpx.Request], httpx.Response]


def http(route: Route) -> VendorHttp:
    return VendorHttp(
        "https://gemini.test",
        vendor="google",
        headers={"x-goog-api-key": "k"},
        transport=httpx.MockTransport(route),
        status_errors=transform.status_error,
    )


def test_make_sync_and_batch() -> None:
    endpoint = ProviderEndpoint("google", "gemini")
    sync, batch = make_sync(endpoint, "secret"), make_batch(endpoint, None)
    assert isinstance(sync, GeminiModels)
    assert isinstance(batch, GeminiBatches)
    assert sync.http.base_url.rstrip("/") == DEFAULT_BASE_URL
    assert sync.slug == batch.slug == "google"


def test_complete_posts_generate_content_with_the_key() -> None:
    seen: list[httpx.Request] = []

    def route(sent: httpx.Request) -> httpx.Response:
        seen.append(sent)
        return httpx.Response(200, json=fixture("generate_text"))

    result = GeminiModels("google", http(route)).complete(request({"input": "Capital of France?"}))
    assert result.usage == Usage(12, 8)
    assert seen[0].url.path == f"/v1beta/models/{MODEL}:generateContent"
    assert seen[0].headers["x-goog-api-key"] == "k"
    assert "key" not in seen[0].url.params


def test_many_embeddings_go_in_calls_of_a_hundred() -> None:
    sizes: list[int] = []

    def route(sent: httpx.Request) -> httpx.Response:
        count = len(json.loads(sent.content)["requests"])
        sizes.append(count)
        return httpx.Response(200, json={"embeddings": [{"values": [0.1, 0.2]}] * count})

    many = request({"input": ["x"] * 150}, operation="embeddings")
    result = GeminiModels("google", http(route)).complete(many)
    assert sizes == [100, 50]
    assert result.output is not None
    assert len(result.output["embeddings"]) == 150


def sse_route(chunks: list[dict[str, Any]]) -> Route:
    def route(sent: httpx.Request) -> httpx.Response:
        assert sent.url.params["alt"] == "sse"
        body = b"".join(b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks)
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    return route


def test_stream_events() -> None:
    events = list(
        GeminiModels("google", http(sse_route(fixture("stream_chunks")))).stream(request({"input": "x"}))
    )
    assert isinstance(events[0], StreamStart)
    assert [e.text for e in events if isinstance(e, StreamDelta)] == [
        "Batch",
        " jobs run at half",
        " price",
        " on Gemini.",
    ]
    assert isinstance(events[-1], StreamEnd)
    assert events[-1].usage == Usage(9, 11)


def test_stream_closed_before_its_finish_is_interrupted() -> None:
    stream = GeminiModels("google", http(sse_route(fixture("stream_chunks")[:2]))).stream(
        request({"input": "x"})
    )
    with pytest.raises(TransientProviderError) as raised:
        list(stream)
    assert raised.value.code == "stream_interrupted"


def test_batch_poll_of_an_unknown_job() -> None:
    def route(sent: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json=fixture("error_404_batch"))

    batches = GeminiBatches("google", http(route))
    with pytest.raises(UnknownJob):
        batches.poll("batches/doesnotexist")
    with pytest.raises(UnknownJob):
        batches.poll("batches/../../models")


def test_batch_cancel_of_a_finished_job_is_quiet() -> None:
    def route(sent: httpx.Request) -> httpx.Response:
        assert sent.url.path == "/v1beta/batches/abc:cancel"
        body = {"error": {"code": 400, "message": "already finished", "status": "FAILED_PRECONDITION"}}
        return httpx.Response(400, json=body)

    GeminiBatches("google", http(route)).cancel("batches/abc")


def test_batch_results_then_delete() -> None:
    calls: list[tuple[str, str]] = []

    def route(sent: httpx.Request) -> httpx.Response:
        calls.append((sent.method, sent.url.path))
        if sent.method == "DELETE":
            return httpx.Response(500, json={"error": {"code": 500, "message": "x", "status": "INTERNAL"}})
        return httpx.Response(200, json=fixture("batch_succeeded"))

    results = list(GeminiBatches("google", http(route)).results("batches/f3l9kq2mz8x0y7vw6u5t"))
    assert len(results) == 4
    assert calls == [
        ("GET", "/v1beta/batches/f3l9kq2mz8x0y7vw6u5t"),
        ("DELETE", "/v1beta/batches/f3l9kq2mz8x0y7vw6u5t"),  # a failed delete is not the caller's
    ]


def test_batch_submit_one_model() -> None:
    def route(sent: httpx.Request) -> httpx.Response:
        assert sent.url.path == f"/v1beta/models/{MODEL}:batchGenerateContent"
        return httpx.Response(200, json=fixture("batch_created"))

    batches = GeminiBatches("google", http(route))
    assert batches.submit([request({"input": "a"})]) == "batches/f3l9kq2mz8x0y7vw6u5t"
    with pytest.raises(PermanentProviderError):
        batches.submit([request({"input": "a"}), request({"input": "b"}, model="gemini-2.5-flash")])
    with pytest.raises(PermanentProviderError):
        batches.submit([])


def test_check_lists_model_ids() -> None:
    def route(sent: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=fixture("models_list"))

    assert GeminiModels("google", http(route)).check() == [MODEL, "text-embedding-004"]
