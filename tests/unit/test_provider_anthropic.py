"""The Anthropic adapter against recorded vendor answers (tests/fixtures/vendors/anthropic/,
hand-written from Anthropic's API reference): every fixture is replayed through the pure
transform, and through the client over an in-memory transport (no sockets), for the mapped
results, usage, finish reasons, tool calls, errors and job states. Then the request bodies
the transform builds from our items."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from batchroute.catalog import builtin_catalog
from batchroute.catalog.environments import lane_output_limits, load_deployment
from batchroute.domain.catalog.tokens import DEFAULT_OUTPUT_TOKENS
from batchroute.providers import base
from batchroute.providers.anthropic import (
    API_VERSION,
    DEFAULT_BASE_URL,
    make_batch,
    make_sync,
    vendor_http,
)
from batchroute.providers.anthropic import transform as t
from batchroute.providers.anthropic.client import AnthropicBatches, AnthropicMessages
from batchroute.providers.endpoints import ProviderEndpoint
from batchroute_tools.contracts.anthropic import message_violations

FIXTURES = Path(__file__).parents[1] / "fixtures" / "vendors" / "anthropic"
ENDPOINT = ProviderEndpoint(slug="anthropic", adapter="anthropic")
REPLAYED = {
    "message.json",
    "message_tool_use.json",
    "message_max_tokens.json",
    "message_server_tools.json",
    "stream_text.json",
    "stream_tool_use.json",
    "stream_error_overloaded.json",
    "batch_in_progress.json",
    "batch_canceling.json",
    "batch_ended.json",
    "batch_ended_expired.json",
    "batch_ended_canceled.json",
    "batch_results.json",
    "error_overloaded_529.json",
    "error_rate_limit_429.json",
    "error_invalid_request_400.json",
    "models.json",
}


def fixture(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return loaded


def wire(recorded: dict[str, Any]) -> httpx.Response:
    """A recorded answer as the bytes it came in: JSON, server-sent events or JSON Lines."""
    if "events" in recorded:
        text = "".join(f"event: {e['event']}\ndata: {json.dumps(e['data'])}\n\n" for e in recorded["events"])
    elif "lines" in recorded:
        text = "".join(json.dumps(line) + "\n" for line in recorded["lines"])
    else:
        text = json.dumps(recorded["body"])
    return httpx.Response(recorded["status"], headers=recorded["headers"], content=text.encode())


class Vendor:
    """An in-memory Anthropic: answers the calls in order, and keeps them."""

    def __init__(self, *answers: httpx.Response | Callable[[httpx.Request], httpx.Response]) -> None:
        self.answers = list(answers)
        self.calls: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls.append(request)
        answer = self.answers.pop(0)
        return answer if isinstance(answer, httpx.Response) else answer(request)

    def sync(self, **limits: int) -> AnthropicMessages:
        http = vendor_http(ENDPOINT, "sk-ant-test", transport=httpx.MockTransport(self))
        return AnthropicMessages("anthropic", http, output_limits=limits)

    def batches(self) -> AnthropicBatches:
        http = vendor_http(ENDPOINT, "sk-ant-test", transport=httpx.MockTransport(self))
        return AnthropicBatches("anthropic", http)

    def body(self, index: int = -1) -> dict[str, Any]:
        sent: dict[str, Any] = json.loads(self.calls[index].content)
        return sent


def request(payload: dict[str, Any], *, max_output_tokens: int = 256, **kw: Any) -> base.ProviderRequest:
    fields: dict[str, Any] = {
        "custom_id": "seq-0",
        "customer_item_id": "item-0",
        "operation": "responses",
        "model": "claude-sonnet-4",
        "provider_model_id": "claude-sonnet-4-20250514",
        "input": payload,
        "max_output_tokens": max_output_tokens,
        **kw,
    }
    return base.ProviderRequest(**fields)


def body_of(payload: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return t.messages_body(request(payload, **kw), default_max_tokens=8192)


def test_every_fixture_is_replayed() -> None:
    assert {p.name for p in FIXTURES.glob("*.json")} == REPLAYED


# -- messages --------------------------------------------------------------------------------
def test_message_maps_text_usage_and_raw() -> None:
    body = fixture("message.json")["body"]
    result = t.message_result("seq-0", body)
    assert result.status == "completed"
    assert result.output == {
        "type": "message",
        "role": "assistant",
        "content": "Hi! My name is Claude. How can I help you today?",
        "finish_reason": "stop",
    }
    # cache reads are input too, billed at their own price
    assert result.usage == base.Usage(2095 + 1024, 503, cached_input_tokens=1024)
    assert result.raw == body


def test_message_with_server_tools_counts_their_use() -> None:
    body = fixture("message_server_tools.json")["body"]
    result = t.message_result("seq-0", body)
    assert result.output == {
        "type": "message",
        "role": "assistant",
        "content": "I'll search for that. Paris has about 2.1 million people; half is 1,051,325.",
        "finish_reason": "stop",
    }
    # web search as the usage bills it; code execution (billed by time) by its calls
    assert result.usage == base.Usage(6039, 931, (("python_execution", 1), ("web_search", 1)))
    billed_twice = {**body, "usage": {**body["usage"], "server_tool_use": {"web_search_requests": 2}}}
    assert dict(t.message_result("seq-0", billed_twice).usage.tool_uses)["web_search"] == 2
    unused = {
        **body,
        "usage": {**body["usage"], "server_tool_use": {"web_search_requests": 0}},
        "content": [],
    }
    assert t.message_result("seq-0", unused).usage.tool_uses == ()


def test_stream_with_server_tools_adds_up_to_the_message() -> None:
    body = fixture("message_server_tools.json")["body"]
    acc = t.StreamAccumulator("seq-0")
    start = {**body, "content": [], "usage": {"input_tokens": 6039, "output_tokens": 1}}
    texts = [acc.add({"type": "message_start", "message": start})]
    for index, block in enumerate(body["content"]):
        opened = {**block, "input": {}} if block["type"] == "server_tool_use" else block
        if block["type"] == "text":
            opened = {"type": "text", "text": ""}
        texts.append(acc.add({"type": "content_block_start", "index": index, "content_block": opened}))
        if block["type"] == "server_tool_use":
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            acc.add({"type": "content_block_delta", "index": index, "delta": delta})
        if block["type"] == "text":
            delta = {"type": "text_delta", "text": block["text"]}
            texts.append(acc.add({"type": "content_block_delta", "index": index, "delta": delta}))
        acc.add({"type": "content_block_stop", "index": index})
    usage = {"output_tokens": 931, "server_tool_use": {"web_search_requests": 1, "web_fetch_requests": 0}}
    acc.add({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": usage})
    acc.add({"type": "message_stop"})
    result = acc.result()
    whole = t.message_result("seq-0", body)
    assert "".join(texts) == whole.output["content"] == result.output["content"]  # type: ignore[index]
    assert result.usage == whole.usage
    assert [b.get("input") for b in result.raw["content"]] == [b.get("input") for b in body["content"]]  # type: ignore[index]


def test_message_with_tool_use_gives_openai_style_tool_calls() -> None:
    result = t.message_result("seq-0", fixture("message_tool_use.json")["body"])
    assert result.output is not None
    assert result.output["content"] == "I'll check the current weather in San Francisco for you."
    assert result.output["finish_reason"] == "tool_calls"  # stop_reason tool_use
    [call] = result.output["tool_calls"]
    assert call["id"] == "toolu_01A09q90qw90lq917835lq9"
    assert call["type"] == "function"
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"location": "San Francisco, CA", "unit": "celsius"}
    assert result.usage == base.Usage(384, 92)


def test_message_cut_at_max_tokens_finishes_with_length() -> None:
    result = t.message_result("seq-0", fixture("message_max_tokens.json")["body"])
    assert result.output is not None and result.output["finish_reason"] == "length"
    assert t.finish_reason("model_context_window_exceeded") == "length"
    assert [t.finish_reason(r) for r in ("end_turn", "stop_sequence", None)] == ["stop"] * 3
    # A paused turn is no answer (test_provider_anthropic_paused_turns.py): never a `stop`.
    paused = {**fixture("message.json")["body"], "stop_reason": "pause_turn"}
    assert t.message_result("seq-0", paused).transient_failure
    assert t.finish_reason("tool_use") == "tool_calls"  # OpenAI's reason for a function call
    assert t.finish_reason("refusal") == "content_filter"


def test_complete_over_http_sends_key_version_and_body() -> None:
    vendor = Vendor(wire(fixture("message.json")))
    result = vendor.sync().complete(request({"messages": [{"role": "user", "content": "Hello"}]}))
    assert result.output is not None and result.output["content"].startswith("Hi! My name is Claude.")
    [call] = vendor.calls
    assert (call.method, str(call.url)) == ("POST", f"{DEFAULT_BASE_URL}/v1/messages")
    assert call.headers["x-api-key"] == "sk-ant-test"
    assert call.headers["anthropic-version"] == API_VERSION == "2023-06-01"
    assert call.headers["anthropic-beta"] == "code-execution-2025-05-22"  # the code execution tool's
    assert call.headers["content-type"] == "application/json"
    assert vendor.body() == {
        "model": "claude-sonnet-4-20250514",
        "max_tokens": 256,
        "messages": [{"role": "user", "content": "Hello"}],
    }


# -- streams ---------------------------------------------------------------------------------
def accumulate(name: str) -> tuple[t.StreamAccumulator, list[str]]:
    acc = t.StreamAccumulator("seq-0")
    texts = [acc.add(e["data"]) for e in fixture(name)["events"]]
    return acc, [x for x in texts if x]


def test_stream_of_text_adds_up_to_the_message() -> None:
    acc, texts = accumulate("stream_text.json")
    assert texts == ["Hello", "!", " How can I help?"]
    assert acc.done
    result = acc.result()
    assert result.output == {
        "type": "message",
        "role": "assistant",
        "content": "Hello! How can I help?",
        "finish_reason": "stop",
    }
    assert result.usage == base.Usage(25, 15)  # input from message_start, output from message_delta
    assert result.raw is not None
    assert result.raw["id"] == "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY"
    assert result.raw["stop_reason"] == "end_turn"
    assert result.raw["content"] == [{"type": "text", "text": "Hello! How can I help?"}]


def test_stream_with_tool_use_rebuilds_the_tool_input() -> None:
    acc, texts = accumulate("stream_tool_use.json")
    assert texts == ["Okay, let's check the weather for San Francisco, CA:"]
    result = acc.result()
    assert result.output is not None
    [call] = result.output["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {
        "location": "San Francisco, CA",
        "unit": "fahrenheit",
    }
    assert result.usage == base.Usage(472, 89)
    assert result.raw is not None and result.raw["stop_reason"] == "tool_use"


def test_an_overloaded_error_event_mid_stream_is_transient() -> None:
    acc = t.StreamAccumulator("seq-0")
    events = fixture("stream_error_overloaded.json")["events"]
    for event in events[:-1]:
        acc.add(event["data"])
    with pytest.raises(base.TransientProviderError) as raised:
        acc.add(events[-1]["data"])
    assert raised.value.code == "overloaded"
    invalid = {"type": "error", "error": {"type": "invalid_request_error", "message": "no"}}
    with pytest.raises(base.PermanentProviderError):
        acc.add(invalid)


def test_stream_over_http_yields_start_deltas_end() -> None:
    vendor = Vendor(wire(fixture("stream_text.json")))
    events = list(vendor.sync().stream(request({"messages": [{"role": "user", "content": "Hello"}]})))
    assert isinstance(events[0], base.StreamStart)
    assert [e.text for e in events if isinstance(e, base.StreamDelta)] == ["Hello", "!", " How can I help?"]
    end = events[-1]
    assert isinstance(end, base.StreamEnd)
    assert end.usage == base.Usage(25, 15)
    assert vendor.body()["stream"] is True
    assert vendor.calls[0].headers["accept"] == "text/event-stream"


def test_stream_over_http_broken_by_an_error_event() -> None:
    vendor = Vendor(wire(fixture("stream_error_overloaded.json")))
    events = vendor.sync().stream(request({"messages": [{"role": "user", "content": "Hello"}]}))
    assert isinstance(next(events), base.StreamStart)
    delta = next(events)
    assert isinstance(delta, base.StreamDelta) and delta.text == "Once upon"
    with pytest.raises(base.TransientProviderError) as raised:
        next(events)
    assert raised.value.code == "overloaded"


def test_stream_deltas_carry_the_input_and_its_cache_split_as_message_start_reported_them() -> None:
    recorded = fixture("stream_text.json")
    usage = recorded["events"][0]["data"]["message"]["usage"]
    usage.update(input_tokens=25, cache_read_input_tokens=3000, cache_creation_input_tokens=200)
    events = Vendor(wire(recorded)).sync().stream(request({"messages": [{"role": "user", "content": "Hi"}]}))
    deltas = [e for e in events if isinstance(e, base.StreamDelta)]
    # (a stream that dies after its first delta is charged the cached input as cached)
    assert deltas[0].usage == base.Usage(3225, 1, cached_input_tokens=3000, cache_write_input_tokens=200)


def test_stream_without_message_stop_was_interrupted() -> None:
    recorded = fixture("stream_text.json")
    recorded["events"] = recorded["events"][:-2]
    events = Vendor(wire(recorded)).sync().stream(request({"messages": [{"role": "user", "content": "Hi"}]}))
    with pytest.raises(base.TransientProviderError) as raised:
        list(events)
    assert raised.value.code == "stream_interrupted"


# -- errors ----------------------------------------------------------------------------------
def test_529_overloaded_is_transient() -> None:
    vendor = Vendor(wire(fixture("error_overloaded_529.json")))
    with pytest.raises(base.TransientProviderError) as raised:
        vendor.sync().complete(request({"input": "Hi"}))
    assert raised.value.code == "overloaded"
    assert "Overloaded" in raised.value.message


def test_429_is_rate_limited_with_retry_after() -> None:
    vendor = Vendor(wire(fixture("error_rate_limit_429.json")))
    with pytest.raises(base.TransientProviderError) as raised:
        vendor.sync().complete(request({"input": "Hi"}))
    assert raised.value.code == "rate_limited"
    assert raised.value.retry_after_seconds == 20.0
    assert "50 requests per minute" in raised.value.message


def test_400_is_permanent_for_a_call_and_a_stream() -> None:
    refused = fixture("error_invalid_request_400.json")
    sync = Vendor(wire(refused), wire(refused)).sync()
    with pytest.raises(base.PermanentProviderError) as raised:
        sync.complete(request({"input": "Hi"}))
    assert raised.value.code == "provider_rejected"
    assert "roles must alternate" in raised.value.message
    events = sync.stream(request({"input": "Hi"}))
    with pytest.raises(base.PermanentProviderError) as before_first_byte:
        next(events)
    assert before_first_byte.value.code == "provider_rejected"


def test_error_types_of_errored_results_and_stream_events() -> None:
    assert t.ERROR_TYPES["overloaded_error"] == ("overloaded", True)
    assert t.ERROR_TYPES["api_error"] == ("provider_5xx", True)
    assert t.ERROR_TYPES["invalid_request_error"] == ("provider_rejected", False)
    unknown = t.item_error({"type": "error", "error": {"type": "teapot_error", "message": "short"}})
    assert (unknown.code, unknown.transient) == ("teapot_error", False)


# -- models ----------------------------------------------------------------------------------
def test_check_lists_the_models() -> None:
    vendor = Vendor(wire(fixture("models.json")))
    assert vendor.sync().check() == ["claude-sonnet-4-20250514", "claude-3-5-haiku-20241022"]
    assert vendor.calls[0].url.path == "/v1/models"
    assert vendor.calls[0].url.params["limit"] == "1000"


# -- message batches -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "status"),
    [
        ("batch_in_progress.json", base.JobStatus("in_progress", 6, 0, 0)),
        ("batch_canceling.json", base.JobStatus("in_progress", 6, 0, 0)),
        ("batch_ended.json", base.JobStatus("completed", 6, 1, 5)),
        ("batch_ended_expired.json", base.JobStatus("expired", 6, 0, 6)),
        ("batch_ended_canceled.json", base.JobStatus("cancelled", 6, 0, 6)),
    ],
)
def test_batch_states(name: str, status: base.JobStatus) -> None:
    assert t.job_status(fixture(name)["body"]) == status
    vendor = Vendor(wire(fixture(name)))
    assert vendor.batches().poll("msgbatch_013Zva2CMHLNnXjNJJKqJ2EF") == status
    assert vendor.calls[0].url.path == "/v1/messages/batches/msgbatch_013Zva2CMHLNnXjNJJKqJ2EF"


def test_batch_results_lines_map_to_results() -> None:
    results = {
        r.custom_id: r for line in fixture("batch_results.json")["lines"] if (r := t.batch_line_result(line))
    }
    ok = results["seq-0"]
    assert ok.status == "completed" and ok.usage == base.Usage(11, 36)
    assert ok.output is not None and ok.output["content"] == "Hello again! It's nice to see you."
    failures = {cid: (r.error.code, r.error.transient) for cid, r in results.items() if r.error is not None}
    assert failures == {
        "seq-1": ("provider_rejected", False),
        "seq-2": ("overloaded", True),
        "seq-3": ("provider_5xx", True),
        "seq-4": ("batch_request_canceled", True),
        "seq-5": ("batch_expired", True),
    }
    assert results["seq-1"].error is not None and "Field required" in results["seq-1"].error.message
    assert t.batch_line_result({"result": {"type": "succeeded"}}) is None


def test_batch_results_over_http_skip_a_malformed_line() -> None:
    recorded = fixture("batch_results.json")
    lines = wire(recorded).content.decode().splitlines(keepends=True)
    broken = lines[0][: len(lines[0]) // 2] + "\n"  # cut off mid-object
    content = (broken + "".join(lines[1:]) + "\n").encode()
    vendor = Vendor(wire(fixture("batch_ended.json")), httpx.Response(200, content=content))
    results = list(vendor.batches().results("msgbatch_013Zva2CMHLNnXjNJJKqJ2EF"))
    assert sorted(r.custom_id for r in results) == ["seq-1", "seq-2", "seq-3", "seq-4", "seq-5"]
    assert str(vendor.calls[1].url) == fixture("batch_ended.json")["body"]["results_url"]


def test_batch_results_never_follow_a_foreign_results_url() -> None:
    ended = fixture("batch_ended.json")
    ended["body"]["results_url"] = "https://elsewhere.example/steal"
    vendor = Vendor(wire(ended), wire(fixture("batch_results.json")))
    assert len(list(vendor.batches().results("msgbatch_1"))) == 6
    assert str(vendor.calls[1].url) == f"{DEFAULT_BASE_URL}/v1/messages/batches/msgbatch_1/results"
    assert vendor.calls[1].headers["x-api-key"] == "sk-ant-test"


def test_batch_results_of_a_running_batch_are_not_ready() -> None:
    vendor = Vendor(wire(fixture("batch_in_progress.json")))
    with pytest.raises(base.TransientProviderError) as raised:
        list(vendor.batches().results("msgbatch_1"))
    assert raised.value.code == "batch_not_ended"


def test_submit_sends_custom_id_and_params_lines() -> None:
    vendor = Vendor(wire(fixture("batch_in_progress.json")))
    items = [request({"input": f"Hi {n}"}, custom_id=f"seq-{n}", max_output_tokens=0) for n in range(2)]
    job = AnthropicBatches("anthropic", vendor.batches().http, output_limits={"claude-sonnet-4": 64_000})
    assert job.submit(items) == "msgbatch_013Zva2CMHLNnXjNJJKqJ2EF"
    assert vendor.calls[0].url.path == "/v1/messages/batches"
    assert vendor.body() == {
        "requests": [
            {
                "custom_id": f"seq-{n}",
                "params": {
                    "model": "claude-sonnet-4-20250514",
                    "max_tokens": 64_000,
                    "messages": [{"role": "user", "content": f"Hi {n}"}],
                },
            }
            for n in range(2)
        ]
    }
    with pytest.raises(base.PermanentProviderError):
        job.submit([])


def test_unknown_batch_and_cancel() -> None:
    not_found = {"type": "error", "error": {"type": "not_found_error", "message": "Not found"}}
    vendor = Vendor(httpx.Response(404, json=not_found), wire(fixture("batch_canceling.json")))
    with pytest.raises(base.UnknownJob):
        vendor.batches().poll("msgbatch_gone")
    vendor.batches().cancel("msgbatch_013Zva2CMHLNnXjNJJKqJ2EF")
    assert vendor.calls[1].method == "POST"
    assert vendor.calls[1].url.path == "/v1/messages/batches/msgbatch_013Zva2CMHLNnXjNJJKqJ2EF/cancel"


def test_a_bad_key_makes_the_lane_unavailable() -> None:
    denied = {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}
    vendor = Vendor(httpx.Response(401, json=denied))
    with pytest.raises(base.ProviderUnavailable):
        vendor.sync().check()


# -- request bodies --------------------------------------------------------------------------
def test_system_text_comes_from_every_system_source() -> None:
    body = body_of(
        {
            "instructions": "Answer in French.",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "developer", "content": [{"type": "text", "text": "No lists."}]},
                {"role": "user", "content": "Hello"},
            ],
        }
    )
    assert body["system"] == "Answer in French.\n\nBe brief.\n\nNo lists."
    assert body["messages"] == [{"role": "user", "content": "Hello"}]


def test_consecutive_turns_of_one_role_are_merged() -> None:
    body = body_of(
        {
            "messages": [
                {"role": "user", "content": "First."},
                {"role": "user", "content": "Second."},
                {"role": "assistant", "content": "A."},
                {"role": "assistant", "content": [{"type": "text", "text": "B."}]},
                {"role": "user", "content": "  "},  # whitespace only: dropped, as the API wants
                {"role": "user", "content": "Third."},
            ]
        }
    )
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "First."}, {"type": "text", "text": "Second."}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "A."}, {"type": "text", "text": "B."}]},
        {"role": "user", "content": "Third."},
    ]


def one_turn(*parts: dict[str, Any], key: str = "messages") -> dict[str, Any]:
    """An item's input of one user turn made of `parts`."""
    return {key: [{"role": "user", "content": list(parts)}]}


