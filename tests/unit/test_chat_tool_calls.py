"""Function calls, refusals and content filters through every adapter's direct (streamed) path
(issue: direct chat billed tool calls it never returned). Each vendor's stream is written as
its published contract shows it: OpenAI's ChatCompletionStreamResponseDelta and Responses
streaming events (tests/fixtures/vendors/openai/openapi.yaml), Anthropic's Messages stream
(tool_use content_block_start + input_json_delta), Gemini's streamGenerateContent chunks
(functionCall parts, each whole), Bedrock's ConverseStream (toolUse contentBlockStart and
toolUse input deltas). And the chat objects the service answers validate against OpenAI's
schemas."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from batchroute.domain.chat.objects import ServedBy, chat_completion, chunk, tool_call_chunks
from batchroute.providers import base, simulated
from batchroute.providers.anthropic import transform as anthropic
from batchroute.providers.bedrock import transform as bedrock
from batchroute.providers.gemini import transform as gemini
from batchroute.providers.openai import transform as openai
from batchroute_tools.contracts.openai import answer_violations

OPENAI_DOCUMENT = Path(__file__).parents[1] / "fixtures" / "vendors" / "openai" / "openapi.yaml"
WEATHER = {
    "id": "call_abc",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
}


@cache
def openai_document() -> dict[str, Any]:
    with OPENAI_DOCUMENT.open(encoding="utf-8") as handle:
        document: dict[str, Any] = yaml.load(handle, Loader=yaml.CSafeLoader)
    return document


def deltas(acc: Any, events: list[dict[str, Any]]) -> list[base.StreamDelta]:
    """What an adapter yields for `events`: one StreamDelta per event that adds something."""
    found = [acc.delta(acc.add(event)) for event in events]
    return [d for d in found if d is not None]


def assembled(found: list[base.StreamDelta]) -> list[dict[str, Any]]:
    return base.joined_tool_calls(f for d in found for f in d.tool_calls)


def openai_chunk(delta: dict[str, Any] | None, finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-v",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": []
        if delta is None
        else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


# -- OpenAI chat completions ---------------------------------------------------------------
def test_openai_stream_passes_tool_call_fragments_and_keeps_the_calls() -> None:
    acc = openai.StreamAccumulator("seq-0")
    first = {
        "index": 0,
        "id": "call_abc",
        "type": "function",
        "function": {"name": "get_weather", "arguments": ""},
    }
    found = deltas(
        acc,
        [
            openai_chunk({"role": "assistant", "content": None, "tool_calls": [first], "refusal": None}),
            openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}),
            openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
            openai_chunk({}, "tool_calls"),
            {
                **openai_chunk(None),
                "usage": {"prompt_tokens": 50, "completion_tokens": 15, "total_tokens": 65},
            },
        ],
    )
    assert [f.to_dict() for d in found for f in d.tool_calls] == [
        first,
        {"index": 0, "function": {"arguments": '{"city":'}},
        {"index": 0, "function": {"arguments": '"Paris"}'}},
    ]
    assert all(d.text == "" for d in found)
    result = acc.result()
    assert result.output == {
        "type": "message",
        "role": "assistant",
        "content": "",
        "finish_reason": "tool_calls",
        "tool_calls": [WEATHER],
    }
    assert result.usage == base.Usage(50, 15)  # billing as before
    assert result.raw is not None
    assert result.raw["choices"][0]["message"] == {
        "role": "assistant",
        "content": None,
        "refusal": None,
        "tool_calls": [WEATHER],
    }


def test_openai_stream_keeps_a_refusal_and_a_content_filter() -> None:
    acc = openai.StreamAccumulator("seq-0")
    found = deltas(
        acc,
        [
            openai_chunk({"role": "assistant", "content": None, "refusal": ""}),
            openai_chunk({"refusal": "I can't help with that."}),
            openai_chunk({}, "stop"),
        ],
    )
    assert [(d.text, d.refusal) for d in found] == [("", "I can't help with that.")]
    assert acc.result().output == {
        "type": "message",
        "role": "assistant",
        "content": "",
        "finish_reason": "stop",
        "refusal": "I can't help with that.",
    }
    filtered = openai.StreamAccumulator("seq-0")
    deltas(filtered, [openai_chunk({"content": "Partial"}), openai_chunk({}, "content_filter")])
    assert filtered.result().output == {
        "type": "message",
        "role": "assistant",
        "content": "Partial",
        "finish_reason": "content_filter",
    }


@pytest.mark.parametrize(
    ("vendor", "ours"),
    [
        ("stop", "stop"),
        ("length", "length"),
        ("tool_calls", "tool_calls"),
        ("function_call", "tool_calls"),
        ("content_filter", "content_filter"),
        (None, "stop"),
    ],
)
def test_openai_finish_reasons(vendor: str | None, ours: str) -> None:
    assert openai.finish_reason(vendor) == ours


def test_openai_responses_stream_passes_function_calls_and_refusals() -> None:
    call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_abc",
        "name": "get_weather",
        "arguments": "",
    }
    whole = {**call, "arguments": '{"city":"Paris"}', "status": "completed"}
    response = {
        "object": "response",
        "status": "completed",
        "output": [whole],
        "usage": {"input_tokens": 5, "output_tokens": 7},
    }
    acc = openai.ResponseStream("seq-0")
    found = deltas(
        acc,
        [
            {"type": "response.output_item.added", "output_index": 0, "item": call},
            {
                "type": "response.function_call_arguments.delta",
                "output_index": 0,
                "item_id": "fc_1",
                "delta": '{"city":',
            },
            {
                "type": "response.function_call_arguments.delta",
                "output_index": 0,
                "item_id": "fc_1",
                "delta": '"Paris"}',
            },
            {"type": "response.refusal.delta", "output_index": 1, "content_index": 0, "delta": "No."},
            {"type": "response.completed", "response": response},
        ],
    )
    assert assembled(found) == [WEATHER]
    assert [d.refusal for d in found if d.refusal] == ["No."]
    assert acc.result is not None and acc.result.output is not None
    assert acc.result.output["tool_calls"] == [WEATHER]
    assert acc.result.output["finish_reason"] == "tool_calls"


# -- Anthropic ----------------------------------------------------------------------------
def test_anthropic_stream_passes_tool_use_as_openai_tool_call_fragments() -> None:
    acc = anthropic.StreamAccumulator("seq-0")
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude",
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 40, "output_tokens": 1},
    }
    found = deltas(
        acc,
        [
            {"type": "message_start", "message": message},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Checking."}},
            {"type": "content_block_stop", "index": 0},
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}},
            },
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": ""},
            },
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": '{"city": "Pa'},
            },
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": 'ris"}'},
            },
            {"type": "content_block_stop", "index": 1},
            {
                "type": "content_block_start",
                "index": 2,
                "content_block": {"type": "tool_use", "id": "toolu_2", "name": "get_time", "input": {}},
            },
            {"type": "content_block_stop", "index": 2},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 30},
            },
            {"type": "message_stop"},
        ],
    )
    assert "".join(d.text for d in found) == "Checking."
    fragments = [f.to_dict() for d in found for f in d.tool_calls]
    assert fragments[0] == {
        "index": 0,
        "id": "toolu_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": ""},
    }
    assert fragments[1:3] == [
        {"index": 0, "function": {"arguments": '{"city": "Pa'}},
        {"index": 0, "function": {"arguments": 'ris"}'}},
    ]
    streamed = assembled(found)
    assert [json.loads(c["function"]["arguments"]) for c in streamed] == [{"city": "Paris"}, {}]
    assert [(c["id"], c["function"]["name"]) for c in streamed] == [
        ("toolu_1", "get_weather"),
        ("toolu_2", "get_time"),
    ]
    output = acc.result().output
    assert output is not None and output["finish_reason"] == "tool_calls"
    assert [(c["id"], json.loads(c["function"]["arguments"])) for c in output["tool_calls"]] == [
        ("toolu_1", {"city": "Paris"}),
        ("toolu_2", {}),
    ]
    assert found[0].usage == base.Usage(40, 1)  # the usage so far, as before
    assert acc.result().usage == base.Usage(40, 30)


def test_anthropic_refusal_stop_is_a_content_filter() -> None:
    assert anthropic.finish_reason("refusal") == "content_filter"
    assert anthropic.finish_reason("tool_use") == "tool_calls"


# -- Gemini -------------------------------------------------------------------------------
def test_gemini_stream_passes_each_function_call_whole() -> None:
    acc = gemini.StreamAccumulator("seq-0")

    def part_chunk(parts: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        if finish:
            candidate["finishReason"] = finish
        return {
            "candidates": [candidate],
            "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 4},
            "modelVersion": "gemini-2.5-flash",
            "responseId": "r1",
        }

    found = deltas(
        acc,
        [
            part_chunk([{"text": "Let me look."}]),
            part_chunk([{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}]),
            part_chunk([{"functionCall": {"id": "fc-2", "name": "get_time", "args": {}}}], "STOP"),
        ],
    )
    assert [f.to_dict() for d in found for f in d.tool_calls] == [
        {
            "index": 0,
            "id": "call_r1_0",  # Gemini gave none: the response's id and the call's place
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
        },
        {"index": 1, "id": "fc-2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}},
    ]
    output = acc.result().output
    assert (
        output is not None and output["finish_reason"] == "tool_calls" and output["content"] == "Let me look."
    )
    assert [(c["id"], c["function"]["arguments"]) for c in output["tool_calls"]] == [
        ("call_r1_0", '{"city":"Paris"}'),
        ("fc-2", "{}"),
    ]
    assert output["tool_calls"] == [{k: v for k, v in c.items() if k != "index"} for c in assembled(found)]


# -- Bedrock ------------------------------------------------------------------------------
def test_bedrock_converse_stream_passes_tool_use_fragments() -> None:
    acc = bedrock.StreamAccumulator("seq-0")
    found = deltas(
        acc,
        [
            {"messageStart": {"role": "assistant"}},
            {"contentBlockDelta": {"delta": {"text": "On it."}, "contentBlockIndex": 0}},
            {"contentBlockStop": {"contentBlockIndex": 0}},
            {
                "contentBlockStart": {
                    "start": {"toolUse": {"toolUseId": "tooluse_1", "name": "get_weather"}},
                    "contentBlockIndex": 1,
                }
            },
            {"contentBlockDelta": {"delta": {"toolUse": {"input": '{"city":'}}, "contentBlockIndex": 1}},
            {"contentBlockDelta": {"delta": {"toolUse": {"input": '"Paris"}'}}, "contentBlockIndex": 1}},
            {"contentBlockStop": {"contentBlockIndex": 1}},
            {
                "contentBlockStart": {
                    "start": {"toolUse": {"toolUseId": "tooluse_2", "name": "get_time"}},
                    "contentBlockIndex": 2,
                }
            },
            {"contentBlockStop": {"contentBlockIndex": 2}},
            {"messageStop": {"stopReason": "tool_use"}},
            {
                "metadata": {
                    "usage": {"inputTokens": 30, "outputTokens": 12, "totalTokens": 42},
                    "metrics": {"latencyMs": 5},
                }
            },
        ],
    )
    assert "".join(d.text for d in found) == "On it."
    fragments = [f.to_dict() for d in found for f in d.tool_calls]
    assert fragments[0] == {
        "index": 0,
        "id": "tooluse_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": ""},
    }
    streamed = assembled(found)
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in streamed] == [
        ("tooluse_1", "get_weather", '{"city":"Paris"}'),
        ("tooluse_2", "get_time", "{}"),
    ]
    result = acc.result()
    assert result.output is not None and result.output["finish_reason"] == "tool_calls"
    assert [c["id"] for c in result.output["tool_calls"]] == ["tooluse_1", "tooluse_2"]
    assert result.usage == base.Usage(30, 12)


@pytest.mark.parametrize("stop", ["guardrail_intervened", "content_filtered"])
def test_bedrock_filters_are_content_filter(stop: str) -> None:
    acc = bedrock.StreamAccumulator("seq-0")
    deltas(
        acc,
        [
            {"contentBlockDelta": {"delta": {"text": "Par"}, "contentBlockIndex": 0}},
            {"messageStop": {"stopReason": stop}},
        ],
    )
    assert acc.result().output == {
        "type": "message",
        "role": "assistant",
        "content": "Par",
        "finish_reason": "content_filter",
    }


# -- the simulated provider ---------------------------------------------------------------
TOOLS = [
    {
        "type": "function",
        "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
    }
]


def sim_request(tool_choice: object) -> base.ProviderRequest:
    body: dict[str, Any] = {"messages": [{"role": "user", "content": "Weather?"}], "tools": TOOLS}
    if tool_choice is not None:
        body["tool_choice"] = tool_choice
    return base.ProviderRequest("seq-0", "item", "responses", "gpt-4o-mini", "gpt-4o-mini", body, 64)


@pytest.mark.parametrize("slug", ["openai", "anthropic", "google"])
def test_the_simulated_provider_streams_a_forced_call(slug: str) -> None:
    provider = simulated.SimulatedSyncProvider(slug, simulated.SimulationConfig(), sleeper=lambda _: None)
    events = list(provider.stream(sim_request("required")))
    found = [e for e in events if isinstance(e, base.StreamDelta)]
    [call] = assembled(found)
    assert call["function"] == {"name": "get_weather", "arguments": "{}"} and call["id"].startswith(
        "call_sim"
    )
    end = events[-1]
    assert isinstance(end, base.StreamEnd) and end.result.output is not None
    assert end.result.output["finish_reason"] == "tool_calls" and end.result.output["tool_calls"] == [call]
    named = {"type": "function", "function": {"name": "get_weather"}}
    assert simulated.forced_function(sim_request(named)) == "get_weather"
    assert simulated.forced_function(sim_request("auto")) is None  # may answer text: it does
    assert simulated.forced_function(sim_request(None)) is None


# -- what the service answers -------------------------------------------------------------
SERVED = ServedBy("chatcmpl-1", 1, "gpt-4o-mini", "openai")


def openai_shape(body: Any) -> dict[str, Any]:
    """The body less `provider`, the one field the service adds to OpenAI's (docs/chat.md)."""
    return {k: v for k, v in dict(body).items() if k != "provider"}


