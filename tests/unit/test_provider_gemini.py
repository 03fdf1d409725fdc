"""The Gemini adapter without a network: every recorded answer (tests/fixtures/vendors/gemini,
hand-written from the Gemini API reference) replayed through the pure transform, the request
bodies it builds, and the client over an in-memory transport."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from batchroute.domain.catalog import tokens
from batchroute.domain.routing.images import gemini_takes_image
from batchroute.providers.base import (
    ItemError,
    PermanentProviderError,
    ProviderRequest,
    ProviderResult,
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
from batchroute_tools.contracts import gemini as contract

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
        "generate_grounded_code",
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
    body = fixture("generate_function_call")
    result = transform.generate_result("seq-0", body)
    assert result.output is not None
    assert result.output["content"] == ""
    # Gemini gave the calls no id: ours name the response and the call's place in it
    first, second = (f"call_{body['responseId']}_{n}" for n in range(2))
    assert result.output["tool_calls"] == [
        {
            "id": first,
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris","unit":"celsius"}'},
            "extra_content": {"google": {"thought_signature": "CiQB0e2Kb7fXcJxk3Q=="}},
        },
        {
            "id": second,
            "type": "function",
            "function": {"name": "get_time", "arguments": '{"timezone":"Europe/Paris"}'},
        },
    ]
    assert result.usage == Usage(61 + 18, 22)  # tool-use prompt tokens are input


def test_tool_call_ids_differ_from_one_answer_to_the_next() -> None:
    # Given two answers (two turns of a tool loop) whose calls Gemini gave no id
    body = fixture("generate_function_call")
    later = {**body, "responseId": "another-response"}
    ids = [
        [call["id"] for call in (transform.generate_result("seq-0", b).output or {})["tool_calls"]]
        for b in (body, later)
    ]
    # Then no id repeats across them (a client keys its tool answers by id)
    assert len({*ids[0], *ids[1]}) == 4


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


@pytest.mark.parametrize(
    "finish", ["MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS", "MALFORMED_RESPONSE"]
)
def test_an_answer_the_model_could_not_form_is_a_transient_failure_not_a_billed_answer(finish: str) -> None:
    # Given Gemini's answer that stops on a call it could not write (no parts, a prompt billed)
    body = {
        "candidates": [{"finishReason": finish, "index": 0}],
        "usageMetadata": {"promptTokenCount": 2595, "totalTokenCount": 2595},
        "modelVersion": MODEL,
    }
    # Then the item fails, to be tried again (or failed over), with nothing to charge
    for result in (transform.generate_result("seq-0", body), _streamed(body)):
        assert result.status == "failed" and result.transient_failure
        assert result.error is not None and result.error.code == "model_output_malformed"
        assert finish in result.error.message and result.usage == Usage(0, 0)


def _streamed(body: dict[str, Any]) -> ProviderResult:
    acc = transform.StreamAccumulator("seq-0")
    acc.add(body)
    assert acc.finished
    return acc.result()


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


def test_a_failed_batch_says_why_on_its_status() -> None:
    # The operation's google.rpc.Status reaches every item of the job and the receipt
    assert transform.job_status(fixture("batch_failed")).errors == (
        ItemError(code="provider_rejected", message="Batch processing failed. (code 13)"),
    )
    assert transform.job_status(fixture("batch_succeeded")).errors == ()


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
                            {"type": "input_image", "image_url": "https://example.com/c.HEIC#top"},
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
        {"fileData": {"fileUri": "https://example.com/c.HEIC#top", "mimeType": "image/heic"}},
    ]


@pytest.mark.parametrize(
    ("url", "code"),
    [
        # the URL tells no type: Gemini requires fileData.mimeType, and nothing here can say it
        ("https://example.com/render?id=3", "unsupported_image_source"),
        ("https://example.com/images/", "unsupported_image_source"),
        ("https://example.com/cat.png.php", "unsupported_image_source"),
        # a type Gemini does not take for images (png, jpeg, webp, heic, heif only)
        ("https://example.com/a.gif", "unsupported_image_format"),
        ("data:image/gif;base64,R0lGODlhAQABAAAAACw=", "unsupported_image_format"),
        ("data:image/svg+xml,%3Csvg%3E%3C/svg%3E", "unsupported_image_format"),
    ],
)
def test_an_image_gemini_cannot_be_told_the_type_of_or_does_not_take_is_refused(url: str, code: str) -> None:
    image = {"type": "image_url", "image_url": {"url": url}}
    with pytest.raises(PermanentProviderError) as raised:
        transform.generate_body(request({"messages": [{"role": "user", "content": [image]}]}))
    assert raised.value.code == code


def test_a_data_image_goes_to_gemini_as_the_type_its_bytes_are() -> None:
    gif = "data:image/png;base64," + base64.b64encode(b"GIF89a\x01\x00\x01\x00\x00\x00\x00;").decode()
    png = "data:image/gif;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR").decode()
    # a GIF its URL calls a PNG is no image Gemini takes; a PNG its URL calls a GIF is
    assert not gemini_takes_image(gif) and gemini_takes_image(png)
    with pytest.raises(PermanentProviderError):
        transform._image(gif)
    assert transform._image(png)["inlineData"]["mimeType"] == "image/png"


def test_tool_turns_hand_back_the_calls_gemini_made() -> None:
    answered = transform.generate_result("seq-0", fixture("generate_function_call")).output
    assert answered is not None
    first, second = (call["id"] for call in answered["tool_calls"])
    messages = [
        {"role": "user", "content": "Weather and time in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": answered["tool_calls"]},
        {"role": "tool", "tool_call_id": first, "content": '{"celsius": 18}'},
        {"role": "tool", "tool_call_id": second, "content": "09:30"},
    ]
    body = transform.generate_body(request({"messages": messages}))
    made = fixture("generate_function_call")["candidates"][0]["content"]["parts"]
    for ident, part in zip((first, second), made, strict=True):
        part["functionCall"]["id"] = ident  # ours, as the answer named them
    assert body["contents"][1:] == [
        {"role": "model", "parts": made},  # the thought signature goes back as it came
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"celsius": 18}, "id": first}},
                {"functionResponse": {"name": "get_time", "response": {"output": "09:30"}, "id": second}},
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
    keyed = transform.batch_body([request({"input": "a"})], key="3f9a1c2b7d4e")
    assert keyed["batch"]["displayName"] == "batchroute 3f9a1c2b7d4e"  # a submission's own name
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


def test_a_stream_that_ends_on_a_malformed_finish_raises_instead_of_ending_as_an_answer() -> None:
    # Given a stream whose one chunk is Gemini saying it could not write the call it meant
    chunk = {
        "candidates": [{"finishReason": "MALFORMED_FUNCTION_CALL", "index": 0}],
        "usageMetadata": {"promptTokenCount": 12, "totalTokenCount": 12},
        "modelVersion": MODEL,
    }

    def route(sent: httpx.Request) -> httpx.Response:
        body = f"data: {json.dumps(chunk)}\r\n\r\n".encode()
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    events = GeminiModels("google", http(route)).stream(request({"input": "Weather in Paris?"}))
    # Then the stream starts, and ends in a transient error, not a StreamEnd with no answer
    assert isinstance(next(events), StreamStart)
    with pytest.raises(TransientProviderError) as raised:
        list(events)
    assert raised.value.code == "model_output_malformed"


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


# -- vendor fidelity: the contract, and the transform's bodies against it ----------------------
CALL = {"id": "call_0", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "cats"}'}}
LOOKUP = {"type": "function", "function": {"name": "lookup", "parameters": SIMPLE_SCHEMA}}
VARIED_INPUTS: list[dict[str, Any]] = [
    {"input": "Hello"},
    {
        "system": "Be brief.",
        "instructions": "Answer in French.",
        "messages": [{"role": "user", "content": "Hi"}],
    },
    {
        "messages": [
            {"role": "developer", "content": "Rules."},
            {"role": "user", "content": [{"type": "text", "text": "What is this?"}]},
            {"role": "assistant", "content": "A cat."},
            {"role": "assistant", "content": "Let me look.", "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_0", "content": "[1, 2]"},
            {"role": "user", "content": "Thanks"},
        ],
        "tools": [LOOKUP],  # (no hosted tool beside it: Gemini 2.x refuses the mix)
        "tool_choice": "auto",
    },
    {
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Look"}]},
            {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
            {"type": "function_call", "call_id": "c2", "name": "lookup", "arguments": '{"q": 1}'},
            {"type": "function_call_output", "call_id": "c1", "output": "one"},
            {"type": "function_call_output", "call_id": "c2", "output": '{"two": 2}'},
        ],
        "tools": [{"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}],
        "tool_choice": {"type": "function", "name": "lookup"},
    },
    {
        "input": [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "Compare"},
                    {
                        "type": "input_image",
                        "image_url": "data:image/png;base64,iVBORw0KGgo",
                        "detail": "low",
                    },
                    {"type": "input_image", "image_url": "https://example.com/a.webp"},
                    {"type": "image_url", "image_url": {"url": "data:image/png,%89PNG%0D%0A%1A%0A"}},
                ],
            }
        ]
    },
    {"input": "x", "temperature": 2, "top_p": 0, "seed": -(2**31), "stop": ["a", "b", "c", "d"]},
    {"input": "x", "response_format": {"type": "json_object"}},
    {
        "input": "x",
        "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": SIMPLE_SCHEMA}},
    },
    {"input": "x", "text": {"format": {"type": "json_schema", "name": "o", "schema": {"type": "object"}}}},
    {"input": "x", "text": {"format": {"type": "json_schema", "name": "r", "schema": {"$ref": "#/$defs/a"}}}},
    {
        "input": "x",
        "tools": [
            {
                "type": "function",
                "name": "deep",
                "parameters": {"type": "object", "properties": {"o": {"type": "object"}}},
            },
            {"type": "function", "function": {"name": "bare", "description": "No arguments"}},
        ],
        "tool_choice": "required",
    },
    {
        "input": "x",
        "tools": [
            {"type": "web_search_preview"},
            {"type": "code_interpreter", "container": {"type": "auto"}},
        ],
    },
    {"input": "x", "tools": [{"type": "web_search"}], "tool_choice": "required"},
    {
        "input": "x",
        "tools": [{"type": "code_interpreter"}],
        "tool_choice": {"type": "code_interpreter"},
    },
    {"input": "x", "tools": [LOOKUP, {"type": "web_search"}], "tool_choice": "none"},
]


@pytest.mark.parametrize("payload", VARIED_INPUTS)
@pytest.mark.parametrize("sampling", [True, False])
def test_every_body_the_adapter_sends_fits_the_contract(payload: dict[str, Any], sampling: bool) -> None:
    endpoint = ProviderEndpoint("google", "gemini")
    item = replace(request(payload, max_output_tokens=0), sampling=sampling)
    sent = contract.outgoing(item, endpoint, lane_max_output_tokens=8192)
    assert [operation for operation, _ in sent] == [
        "generateContent",
        "generateContent",
        "batchGenerateContent",
    ]
    for operation, body in sent:
        assert contract.request_violations(operation, body) == []
    assert sent[0][1]["generationConfig"]["maxOutputTokens"] == 8192  # the lane's limit stands in


@pytest.mark.parametrize("value", ["one text", ["a", "b"], [f"t{i}" for i in range(150)]])
def test_every_embedding_body_fits_the_contract(value: object) -> None:
    item = request({"input": value, "dimensions": 8}, operation="embeddings", model="text-embedding-004")
    sent = contract.outgoing(item, ProviderEndpoint("google", "gemini"), lane_max_output_tokens=0)
    assert [op for op, _ in sent] == (
        ["embedContent"] if isinstance(value, str) else ["batchEmbedContents"] * (1 + len(value) // 101)
    )
    for operation, body in sent:
        assert contract.request_violations(operation, body) == []


GOOD = {"contents": [{"role": "user", "parts": [{"text": "x"}]}]}


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({**GOOD, "temperature": 1}, 'Unknown name "temperature" in GenerateContentRequest'),
        ({**GOOD, "generationConfig": {"stopSequences": list("abcdef")}}, "at most 5 stop sequences"),
        ({**GOOD, "generationConfig": {"top_p": 0.5}}, 'Unknown name "top_p"'),
        ({**GOOD, "generationConfig": {"temperature": 2.5}}, "temperature: 2.5 is out of range"),
        ({**GOOD, "generationConfig": {"topP": 1.5}}, "topP: 1.5 is out of range"),
        ({**GOOD, "generationConfig": {"seed": 2**31}}, "seed: 2147483648 is out of range"),
        ({**GOOD, "generationConfig": {"maxOutputTokens": "5"}}, "an integer is required"),
        ({**GOOD, "generationConfig": {"responseSchema": {"type": "STRING"}}}, "needs responseMimeType"),
        ({**GOOD, "generationConfig": {"routingConfig": {}}}, 'Unknown name "routingConfig"'),
        ({**GOOD, "tools": [{"type": "web_search"}]}, 'tools[0].type: Unknown name "type" in Tool'),
        ({**GOOD, "tools": [{"retrieval": {}}]}, "Vertex AI only"),
        ({**GOOD, "tools": [{"functionDeclarations": [{"name": "9x"}]}]}, "is not a function name"),
        (
            {**GOOD, "tools": [{"functionDeclarations": [{"name": "f", "parameters": {"type": "OBJECT"}}]}]},
            "should be non-empty for OBJECT type",
        ),
        (
            {**GOOD, "tools": [{"functionDeclarations": [{"name": "f", "parameters": {"type": "object"}}]}]},
            "'object' is not a Type",
        ),
        ({**GOOD, "toolConfig": {"functionCallingConfig": {"mode": "ANY"}}}, "without function declarations"),
        (
            {
                **GOOD,
                "tools": [{"functionDeclarations": [{"name": "f"}]}],
                "toolConfig": {"functionCallingConfig": {"mode": "AUTO", "allowedFunctionNames": ["f"]}},
            },
            "only with mode ANY",
        ),
        ({"contents": [{"role": "assistant", "parts": [{"text": "x"}]}]}, "please use a valid role"),
        ({"contents": [{"role": "user", "parts": []}]}, "parts must not be empty"),
        ({"contents": [{"role": "user", "parts": [{"text": ""}]}]}, "an empty text parameter"),
        ({"contents": [{"role": "user", "parts": [{"text": "x", "inlineData": {}}]}]}, "exactly one datum"),
        ({"contents": [{"parts": [{"thought_signature": "c2ln"}]}]}, "the REST name is 'thoughtSignature'"),
        ({"contents": [{"parts": [{"inlineData": {"mimeType": "image/png", "data": "%%"}}]}]}, "base64"),
        (
            {"contents": [{"parts": [{"fileData": {"fileUri": "https://e.x/render"}}]}]},
            "mimeType is required",
        ),
        ({"contents": [{"parts": [{"inlineData": {"data": "iVBORw0KGgo="}}]}]}, "mimeType is required"),
        (
            {
                "contents": [
                    {"parts": [{"fileData": {"fileUri": "https://e.x/a.gif", "mimeType": "image/gif"}}]}
                ]
            },
            "Unsupported MIME type: image/gif",
        ),
        (
            {"contents": [{"parts": [{"inlineData": {"mimeType": "png", "data": "iVBORw0KGgo="}}]}]},
            "is not a MIME type",
        ),
        ({"contents": [{"parts": [{"text": None}]}]}, "null is not a value here"),
        ({"contents": []}, "contents is not specified"),
        (
            {"contents": [{"role": "model", "parts": [{"functionCall": {"name": "f"}}]}]},
            "a function call turn comes immediately after a user turn",
        ),
        (
            {
                "contents": [
                    {"role": "user", "parts": [{"text": "x"}]},
                    {
                        "role": "model",
                        "parts": [{"functionCall": {"name": "f"}}, {"functionCall": {"name": "g"}}],
                    },
                    {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {}}}]},
                ]
            },
            "1 function response parts answer 2 function call parts",
        ),
        (
            {**GOOD, "safetySettings": [{"category": "HARM_CATEGORY_NOPE", "threshold": "OFF"}]},
            "not a HarmCategory",
        ),
    ],
)
def test_the_contract_refuses_what_google_refuses(body: dict[str, Any], says: str) -> None:
    found = contract.request_violations("generateContent", body)
    assert any(says in v for v in found), found


def test_the_contract_of_embeddings_and_batches() -> None:
    one = {"content": {"parts": [{"text": "x"}]}}
    assert contract.request_violations("embedContent", one) == []
    assert contract.request_violations("embedContent", {**one, "dimensions": 8}) != []
    assert contract.request_violations("embedContent", {**one, "title": "t"}) != []  # RETRIEVAL_DOCUMENT only
    many = {"requests": [{"model": "models/e", **one}] * 101}
    assert any("at most 100" in v for v in contract.request_violations("batchEmbedContents", many))
    assert contract.request_violations("batchEmbedContents", {"requests": [one]}) != []  # model required
    inlined = {"requests": {"requests": [{"request": GOOD, "metadata": {"key": "a"}}]}}
    assert contract.request_violations("batchGenerateContent", {"batch": {"inputConfig": inlined}}) == []
    bad = {"requests": {"requests": [{"request": {**GOOD, "stop": ["x"]}, "metadata": {"key": "a"}}]}}
    found = contract.request_violations("batchGenerateContent", {"batch": {"inputConfig": bad}})
    assert found == [
        'batch.inputConfig.requests.requests[0].request.stop: Unknown name "stop" in GenerateContentRequest: '
        "Cannot find field"
    ]
    assert contract.request_violations("chat", GOOD) != []
    free = {"responseMimeType": "application/json", "responseSchema": {"type": "STRING", "default": None}}
    assert contract.request_violations("generateContent", {**GOOD, "generationConfig": free}) == []


def test_sampling_left_out_where_the_model_takes_none() -> None:
    payload = {"input": "x", "temperature": 0.3, "top_p": 0.9, "seed": 1}
    body = transform.generate_body(replace(request(payload, max_output_tokens=0), sampling=False))
    assert body["generationConfig"] == {"seed": 1}


@pytest.mark.parametrize(
    ("tools", "choice", "sent_tools", "config"),
    [
        # a hosted tool cannot be forced: declared, and no function is called instead
        ([LOOKUP, {"type": "web_search"}], {"type": "web_search"}, ["fn", "googleSearch"], {"mode": "NONE"}),
        ([{"type": "code_interpreter"}], {"type": "code_interpreter"}, ["codeExecution"], None),
        ([], {"type": "web_search_preview"}, ["googleSearch"], None),
        # `required` with only hosted tools: Gemini cannot force them, the model is free
        ([{"type": "web_search"}], "required", ["googleSearch"], None),
        # `none`: the functions are kept from being called, the hosted tools left out
        ([LOOKUP, {"type": "web_search"}], "none", ["fn"], {"mode": "NONE"}),
        ([{"type": "code_interpreter"}], "none", [], None),
    ],
)
def test_hosted_tool_choices_translated(
    tools: list[Any], choice: object, sent_tools: list[str], config: dict[str, Any] | None
) -> None:
    body = transform.generate_body(request({"input": "x", "tools": tools, "tool_choice": choice}))
    kinds = ["fn" if "functionDeclarations" in t else next(iter(t)) for t in body.get("tools", [])]
    assert kinds == sent_tools
    assert body.get("toolConfig") == ({"functionCallingConfig": config} if config else None)


@pytest.mark.parametrize(
    ("payload", "code", "says"),
    [
        ({"messages": [{"role": "user", "content": "x", "name": "ann"}]}, "unsupported_parameter", "name"),
        (
            {
                "messages": [
                    {"role": "assistant", "tool_calls": [CALL]},
                    {"role": "tool", "tool_call_id": "call_0", "content": "r"},
                ]
            },
            "unsupported_parameter",
            "user turn before",
        ),
        (
            {"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [CALL]}]},
            "invalid_item",
            "call_0",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": "x"},
                    {"role": "tool", "tool_call_id": "c9", "content": "r"},
                ]
            },
            "invalid_item",
            "answer the tool calls",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": "x"},
                    {
                        "role": "assistant",
                        "tool_calls": [{**CALL, "function": {"name": "f", "arguments": "[1]"}}],
                    },
                ]
            },
            "invalid_item",
            "not a JSON object",
        ),
        ({"input": "x", "seed": 2**31}, "unsupported_parameter", "32-bit"),
        (
            {"input": "x", "tools": [{"type": "function", "name": "f"}], "parallel_tool_calls": False},
            "unsupported_parameter",
            "parallel_tool_calls",
        ),
        ({"input": "x", "tools": [{"type": "function", "name": "1st"}]}, "unsupported_parameter", "'1st'"),
        (
            {"input": "x", "tools": [{"type": "file_search", "vector_store_ids": ["v"]}]},
            "tool_not_supported",
            "file_search",
        ),
        (
            {"input": "x", "tools": [{"type": "code_interpreter", "container": {"type": "x"}}]},
            "unsupported_parameter",
            "container",
        ),
        (
            {
                "input": [
                    {
                        "role": "user",
                        "content": [{"type": "input_image", "image_url": "data:image/png;base64,%%%"}],
                    }
                ]
            },
            "invalid_item",
            "not base64",
        ),
    ],
)
def test_what_gemini_cannot_take_is_refused_not_dropped(
    payload: dict[str, Any], code: str, says: str
) -> None:
    with pytest.raises(PermanentProviderError) as raised:
        transform.generate_body(request(payload))
    assert raised.value.code == code
    assert says in raised.value.message


def test_token_id_embeddings_are_unsupported() -> None:
    with pytest.raises(PermanentProviderError) as raised:
        transform.embed_inputs(request({"input": [[1, 2], [3]]}, operation="embeddings"))
    assert raised.value.code == "unsupported_parameter"


def test_consecutive_assistant_turns_are_one_model_turn() -> None:
    messages = [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": "Looking."},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_0", "content": "r"},
    ]
    contents = transform.generate_body(request({"messages": messages}))["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    assert contents[1]["parts"][0] == {"text": "Looking."}
    assert contents[1]["parts"][1]["functionCall"]["name"] == "lookup"


def test_percent_encoded_data_urls_go_inline_as_base64() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;name=a.png,%89PNG%0D%0A%1A%0A"}}
    body = transform.generate_body(request({"messages": [{"role": "user", "content": [image]}]}))
    assert body["contents"][0]["parts"] == [
        {"inlineData": {"mimeType": "image/png", "data": base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()}}
    ]


def test_hosted_tool_uses_are_counted() -> None:
    grounded = fixture("generate_grounded_code")
    result = transform.generate_result("seq-0", grounded)
    assert result.output is not None
    assert result.output["content"] == "Spain won Euro 2024, beating England 2-1 in the final in Berlin."
    # one grounded prompt (Google bills per prompt, whatever the queries), two code runs
    assert result.usage == Usage(14 + 71, 58, (("python_execution", 2), ("web_search", 1)))
    assert result.usage.to_dict()["tool_uses"] == {"python_execution": 2, "web_search": 1}
    ungrounded = {**grounded, "candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": "STOP"}]}
    assert transform.generate_result("seq-0", ungrounded).usage.tool_uses == ()


def test_stream_keeps_the_tools_parts_and_grounding() -> None:
    grounded = fixture("generate_grounded_code")
    candidate = grounded["candidates"][0]
    parts = candidate["content"]["parts"]
    first = {"candidates": [{"content": {"role": "model", "parts": parts[:2]}}]}
    last = {**grounded, "candidates": [{**candidate, "content": {"role": "model", "parts": parts[2:]}}]}
    acc = transform.StreamAccumulator("seq-0")
    assert [acc.add(first), acc.add(last)] == ["", parts[-1]["text"]]
    result = acc.result()
    assert result.usage.tool_uses == (("python_execution", 2), ("web_search", 1))
    assert result.raw is not None
    assert result.raw["candidates"][0]["groundingMetadata"] == candidate["groundingMetadata"]
    assert result.raw["candidates"][0]["content"]["parts"] == [parts[-1], *parts[:-1]]


@pytest.mark.parametrize(("status", "makes"), [(403, True), (503, False)])
def test_a_refused_look_up_makes_the_batch_and_a_transient_one_is_tried_again(
    status: int, makes: bool
) -> None:
    calls: list[str] = []
    creates: list[int] = []

    def route(sent: httpx.Request) -> httpx.Response:
        calls.append(sent.method + " " + sent.url.path)
        if sent.method == "GET":  # batches.list, refused (a key not allowed to list) or down
            kind = "PERMISSION_DENIED" if status == 403 else "UNAVAILABLE"
            return httpx.Response(status, json={"error": {"code": status, "message": "no", "status": kind}})
        creates.append(1)
        if len(creates) == 1:  # the first try's create: its answer never comes
            raise httpx.ReadTimeout("lost", request=sent)
        return httpx.Response(200, json={"name": "batches/made1", "metadata": {}})

    batches = GeminiBatches("google", http(route))
    with pytest.raises(TransientProviderError):  # a lost try: the next submit looks first
        batches.submit([request({"input": "x"})], key="k1")
    calls.clear()
    if makes:
        # Then a look-up the vendor refuses never fails the submit: the batch is made
        assert batches.submit([request({"input": "x"})], key="k1") == "batches/made1"
        assert calls[0].startswith("GET ") and calls[-1].startswith("POST ")
    else:
        # And one that failed for now is tried again with the submit, nothing made meanwhile
        with pytest.raises(TransientProviderError):
            batches.submit([request({"input": "x"})], key="k1")
        assert all(c.startswith("GET ") for c in calls)


def test_the_contract_refuses_function_declarations_beside_a_built_in_tool() -> None:
    from batchroute_tools.contracts.gemini import request_violations

    declarations = {"functionDeclarations": [{"name": "get_weather"}]}
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    mixed = request_violations("generateContent", {**body, "tools": [declarations, {"googleSearch": {}}]})
    assert mixed == ["tools: Tool use with function calling is unsupported by the model."]
    assert request_violations("generateContent", {**body, "tools": [declarations]}) == []
    assert request_violations("generateContent", {**body, "tools": [{"codeExecution": {}}]}) == []


def test_the_contract_refuses_tools_beside_a_json_answer() -> None:
    from batchroute_tools.contracts.gemini import request_violations

    body = {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "generationConfig": {"responseMimeType": "application/json"},
    }
    functions = {**body, "tools": [{"functionDeclarations": [{"name": "get_weather"}]}]}
    assert request_violations("generateContent", functions) == [
        "tools: Function calling with a response mime type: 'application/json' is unsupported"
    ]
    search = {**body, "tools": [{"googleSearch": {}}]}
    assert request_violations("generateContent", search) == [
        "tools: Tool use with a response mime type: 'application/json' is unsupported"
    ]
    plain = {**functions, "generationConfig": {"responseMimeType": "text/plain"}}
    assert request_violations("generateContent", plain) == []