def test_images_as_base64_or_url_sources() -> None:
    inline = {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"}}
    linked = {"type": "image_url", "image_url": {"url": "https://example.com/b.png", "detail": "high"}}
    body = body_of(one_turn({"type": "text", "text": "Compare these."}, inline, linked), operation="vision")
    assert body["messages"][0]["content"] == [
        {"type": "text", "text": "Compare these."},
        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQ"}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/b.png"}},
    ]


def test_an_image_of_another_type_than_its_url_names_goes_as_the_type_its_bytes_are() -> None:
    # Given a PNG its data: URL calls a JPEG (Anthropic refuses an image not of its media_type)
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg=="
    inline = {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{png}"}}
    body = body_of(one_turn({"type": "text", "text": "What is this?"}, inline), operation="vision")
    # Then it is sent as the PNG it is, and the API's contract takes it
    assert body["messages"][0]["content"][1]["source"] == {
        "type": "base64",
        "media_type": "image/png",
        "data": png,
    }
    assert message_violations(body) == []


def test_responses_api_input_with_image_parts() -> None:
    text = {"type": "input_text", "text": "What is this?"}
    body = body_of(
        one_turn(text, {"type": "input_image", "image_url": "https://example.com/c.webp"}, key="input")
    )
    assert body["messages"][0]["content"][1] == {
        "type": "image",
        "source": {"type": "url", "url": "https://example.com/c.webp"},
    }
    assert body_of({"input": "Just text"})["messages"] == [{"role": "user", "content": "Just text"}]


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather at a place.",
        "parameters": {"type": "object", "properties": {"location": {"type": "string"}}},
        "strict": True,
    },
}


