"""Function calls and refusals through direct and queued chat, driven by the official `openai`
SDK (review: `tools` were sent to the vendor and billed, the calls never returned).

The direct tests put the real OpenAI adapter (OpenAIChat over VendorHttp) behind the `openai`
lane, its vendor an in-memory transport answering the chunks OpenAI streams for a forced call
(ChatCompletionStreamResponseDelta, tests/fixtures/vendors/openai/openapi.yaml)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.config import get_settings
from batchroute.providers import base, simulated
from batchroute.providers.http import VendorHttp
from batchroute.providers.openai.client import OpenAIChat
from batchroute_tools.contracts.openai import answer_violations
from batchroute_tools.local.provision import LocalStack
from tests.integration.batch_pipeline_support import run_until_done
from tests.integration.principals import TestOrg, chat_sdk, instant_chat_client, new_org
from tests.unit.test_chat_tool_calls import openai_document, openai_shape

MINI = "gpt-4o-mini"  # one lane: openai
MESSAGES: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]


def vendor_chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choices = (
        [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
    )
    return {
        "id": "chatcmpl-v",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": choices,
        **extra,
    }


def usage(completion: int) -> dict[str, Any]:
    return {"usage": {"prompt_tokens": 50, "completion_tokens": completion, "total_tokens": 50 + completion}}


FIRST = {
    "index": 0,
    "id": "call_abc",
    "type": "function",
    "function": {"name": "get_weather", "arguments": ""},
}
TOOL_STREAM = [
    vendor_chunk({"role": "assistant", "content": None, "tool_calls": [FIRST], "refusal": None}),
    vendor_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}),
    vendor_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
    vendor_chunk({}, "tool_calls"),
    vendor_chunk(None, **usage(15)),
]
REFUSAL_STREAM = [
    vendor_chunk({"role": "assistant", "content": None, "refusal": ""}),
    vendor_chunk({"refusal": "I can't help with that."}),
    vendor_chunk({}, "stop"),
    vendor_chunk(None, **usage(9)),
]
FILTER_STREAM = [
    vendor_chunk({"role": "assistant", "content": ""}),
    vendor_chunk({"content": "Partial"}),
    vendor_chunk({}, "content_filter"),
    vendor_chunk(None, **usage(1)),
]


class Vendor:
    """OpenAI's side of the adapter: answers each call with `events` as an SSE stream."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = TOOL_STREAM
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(json.loads(request.content))
        sse = (
            b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in self.events) + b"data: [DONE]\n\n"
        )
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=sse)


@pytest.fixture
def vendor() -> Vendor:
    return Vendor()