def test_a_completion_with_tool_calls_is_openais_shape() -> None:
    body = chat_completion(
        SERVED,
        content="",
        finish_reason="tool_calls",
        prompt_tokens=5,
        completion_tokens=7,
        tool_calls=[WEATHER],
    )
    message = body["choices"][0]["message"]
    assert message == {"role": "assistant", "content": None, "refusal": None, "tool_calls": [WEATHER]}
    assert "system_fingerprint" not in body  # OpenAI's is a string, never null: left out
    assert answer_violations(openai_document(), "CreateChatCompletionResponse", openai_shape(body)) == []


def test_a_refusal_and_plain_text_are_openais_shape() -> None:
    refused = chat_completion(
        SERVED, content="", finish_reason="stop", prompt_tokens=5, completion_tokens=7, refusal="No."
    )
    assert refused["choices"][0]["message"] == {"role": "assistant", "content": None, "refusal": "No."}
    text = chat_completion(
        SERVED, content="Hi", finish_reason="content_filter", prompt_tokens=5, completion_tokens=1
    )
    assert text["choices"][0]["message"] == {"role": "assistant", "content": "Hi", "refusal": None}
    for body in (refused, text):
        assert answer_violations(openai_document(), "CreateChatCompletionResponse", openai_shape(body)) == []


def test_chunks_with_tool_calls_and_refusals_are_openais_shape() -> None:
    fragments = [
        f.to_dict()
        for f in (base.ToolCallDelta(0, "call_abc", "get_weather"), base.ToolCallDelta(0, arguments="{}"))
    ]
    bodies = [
        chunk(SERVED, delta={"role": "assistant", "content": ""}, include_usage=True),
        chunk(SERVED, delta={"tool_calls": fragments}, include_usage=True),  # type: ignore[typeddict-item]
        chunk(SERVED, delta={"tool_calls": tool_call_chunks([WEATHER])}),  # type: ignore[list-item]
        chunk(SERVED, delta={"refusal": "No."}),
        chunk(SERVED, delta={}, finish_reason="tool_calls", include_usage=True),
    ]
    for body in bodies:
        assert "system_fingerprint" not in body
        assert (
            answer_violations(openai_document(), "CreateChatCompletionStreamResponse", openai_shape(body))
            == []
        ), body