def test_tools_and_tool_choice() -> None:
    body = body_of({"input": "Weather?", "tools": [WEATHER], "tool_choice": "required"})
    assert body["tools"] == [
        {
            "name": "get_weather",
            "description": "The weather at a place.",
            "input_schema": {"type": "object", "properties": {"location": {"type": "string"}}},
            "strict": True,
        }
    ]
    assert body["tool_choice"] == {"type": "any"}
    choices = {
        "auto": {"type": "auto"},
        "none": {"type": "none"},
        "required": {"type": "any"},
    }
    for given, expected in choices.items():
        assert t.tool_choice(given) == expected
    named = {"type": "function", "function": {"name": "get_weather"}}
    assert t.tool_choice(named) == {"type": "tool", "name": "get_weather"}
    flat = {"type": "function", "name": "lookup"}  # the Responses API's tool form
    assert t.tool(flat) == {"name": "lookup", "input_schema": {"type": "object", "properties": {}}}
    assert "tool_choice" not in body_of({"input": "Hi", "tool_choice": "auto"})  # no tools: no choice


def test_tools_anthropic_cannot_run_and_unknown_choices_are_refused() -> None:
    refused = [
        {"input": "Search", "tools": [{"type": "file_search", "vector_store_ids": ["vs_1"]}]},
        {"input": "Search", "tools": [{"type": "web_search", "search_context_size": "high"}]},
        {"input": "Search", "tools": [{"type": "web_search", "user_location": {"type": "exact"}}]},
        {"input": "Search", "tools": [{"type": "web_search", "max_uses": 0}]},
        {
            "input": "Search",
            "tools": [{"type": "web_search", "allowed_domains": ["a"], "blocked_domains": ["b"]}],
        },
        {
            "input": "Run",
            "tools": [{"type": "code_interpreter", "container": {"type": "auto", "file_ids": ["f"]}}],
        },
        {"input": "Run", "tools": [{"type": "code_interpreter", "container": "cntr_123"}]},
        {"input": "Hi", "tools": [{**WEATHER, "function": {"name": "web_search"}}, {"type": "web_search"}]},
        {"input": "Hi", "tools": [{"type": "function", "name": "f", "parameters": {"type": "array"}}]},
    ]
    for payload in refused:
        with pytest.raises(base.PermanentProviderError) as raised:
            body_of(payload)
        assert raised.value.code == "unsupported_parameter", payload
    undeclared = [
        {"input": "Hi", "tools": [WEATHER], "tool_choice": {"type": "function", "name": "other"}},
        {"input": "Hi", "tools": [WEATHER], "tool_choice": {"type": "web_search_preview"}},
        {"input": "Hi", "tool_choice": "required"},
    ]
    for payload in undeclared:
        with pytest.raises(base.PermanentProviderError) as raised:
            body_of(payload)
        assert raised.value.code == "invalid_item", payload
    with pytest.raises(base.PermanentProviderError):
        t.tool_choice("sometimes")


