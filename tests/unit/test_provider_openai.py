"""OpenAI's wire format through the transform, replayed from recorded vendor answers
(tests/fixtures/vendors/openai/, hand-written from OpenAI's API reference): normalized
results of Chat Completions and the Responses API, usage (with billed hosted tool calls),
finish reasons, tool calls, stream events, batch lines and states, and the error mapping."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from batchroute.providers.base import (
    ItemError,
    JobState,
    JobStatus,
    PermanentProviderError,
    ProviderRequest,
    ProviderUnavailable,
    TransientProviderError,
    UnknownJob,
    Usage,
)
from batchroute.providers.http import VendorHttp, error_for_status, retry_after_seconds
from batchroute.providers.openai import transform
from batchroute.providers.openai.client import OpenAIBatch, combined_status, vendor_job_ids
from batchroute_tools.contracts.openai import request_violations

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures/vendors/openai"


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


FUNCTION = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}


def request(input_: dict[str, Any], *, operation: str = "responses", max_tokens: int = 64) -> ProviderRequest:
    return ProviderRequest(
        "seq-7", "item-7", operation, "gpt-4o-mini", "gpt-4o-mini-2024-07-18", input_, max_tokens
    )  # type: ignore[arg-type]


def test_a_chat_completion_becomes_the_normalized_message() -> None:
    result = transform.chat_result("seq-0", fixture("chat_completion.json"))
    assert result.status == "completed" and result.usage.to_dict() == {
        "prompt_tokens": 1117,
        "completion_tokens": 46,
    }
    assert result.output == {
        "type": "message",
        "role": "assistant",
        "content": "The image shows a wooden boardwalk through a meadow.",
        "finish_reason": "stop",
    }
    assert result.raw == fixture("chat_completion.json")


def test_length_and_tool_calls() -> None:
    assert (
        transform.chat_result("s", fixture("chat_completion_length.json")).output["finish_reason"] == "length"
    )  # type: ignore[index]
    calls = transform.chat_result("s", fixture("chat_completion_tool_calls.json")).output
    assert calls is not None and calls["content"] == "" and calls["finish_reason"] == "tool_calls"
    assert calls["tool_calls"][0]["function"]["name"] == "get_current_weather"


def test_a_stream_accumulates_text_finish_and_final_usage() -> None:
    acc = transform.StreamAccumulator("seq-0")
    texts = [acc.add(chunk) for chunk in fixture("chat_stream.json")]
    assert texts == ["", "Hello", " there", "", ""]
    result = acc.result()
    assert result.output["content"] == "Hello there" and result.usage.to_dict() == {
        "prompt_tokens": 9,
        "completion_tokens": 2,
    }  # type: ignore[index]
    assert result.raw["object"] == "chat.completion" and result.raw["id"] == "chatcmpl-123"  # type: ignore[index]


def test_embeddings_come_back_in_input_order() -> None:
    many = transform.embeddings_result("s", fixture("embeddings.json"), single=False)
    assert many.output == {
        "type": "embedding",
        "dimensions": 3,
        "embeddings": [[-0.006929283, -0.005336422, 0.024047505], [0.0023064255, -0.009327292, 0.015797347]],
    }
    assert many.usage.prompt_tokens == 8 and many.usage.completion_tokens == 0


def test_batch_states_and_counts() -> None:
    status = transform.job_status(fixture("batch_in_progress.json"))
    assert (status.state, status.total, status.completed_count, status.failed_count) == (
        "in_progress",
        100,
        40,
        2,
    )
    assert transform.job_status(fixture("batch_completed.json")).terminal
    assert transform.job_status({"status": "finalizing"}).state == "in_progress"
    assert transform.job_status({"status": "cancelling"}).state == "in_progress"
    assert transform.job_status({"status": "expired"}).state == "expired"


def test_batch_output_and_error_lines() -> None:
    lines = [json.loads(line) for line in (FIXTURES / "batch_output_lines.jsonl").read_text().splitlines()]
    results = [transform.batch_line_result(line) for line in lines]
    assert [r.custom_id for r in results if r] == ["seq-0", "seq-1", "seq-2", "seq-3", "seq-4", "seq-5"]
    ok, embedding, invalid, limited, expired, response = results
    assert ok is not None and ok.output["content"] == "Hello."  # type: ignore[index]
    assert embedding is not None and embedding.output["embedding"] == [0.1, 0.2]  # type: ignore[index]
    assert invalid is not None and invalid.error is not None and not invalid.error.transient
    assert invalid.error.code == "provider_rejected" and "(invalid_value)" in invalid.error.message
    assert limited.error is not None and limited.error.code == "rate_limited"
    assert limited is not None and limited.error is not None and limited.error.transient
    assert expired is not None and expired.error is not None and expired.error.transient
    # OpenAI's code is ours: the message does not repeat it (a compat error line shows both)
    assert expired.error.code == "batch_expired"
    assert expired.error.message == "This request could not be executed before the completion window expired."
    assert limited.error.message.endswith("(rate_limit_exceeded)")  # another code than ours: kept
    assert transform.batch_line_result({"no": "custom_id"}) is None
    # a Responses API line: its body is a `response`
    assert response is not None and response.output is not None and response.output["content"] == "It is 2."
    assert response.usage == Usage(20, 5, (("python_execution", 1),))


def test_request_bodies() -> None:
    item = {
        "instructions": "Be brief.",
        "input": [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "Hi"},
                    {"type": "input_image", "image_url": "https://x/y.png"},
                ],
            }
        ],
        "temperature": 0.2,
        "text": {
            "format": {
                "type": "json_schema",
                "name": "a",
                "schema": {"type": "object", "additionalProperties": False},
                "strict": True,
            }
        },
    }
    body = transform.chat_body(request(item))
    assert body["model"] == "gpt-4o-mini-2024-07-18" and body["max_completion_tokens"] == 64
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert body["messages"][1]["content"] == [
        {"type": "text", "text": "Hi"},
        {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
    ]
    assert body["temperature"] == 0.2
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "a",
            "schema": {"type": "object", "additionalProperties": False},
            "strict": True,
        },
    }
    hosted = transform.chat_body(
        request({"messages": [{"role": "user", "content": "x"}]}), token_field="max_tokens", stream=True
    )
    assert hosted["max_tokens"] == 64 and hosted["stream_options"] == {"include_usage": True}
    line = transform.OPENAI_ROUTE.batch_line(request({"input": "hello"}, operation="embeddings"))
    assert line == {
        "custom_id": "seq-7~single",
        "method": "POST",
        "url": "/v1/embeddings",
        "body": {"model": "gpt-4o-mini-2024-07-18", "input": "hello"},
    }


def test_a_response_format_is_rebuilt_from_the_keys_openai_declares() -> None:
    # The preflight refuses any other key (domain/routing/items.py); the transform forwards
    # none it was not meant to, and a null is a key left out.
    given = {
        "type": "json_schema",
        "json_schema": {"name": "a", "description": "An a.", "schema": {"type": "object"}, "strict": None},
        "stray": 1,
    }
    body = transform.chat_body(request({"input": "x", "response_format": given}))
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "a", "description": "An a.", "schema": {"type": "object"}},
    }
    body = transform.responses_body(request({"input": "x", "response_format": given}))
    assert body["text"] == {
        "format": {"type": "json_schema", "name": "a", "description": "An a.", "schema": {"type": "object"}}
    }
    plain = transform.chat_body(
        request({"input": "x", "response_format": {"type": "json_object", "strict": True}})
    )
    assert plain["response_format"] == {"type": "json_object"}


@pytest.mark.parametrize(
    ("input_", "path"),
    [
        ({"input": "hi"}, transform.CHAT_PATH),
        ({"messages": [{"role": "user", "content": "hi"}], "tools": [FUNCTION]}, transform.CHAT_PATH),
        ({"input": "hi", "tools": [{"type": "web_search_preview_2025_03_11"}]}, transform.RESPONSES_PATH),
        ({"input": "hi", "tools": [FUNCTION, {"type": "code_interpreter"}]}, transform.RESPONSES_PATH),
        (
            {"input": "hi", "tools": [{"type": "file_search", "vector_store_ids": ["v"]}]},
            transform.RESPONSES_PATH,
        ),
    ],
)
def test_openai_sends_only_items_with_hosted_tools_to_the_responses_api(
    input_: dict[str, Any], path: str
) -> None:
    for operation in ("responses", "vision"):
        item = request(input_, operation=operation)
        assert transform.OPENAI_ROUTE.path(item) == transform.OPENAI_ROUTE.batch_line(item)["url"] == path
        assert ("messages" in transform.OPENAI_ROUTE.body(item)) == (path == transform.CHAT_PATH)
        assert transform.HOST_ROUTE.path(item) == transform.CHAT_PATH  # hosts: Chat Completions only


def test_stop_goes_to_openais_chat_completions_and_is_sent() -> None:
    item = request({"input": "count to 9", "stop": "5", "seed": 1})
    assert transform.OPENAI_ROUTE.path(item) == transform.CHAT_PATH
    for body in (transform.OPENAI_ROUTE.body(item), transform.OPENAI_ROUTE.body(item, stream=True)):
        assert body["stop"] == ["5"] and body["seed"] == 1 and body["max_completion_tokens"] == 64
    # beside a hosted tool it would go to the Responses API, which has no stop: refused there
    with pytest.raises(transform.Inexpressible, match="no stop"):
        transform.OPENAI_ROUTE.body(request({"input": "x", "stop": "5", "tools": [{"type": "web_search"}]}))


def test_a_responses_api_body() -> None:
    item = {
        "instructions": "Be brief.",
        "input": [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "Hi"},
                    {"type": "input_image", "image_url": "https://x/y.png"},
                ],
            },
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "42"},
            {"role": "assistant", "content": "It is 42."},
        ],
        "tools": [
            {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}},
            {"type": "file_search", "vector_store_ids": ["vs_1"]},
            {"type": "code_interpreter"},
        ],
        "tool_choice": {"type": "file_search"},
        "temperature": 0.2,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "a", "schema": {"type": "object"}},
        },
    }
    body = transform.responses_body(request(item, max_tokens=8))
    assert body["instructions"] == "Be brief." and body["max_output_tokens"] == 16  # the API's least
    assert body["input"] == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Hi"},
                {"type": "input_image", "image_url": "https://x/y.png", "detail": "auto"},
            ],
        },
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "42"},
        {"role": "assistant", "content": "It is 42."},
    ]
    assert body["tools"] == [
        {"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": False},
        {"type": "file_search", "vector_store_ids": ["vs_1"]},
        {"type": "code_interpreter", "container": {"type": "auto"}},
    ]
    assert body["tool_choice"] == {
        "type": "allowed_tools",
        "mode": "required",
        "tools": [{"type": "file_search"}],
    }
    assert body["text"] == {"format": {"type": "json_schema", "name": "a", "schema": {"type": "object"}}}
    assert body["temperature"] == 0.2 and body["store"] is False and "stream" not in body
    assert transform.responses_body(request(item), stream=True)["stream"] is True


def test_a_response_becomes_the_normalized_message_with_its_hosted_tool_calls_counted() -> None:
    result = transform.response_result("seq-1", fixture("response.json"))
    assert result.output == {
        "type": "message",
        "role": "assistant",
        "content": "In a peaceful grove beneath a silver moon.",
        "finish_reason": "stop",
    }
    assert result.usage == Usage(36, 87, (("file_search", 1), ("web_search", 2)))
    assert result.raw is not None and result.raw["object"] == "response"
    cut = transform.response_result("seq-2", fixture("response_function_call_incomplete.json"))
    assert cut.output is not None and cut.output["finish_reason"] == "length"
    assert cut.output["tool_calls"] == [
        {
            "id": "call_unLAR8MvFNptuiZK6K6HCy5k",
            "type": "function",
            "function": {
                "name": "get_current_weather",
                "arguments": '{"location":"Boston, MA","unit":"celsius"}',
            },
        }
    ]


def test_a_response_stream_gives_its_deltas_then_the_whole_response() -> None:
    stream = transform.ResponseStream("seq-1")
    texts = [stream.add(event) for event in fixture("response_stream.json")]
    assert "".join(texts) == "Hi there!" and stream.result is not None
    assert stream.result.output is not None and stream.result.output["content"] == "Hi there!"
    assert stream.result.usage == Usage(37, 11)
    failing = transform.ResponseStream("seq-2")
    first, failed = fixture("response_stream_failed.json")
    assert failing.add(first) == "Hi"
    with pytest.raises(TransientProviderError) as broken:
        failing.add(failed)
    assert broken.value.code == "provider_5xx" and "failed to generate" in broken.value.message
    with pytest.raises(PermanentProviderError):
        failing.add({"type": "error", "code": "invalid_prompt", "message": "no", "param": None})


def test_a_failed_batch_carries_its_errors() -> None:
    status = transform.job_status(fixture("batch_failed.json"))
    assert status.state == "failed" and len(status.errors) == 1
    assert status.errors[0].code == "provider_rejected"
    assert "(invalid_request) [line 2, param url]" in status.errors[0].message
    assert transform.job_status(fixture("batch_completed.json")).errors == ()


def status(state: JobState, *, errors: tuple[ItemError, ...] = ()) -> JobStatus:
    return JobStatus(state, total=3, completed_count=2, failed_count=1, errors=errors)


@pytest.mark.parametrize(
    ("states", "combined"),
    [
        (("validating", "validating"), "validating"),
        (("validating", "in_progress"), "in_progress"),
        (("completed", "in_progress"), "in_progress"),  # until every part is done
        (("expired", "in_progress"), "in_progress"),
        (("failed", "validating"), "failed"),  # failed over at once: the runner reads none of it
        (("in_progress", "cancelled"), "cancelled"),
        (("completed", "completed"), "completed"),
        (("completed", "expired"), "expired"),  # the runner reads it and resubmits what is missing
        (("expired", "cancelled"), "cancelled"),  # the runner fails these over
        (("cancelled", "failed"), "failed"),
        (("completed", "failed"), "failed"),
    ],
)
def test_a_composite_jobs_status_combines_its_parts(states: tuple[JobState, JobState], combined: str) -> None:
    broken = ItemError("provider_rejected", "bad line", False)
    parts = [status(states[0]), status(states[1], errors=(broken,))]
    together = combined_status(parts)
    assert together.state == combined
    assert (together.total, together.completed_count, together.failed_count) == (6, 4, 2)
    assert together.errors == (broken,)
    assert combined_status([parts[0]]) is parts[0]


def test_a_part_that_cannot_be_created_cancels_those_already_created() -> None:
    sent: list[tuple[str, str]] = []

    def vendor(call: httpx.Request) -> httpx.Response:
        sent.append((call.method, call.url.path))
        if call.url.path == "/v1/files":
            return httpx.Response(200, json={"id": f"file-{len(sent)}"})
        if call.url.path == "/v1/batches":
            if len([c for c in sent if c == ("POST", "/v1/batches")]) == 2:
                return httpx.Response(400, json={"error": {"message": "no", "type": "invalid_request_error"}})
            return httpx.Response(200, json={"id": "batch_1"})
        return httpx.Response(200, json={"id": "batch_1", "status": "cancelling"})

    batch = OpenAIBatch(
        "openai", VendorHttp("http://x/v1", vendor="openai", transport=httpx.MockTransport(vendor))
    )
    chunk = [request({"input": "plain"}), request({"input": "find", "tools": [{"type": "web_search"}]})]
    with pytest.raises(PermanentProviderError):
        batch.submit(chunk)
    assert sent[-1] == ("POST", "/v1/batches/batch_1/cancel")


def test_a_submission_s_key_goes_in_openai_s_batch_metadata_only() -> None:
    created: list[dict[str, Any]] = []

    def vendor(call: httpx.Request) -> httpx.Response:
        if call.url.path == "/v1/files":
            return httpx.Response(200, json={"id": "file-1"})
        created.append(json.loads(call.content))
        return httpx.Response(200, json={"id": f"batch_{len(created)}"})

    http = VendorHttp("http://x/v1", vendor="openai", transport=httpx.MockTransport(vendor))
    OpenAIBatch("openai", http).submit([request({"input": "a"})], key="k1")
    OpenAIBatch("together", http, route=transform.HOST_ROUTE).submit([request({"input": "a"})], key="k2")
    OpenAIBatch("openai", http).submit([request({"input": "a"})])
    assert created[0]["metadata"] == {"batchroute_key": "k1"}
    assert "metadata" not in created[1] and "metadata" not in created[2]


def test_composite_job_ids() -> None:
    assert vendor_job_ids("batch_a") == ["batch_a"]
    assert vendor_job_ids("batch_a+batch_b") == ["batch_a", "batch_b"]
    with pytest.raises(UnknownJob):
        vendor_job_ids("batch_a+")


@pytest.mark.parametrize(
    ("name", "kind", "code"),
    [
        ("error_rate_limit.json", TransientProviderError, "rate_limited"),
        ("error_invalid_request.json", PermanentProviderError, "provider_rejected"),
        ("error_auth.json", ProviderUnavailable, "provider_auth_failed"),
    ],
)
def test_vendor_errors_map_to_provider_errors(name: str, kind: type[Exception], code: str) -> None:
    answer = fixture(name)
    error = error_for_status(answer["status"], answer["headers"], json.dumps(answer["body"]), vendor="openai")
    assert isinstance(error, kind) and error.code == code
    assert "openai answered" in error.message and "sk-" not in error.message.split("provided:")[0]
    if code == "rate_limited":
        assert error.retry_after_seconds == 1.5  # type: ignore[attr-defined]


def test_retry_after_forms() -> None:
    assert retry_after_seconds({"retry-after-ms": "250"}) == 0.25
    assert retry_after_seconds({"Retry-After": "3"}) == 3.0
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


@pytest.mark.parametrize(("status", "makes"), [(403, True), (500, False)])
def test_a_refused_look_up_makes_the_batch_and_a_transient_one_is_tried_again(
    status: int, makes: bool
) -> None:
    calls: list[tuple[str, str]] = []
    creates: list[int] = []

    def vendor(call: httpx.Request) -> httpx.Response:
        calls.append((call.method, call.url.path))
        if call.method == "GET":  # the list of batches: refused (a restricted key) or down
            kind = "invalid_request_error" if status == 403 else "server_error"
            return httpx.Response(status, json={"error": {"message": "no", "type": kind}})
        if call.url.path == "/v1/files":
            return httpx.Response(200, json={"id": "file-1"})
        creates.append(1)
        if len(creates) == 1:  # the first try's create: its answer never comes
            raise httpx.ReadTimeout("lost", request=call)
        return httpx.Response(200, json={"id": "batch_made"})

    batch = OpenAIBatch(
        "openai", VendorHttp("http://x/v1", vendor="openai", transport=httpx.MockTransport(vendor))
    )
    with pytest.raises(TransientProviderError):  # a lost try: the next submit looks first
        batch.submit([request({"input": "a"})], key="k1")
    calls.clear()
    if makes:
        # Then a look-up the vendor refuses never fails the submit: the batch is made
        assert batch.submit([request({"input": "a"})], key="k1") == "batch_made"
        assert calls[0] == ("GET", "/v1/batches") and calls[-1] == ("POST", "/v1/batches")
    else:
        # And one that failed for now is tried again with the submit, nothing made meanwhile
        with pytest.raises(TransientProviderError):
            batch.submit([request({"input": "a"})], key="k1")
        assert all(method == "GET" for method, _ in calls)


def test_json_mode_says_json_when_no_message_does() -> None:
    # OpenAI refuses JSON mode unless the messages say "json" (400 "'messages' must contain the
    # word 'json' in some form"): the adapter says it when the item does not
    json_mode = {"messages": [{"role": "user", "content": "Classify: printer on fire"}]}
    json_mode["response_format"] = {"type": "json_object"}
    chat = transform.chat_body(request(json_mode))
    assert chat["messages"][0] == {"role": "system", "content": transform.JSON_OBJECT_INSTRUCTION}
    assert request_violations("chat.completions", chat) == []
    with_system = transform.chat_body(request({**json_mode, "system": "Be brief."}))
    assert with_system["messages"][0]["content"] == "Be brief.\n\n" + transform.JSON_OBJECT_INSTRUCTION
    responses = transform.responses_body(request({**json_mode, "system": "Answer in JSON."}))
    # the Responses API reads its input, not `instructions`: the instruction is an input message
    assert responses["input"][0] == {"role": "developer", "content": transform.JSON_OBJECT_INSTRUCTION}
    assert request_violations("responses", responses) == []
    # an item that says it already is sent as it is
    said = {**json_mode, "messages": [{"role": "user", "content": "Answer as JSON: printer on fire"}]}
    assert transform.chat_body(request(said))["messages"] == said["messages"]
    assert transform.responses_body(request(said))["input"][0]["role"] == "user"


def test_top_p_zero_reaches_a_host_as_the_least_nucleus_it_takes() -> None:
    # vLLM (the edge pools) refuses top_p 0 ("must be in (0, 1]"); 0 means the top token only
    item = request({"messages": [{"role": "user", "content": "hi"}], "top_p": 0})
    assert transform.HOST_ROUTE.body(item)["top_p"] == 1e-9
    # OpenAI itself takes 0 as it is, and any other value goes as given
    assert transform.OPENAI_ROUTE.body(item)["top_p"] == 0
    half = request({"messages": [{"role": "user", "content": "hi"}], "top_p": 0.5})
    assert transform.HOST_ROUTE.body(half)["top_p"] == 0.5


def test_code_interpreter_counts_once_per_container_as_openai_bills_it() -> None:
    def call(container: str | None) -> dict[str, object]:
        item: dict[str, object] = {"type": "code_interpreter_call", "status": "completed", "code": "1+1"}
        return item if container is None else {**item, "container_id": container}

    def counted(*items: dict[str, object]) -> tuple[tuple[str, int], ...]:
        body = {"status": "completed", "output": [*items, {"type": "web_search_call"}], "usage": {}}
        return transform.response_result("c1", body).usage.tool_uses

    # Three runs of the interpreter in one container are one container billed ($0.03)
    assert counted(call("cntr_a"), call("cntr_a"), call("cntr_a")) == (
        ("python_execution", 1),
        ("web_search", 1),
    )
    # Two containers are two; a call naming none counts as one of its own
    assert counted(call("cntr_a"), call("cntr_b"), call(None)) == (("python_execution", 3), ("web_search", 1))
