"""What the vendors' streams say about usage and why they stopped, as the direct chat path
reads it (review of direct chat): Groq's usage in `x_groq.usage`, Gemini's usageMetadata on
every delta (a stream the client leaves is charged what the vendor counted), and a Responses
API answer its filter stopped."""

from __future__ import annotations

from typing import Any

from batchroute.providers import base
from batchroute.providers.gemini import transform as gemini
from batchroute.providers.openai import transform as openai


def host_chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "llama-3.1-8b-instant",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


def test_groq_usage_in_x_groq_is_the_streams_usage() -> None:
    # Given a Groq stream whose final chunk reports usage only in `x_groq` (groq-python's
    # ChatCompletionChunk.x_groq.usage), not in `usage`
    acc = openai.StreamAccumulator("chat")
    acc.add(host_chunk({"role": "assistant", "content": "Hi"}))
    x_groq = {"id": "req_1", "usage": {"prompt_tokens": 40, "completion_tokens": 400, "total_tokens": 440}}
    acc.add(host_chunk({}, "stop", x_groq=x_groq))
    # Then that is the answer's usage
    assert (acc.usage.prompt_tokens, acc.usage.completion_tokens) == (40, 400)
    assert (acc.result().usage.prompt_tokens, acc.result().usage.completion_tokens) == (40, 400)


def test_usage_wins_over_x_groq_when_both_are_sent() -> None:
    acc = openai.StreamAccumulator("chat")
    x_groq = {"usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
    usage = {"prompt_tokens": 40, "completion_tokens": 7, "total_tokens": 47}
    acc.add({"id": "c1", "choices": [], "usage": usage, "x_groq": x_groq})
    assert (acc.usage.prompt_tokens, acc.usage.completion_tokens) == (40, 7)


def gemini_chunk(text: str, candidates_tokens: int | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"promptTokenCount": 1200}
    if candidates_tokens is not None:
        meta["candidatesTokenCount"] = candidates_tokens
    return {
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}}],
        "usageMetadata": meta,
        "modelVersion": "gemini-2.0-flash",
    }


def test_gemini_deltas_carry_the_usage_reported_so_far() -> None:
    # Given a Gemini stream whose every chunk reports the prompt and the output so far
    acc = gemini.StreamAccumulator("chat")
    first = acc.delta(acc.add(gemini_chunk("lorem ipsum " * 10, None)))
    second = acc.delta(acc.add(gemini_chunk("dolor sit " * 10, 60)))
    # Then each delta carries it (the direct path keeps the latest: a stream the client leaves
    # is charged Gemini's counts, not the prompt estimate and one token per chunk)
    assert first is not None and first.usage == base.Usage(1200, 0)
    assert second is not None and second.usage == base.Usage(1200, 60)


def test_a_gemini_chunk_without_usage_metadata_leaves_the_delta_without_usage() -> None:
    acc = gemini.StreamAccumulator("chat")
    delta = acc.delta(acc.add({"candidates": [{"content": {"parts": [{"text": "hi"}]}}]}))
    assert delta is not None and delta.usage is None


def response(reason: str) -> dict[str, Any]:
    return {
        "status": "incomplete",
        "incomplete_details": {"reason": reason},
        "output": [{"type": "message", "content": [{"type": "output_text", "text": "partial"}]}],
        "usage": {"input_tokens": 5, "output_tokens": 3},
    }


def test_a_response_its_filter_stopped_finishes_content_filter() -> None:
    # Given a Responses API answer left `incomplete` by OpenAI's content filter
    result = openai.response_result("chat", response("content_filter"))
    # Then its finish reason says so (docs/chat.md: OpenAI's `content_filter`), not `stop`
    assert result.output is not None and result.output["finish_reason"] == "content_filter"


def test_a_response_cut_at_max_output_tokens_still_finishes_length() -> None:
    result = openai.response_result("chat", response("max_output_tokens"))
    assert result.output is not None and result.output["finish_reason"] == "length"