def test_hosted_tools_become_server_tools_with_their_settings() -> None:
    body = body_of(
        {
            "input": "Search and compute",
            "tools": [
                WEATHER,
                {
                    "type": "web_search_preview",
                    "filters": {"allowed_domains": ["example.com"]},
                    "user_location": {
                        "type": "approximate",
                        "city": "Paris",
                        "country": "FR",
                        "region": None,
                    },
                },
                {"type": "code_interpreter", "container": {"type": "auto"}},
            ],
            "tool_choice": {"type": "web_search_preview"},
        }
    )
    assert body["tools"][1:] == [
        {
            "type": "web_search_20250305",
            "name": "web_search",
            "allowed_domains": ["example.com"],
            "user_location": {"type": "approximate", "city": "Paris", "country": "FR"},
        },
        {"type": "code_execution_20250522", "name": "code_execution"},
    ]
    assert body["tool_choice"] == {"type": "tool", "name": "web_search"}
    native = body_of(
        {"input": "Hi", "tools": [{"type": "web_search", "max_uses": 2, "blocked_domains": ["x.io"]}]}
    )
    assert native["tools"] == [
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 2, "blocked_domains": ["x.io"]}
    ]
    assert body_of({"input": "Hi", "tools": [{"type": "code_interpreter"}], "tool_choice": "required"})[
        "tool_choice"
    ] == {"type": "any"}