@pytest.fixture
def client(local_aws: LocalStack, vendor: Vendor, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    adapter = OpenAIChat(
        "openai", VendorHttp("http://vendor.test/v1", vendor="openai", transport=httpx.MockTransport(vendor))
    )
    simulated_stream = simulated.SimulatedSyncProvider.stream

    def stream(
        self: simulated.SimulatedSyncProvider, request: base.ProviderRequest
    ) -> Iterator[base.StreamEvent]:
        return adapter.stream(request) if self.slug == "openai" else simulated_stream(self, request)

    monkeypatch.setattr(simulated.SimulatedSyncProvider, "stream", stream)
    with instant_chat_client() as test_client:
        yield test_client


@pytest.fixture
def org(client: TestClient) -> TestOrg:
    return new_org(credit_usd="5")


def test_a_forced_call_comes_back_whole(client: TestClient, org: TestOrg, vendor: Vendor) -> None:
    # When the SDK asks for a completion that must call get_weather
    raw = chat_sdk(client, org).chat.completions.with_raw_response.create(
        model=MINI, messages=MESSAGES, tools=TOOLS, tool_choice="required"
    )
    completion = raw.parse()
    # Then the vendor was asked with the tools, and the call comes back as OpenAI gives it
    assert vendor.bodies[-1]["tools"] and vendor.bodies[-1]["tool_choice"] == "required"
    [choice] = completion.choices
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    [call] = choice.message.tool_calls or []
    assert call.type == "function" and call.id == "call_abc"
    assert (call.function.name, json.loads(call.function.arguments)) == ("get_weather", {"city": "Paris"})
    assert completion.usage is not None and (
        completion.usage.prompt_tokens,
        completion.usage.completion_tokens,
    ) == (50, 15)
    # And the body is OpenAI's CreateChatCompletionResponse (plus `provider`)
    assert (
        answer_violations(
            openai_document(), "CreateChatCompletionResponse", openai_shape(raw.http_response.json())
        )
        == []
    )


def test_a_streamed_forced_call_comes_in_openais_chunks(client: TestClient, org: TestOrg) -> None:
    # When the SDK streams it
    chunks = list(
        chat_sdk(client, org).chat.completions.create(
            model=MINI,
            messages=MESSAGES,
            tools=TOOLS,
            tool_choice="required",
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    # Then the fragments come as the vendor sent them, then finish_reason tool_calls, then usage
    fragments = [c.choices[0].delta.tool_calls for c in chunks if c.choices and c.choices[0].delta.tool_calls]
    assert [[f.model_dump(exclude_none=True) for f in group] for group in fragments] == [
        [FIRST],
        [{"index": 0, "function": {"arguments": '{"city":'}}],
        [{"index": 0, "function": {"arguments": '"Paris"}'}}],
    ]
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == [
        "tool_calls"
    ]
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 15
    for event in chunks:
        body = event.model_dump(mode="json", exclude_unset=True)
        assert (
            answer_violations(openai_document(), "CreateChatCompletionStreamResponse", openai_shape(body))
            == []
        )


def test_the_sdks_stream_helper_assembles_the_call(client: TestClient, org: TestOrg) -> None:
    with chat_sdk(client, org).chat.completions.stream(
        model=MINI, messages=MESSAGES, tools=TOOLS, tool_choice="required"
    ) as stream:
        final = stream.get_final_completion()
    [choice] = final.choices
    assert choice.finish_reason == "tool_calls"
    [call] = choice.message.tool_calls or []
    assert (call.id, call.function.name, call.function.arguments) == (
        "call_abc",
        "get_weather",
        '{"city":"Paris"}',
    )


def test_a_refusal_and_a_content_filter_come_back(client: TestClient, org: TestOrg, vendor: Vendor) -> None:
    service = chat_sdk(client, org)
    vendor.events = REFUSAL_STREAM
    refused = service.chat.completions.create(model=MINI, messages=MESSAGES).choices[0]
    assert refused.message.refusal == "I can't help with that." and refused.message.content is None
    streamed = list(service.chat.completions.create(model=MINI, messages=MESSAGES, stream=True))
    assert (
        "".join(c.choices[0].delta.refusal or "" for c in streamed if c.choices) == "I can't help with that."
    )
    vendor.events = FILTER_STREAM
    filtered = service.chat.completions.create(model=MINI, messages=MESSAGES).choices[0]
    assert (filtered.finish_reason, filtered.message.content) == ("content_filter", "Partial")


def test_a_queued_forced_call_keeps_its_tool_calls(
    client: TestClient, org: TestOrg, local_aws: LocalStack
) -> None:
    # Given a queued request that must call get_weather (the simulated vendor batch calls it)
    body = {"model": MINI, "messages": MESSAGES, "tools": TOOLS, "tool_choice": "required", "batch": True}
    job = client.post("/v1/chat/completions", json=body, headers=org.key_headers()).json()
    record = BatchRecords(get_settings().table_name("batches")).get(job["batch_id"])
    assert record is not None
    run_until_done(local_aws, str(record.execution_arn))
    done = client.get(f"/v1/chat/completions/{job['id']}", headers=org.key_headers()).json()
    # Then the job's completion carries the call
    assert done["status"] == "completed", done
    [choice] = done["result"]["choices"]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    [call] = choice["message"]["tool_calls"]
    assert call["type"] == "function" and call["function"] == {"name": "get_weather", "arguments": "{}"}
    assert (
        answer_violations(openai_document(), "CreateChatCompletionResponse", openai_shape(done["result"]))
        == []
    )