def test_tool_history_becomes_tool_use_and_tool_result_blocks() -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"q": 1}'}}
    body = body_of(
        {
            "messages": [
                {"role": "user", "content": "Weather?"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_1", "content": "Sunny"},
                {"role": "user", "content": "Thanks, and tomorrow?"},
            ],
            "tools": [WEATHER],
        }
    )
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"q": 1}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "Sunny"},
                {"type": "text", "text": "Thanks, and tomorrow?"},
            ],
        },
    ]
    broken = {**call, "function": {"name": "get_weather", "arguments": "{not json"}}
    with pytest.raises(base.PermanentProviderError) as raised:
        body_of({"messages": [{"role": "assistant", "content": "", "tool_calls": [broken]}]})
    assert raised.value.code == "invalid_item"


def test_sampling_options_and_stop_sequences() -> None:
    body = body_of({"input": "Hi", "temperature": 0.2, "top_p": 0.9, "stop": "END"})
    assert (body["temperature"], body["top_p"], body["stop_sequences"]) == (0.2, 0.9, ["END"])
    fixed = body_of({"input": "Hi", "temperature": 0.2, "top_p": 0.9}, sampling=False)
    assert "temperature" not in fixed and "top_p" not in fixed  # a model that takes none
    assert body_of({"input": "Hi", "temperature": 1})["temperature"] == 1
    # OpenAI's temperatures go to 2, Anthropic's to 1: a higher one is sent as Anthropic's highest
    assert body_of({"input": "Hi", "temperature": 1.5})["temperature"] == 1
    for payload in (
        {"input": "Hi", "seed": 7},  # Anthropic has no seed
        {"input": "Hi", "stop": ["a", " ", "b"]},  # blank stop sequences are refused
        {"messages": [{"role": "user", "content": "Hi", "name": "ann"}]},  # no participant names
        {
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "image_url", "image_url": "data:image/bmp;base64,Qk0="}],
                }
            ]
        },
    ):
        with pytest.raises(base.PermanentProviderError) as raised:
            body_of(payload)
        assert raised.value.code == "unsupported_parameter", payload


def test_turns_the_api_refuses_are_mended_or_refused() -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
    reordered = body_of(
        {
            "messages": [
                {"role": "user", "content": "Weather?"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "user", "content": "Quick please"},
                {"role": "tool", "tool_call_id": "call_1", "content": "Sunny"},
                {"role": "assistant", "content": "It is sunny.  "},
            ],
            "tools": [WEATHER],
        }
    )
    assert [b["type"] for b in reordered["messages"][2]["content"]] == ["tool_result", "text"]
    assert reordered["messages"][3] == {"role": "assistant", "content": "It is sunny."}
    for messages in (
        [{"role": "assistant", "content": "I open."}, {"role": "user", "content": "Hi"}],
        [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "user", "content": "No result given"},
        ],
        [{"role": "user", "content": "Hi"}, {"role": "tool", "tool_call_id": "call_9", "content": "stray"}],
    ):
        with pytest.raises(base.PermanentProviderError) as raised:
            body_of({"messages": messages, "tools": [WEATHER]})
        assert raised.value.code in ("unsupported_parameter", "invalid_item"), messages


def test_max_tokens_comes_from_the_request_else_the_lane() -> None:
    assert body_of({"input": "Hi"}, max_output_tokens=300)["max_tokens"] == 300
    assert body_of({"input": "Hi"}, max_output_tokens=0)["max_tokens"] == 8192
    vendor = Vendor(wire(fixture("message.json")), wire(fixture("message.json")))
    vendor.sync(**{"claude-sonnet-4": 64_000}).complete(request({"input": "Hi"}, max_output_tokens=0))
    assert vendor.body()["max_tokens"] == 64_000
    vendor.sync().complete(request({"input": "Hi"}, max_output_tokens=0))
    assert vendor.body()["max_tokens"] == DEFAULT_OUTPUT_TOKENS


def test_structured_output_as_a_json_schema() -> None:
    schema = {"type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]}
    given = {"type": "json_schema", "json_schema": {"name": "label", "schema": schema, "strict": True}}
    body = body_of({"input": "Classify", "response_format": given})
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": schema}}
    # JSON mode without a schema has no Anthropic form: it is asked for in the system prompt
    body = body_of(
        {"input": "Classify", "instructions": "Be brief.", "response_format": {"type": "json_object"}}
    )
    assert "output_config" not in body
    assert body["system"] == "Be brief.\n\nAnswer with one valid JSON object and nothing else."


def test_embeddings_and_empty_items_are_refused_without_a_call() -> None:
    vendor = Vendor()
    embedding = request({"input": "vector me"}, operation="embeddings", max_output_tokens=0)
    for call in (vendor.sync().complete, vendor.sync().stream, lambda r: vendor.batches().submit([r])):
        with pytest.raises(base.PermanentProviderError) as raised:
            call(embedding)
        assert raised.value.code == "unsupported_operation"
    with pytest.raises(base.PermanentProviderError) as empty:
        body_of({"messages": [{"role": "system", "content": "Only a system prompt"}]})
    assert empty.value.code == "invalid_item"
    assert vendor.calls == []


def test_batch_request_line_and_stream_flag() -> None:
    line = t.batch_request(request({"input": "Hi"}), default_max_tokens=1)
    assert set(line) == {"custom_id", "params"} and "stream" not in line["params"]
    assert t.messages_body(request({"input": "Hi"}), default_max_tokens=1, stream=True)["stream"] is True


def test_make_sync_and_make_batch_read_the_lanes_limits() -> None:
    deployed = load_deployment(builtin_catalog(), "test").endpoints["anthropic"]
    limits = dict(deployed.output_limits)
    assert limits == lane_output_limits(builtin_catalog().lanes, "anthropic")
    assert limits["claude-sonnet-4"] == 64_000 and limits["claude-3-5-haiku"] == 8_192
    sync = make_sync(replace(ENDPOINT, output_limits=limits), "sk-ant-test")
    local = ProviderEndpoint("anthropic", "anthropic", base_url="http://127.0.0.1:9/anthropic")
    batch = make_batch(local, None)
    assert sync.output_limits == limits and sync.http.base_url.rstrip("/") == DEFAULT_BASE_URL
    assert batch.http.base_url.rstrip("/") == "http://127.0.0.1:9/anthropic"
    assert make_sync(ENDPOINT, "k", output_limits={}).output_limits == {}
