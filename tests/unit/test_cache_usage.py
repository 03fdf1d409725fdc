"""Usage as billed (#32): every adapter maps its vendor's prompt-cache counts from a
vendor-shaped answer into `Usage.cached_input_tokens` / `cache_write_input_tokens`, with
`prompt_tokens` still counting all input; an answer without them keeps its old usage."""

from __future__ import annotations

from batchroute.domain.catalog.pricing import CacheTokens, TokenUsage, UsageFields
from batchroute.domain.chat.holds import ChatOutcome
from batchroute.domain.compat.batches import vendor_body
from batchroute.domain.workflow.results import ArtifactRow
from batchroute.providers import base
from batchroute.providers.anthropic import transform as anthropic
from batchroute.providers.bedrock import transform as bedrock
from batchroute.providers.gemini import transform as gemini
from batchroute.providers.openai import transform as openai


def _chat_completion(usage: dict[str, object]) -> dict[str, object]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1741569952,
        "model": "gpt-4.1-mini-2025-04-14",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "Hi."}, "finish_reason": "stop"}
        ],
        "usage": usage,
    }


def test_openai_chat_cached_tokens_are_within_prompt_tokens() -> None:
    body = _chat_completion(
        {
            "prompt_tokens": 2006,
            "completion_tokens": 300,
            "total_tokens": 2306,
            "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0},
        }
    )
    usage = openai.chat_result("seq-0", body).usage
    assert usage == base.Usage(2006, 300, cached_input_tokens=1920)
    assert usage.fresh_input_tokens == 86
    assert usage.to_dict() == {"prompt_tokens": 2006, "completion_tokens": 300, "cached_input_tokens": 1920}


def test_a_compatible_host_without_details_bills_all_input_fresh() -> None:
    body = _chat_completion({"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15})
    usage = openai.chat_result("seq-0", body).usage
    assert usage == base.Usage(12, 3)
    assert usage.to_dict() == {"prompt_tokens": 12, "completion_tokens": 3}


def test_openai_responses_reads_cache_reads_and_writes() -> None:
    body = {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "gpt-4.1-mini-2025-04-14",
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Hi.", "annotations": []}],
            }
        ],
        "usage": {
            "input_tokens": 5000,
            "input_tokens_details": {"cached_tokens": 3072, "cache_write_tokens": 1024},
            "output_tokens": 40,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 5040,
        },
    }
    usage = openai.response_result("seq-1", body).usage
    assert (usage.prompt_tokens, usage.cached_input_tokens, usage.cache_write_input_tokens) == (
        5000,
        3072,
        1024,
    )
    assert usage.fresh_input_tokens == 904


def test_openai_stream_keeps_the_cached_count_in_its_rebuilt_body() -> None:
    stream = openai.StreamAccumulator("seq-2")
    stream.add(
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [
                {"index": 0, "delta": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}
            ],
        }
    )
    stream.add(
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [],
            "usage": {
                "prompt_tokens": 1500,
                "completion_tokens": 2,
                "total_tokens": 1502,
                "prompt_tokens_details": {"cached_tokens": 1280},
            },
        }
    )
    result = stream.result()
    assert result.usage.cached_input_tokens == 1280
    assert result.raw is not None
    assert result.raw["usage"]["prompt_tokens_details"] == {"cached_tokens": 1280}


def test_anthropic_cache_reads_and_writes_are_input_kept_apart() -> None:
    usage = anthropic.message_usage(
        {
            "input_tokens": 21,
            "cache_creation_input_tokens": 188086,
            "cache_read_input_tokens": 0,
            "output_tokens": 393,
        }
    )
    assert usage == base.Usage(21 + 188086, 393, cached_input_tokens=0, cache_write_input_tokens=188086)
    read = anthropic.message_usage(
        {"input_tokens": 21, "cache_read_input_tokens": 188086, "output_tokens": 393}
    )
    assert (read.prompt_tokens, read.cached_input_tokens, read.fresh_input_tokens) == (188107, 188086, 21)


def test_gemini_cached_content_is_within_the_prompt_count() -> None:
    usage = gemini.usage(
        {
            "promptTokenCount": 4200,
            "cachedContentTokenCount": 4096,
            "candidatesTokenCount": 80,
            "totalTokenCount": 4280,
        }
    )
    assert usage == base.Usage(4200, 80, cached_input_tokens=4096)
    assert gemini.usage({"promptTokenCount": 10, "candidatesTokenCount": 2}) == base.Usage(10, 2)


def test_bedrock_converse_cache_counts_are_added_to_input() -> None:
    response = {
        "output": {"message": {"role": "assistant", "content": [{"text": "Hi."}]}},
        "stopReason": "end_turn",
        "usage": {
            "inputTokens": 30,
            "outputTokens": 12,
            "totalTokens": 3042,
            "cacheReadInputTokens": 2000,
            "cacheWriteInputTokens": 1000,
        },
        "metrics": {"latencyMs": 300},
    }
    usage = bedrock.converse_result("seq-3", response).usage
    assert usage == base.Usage(3030, 12, cached_input_tokens=2000, cache_write_input_tokens=1000)
    assert bedrock.converse_usage_body(usage) == response["usage"]
    plain = bedrock.converse_usage({"inputTokens": 30, "outputTokens": 12, "totalTokens": 42})
    assert plain == base.Usage(30, 12)


def test_usage_sums_the_cache_counts() -> None:
    total = base.Usage(100, 5, cached_input_tokens=60) + base.Usage(50, 1, cache_write_input_tokens=40)
    assert total == base.Usage(150, 6, cached_input_tokens=60, cache_write_input_tokens=40)
    assert total.fresh_input_tokens == 50


# -- the split where token counts are shown ---------------------------------------------------


def _row(usage: UsageFields) -> ArtifactRow:
    return {
        "customer_item_id": "a",
        "sequence_number": 0,
        "status": "completed",
        "output": {"type": "message", "role": "assistant", "content": "Hi.", "finish_reason": "stop"},
        "error": None,
        "raw": None,
        "model": "gpt-4o-mini",
        "provider": "openai",
        "usage": usage,
    }


def test_compat_output_lines_fill_the_vendor_cache_fields_from_the_real_counts() -> None:
    row = _row({"prompt_tokens": 2000, "completion_tokens": 10, "cached_input_tokens": 1536})
    chat = vendor_body("/v1/chat/completions", row, request_id="r1", created=1)
    assert chat["usage"]["prompt_tokens_details"] == {"cached_tokens": 1536}
    response = vendor_body("/v1/responses", row, request_id="r1", created=1)
    assert response["usage"]["input_tokens_details"] == {"cached_tokens": 1536, "cache_write_tokens": 0}
    plain = vendor_body(
        "/v1/chat/completions", _row({"prompt_tokens": 20, "completion_tokens": 1}), request_id="r", created=1
    )
    assert "prompt_tokens_details" not in plain["usage"]


def test_a_direct_request_record_keeps_the_cache_counts() -> None:
    outcome = ChatOutcome(
        completed=True,
        at="2026-11-29T12:00:00Z",
        usage=TokenUsage(4000, 20, CacheTokens(cached_input_tokens=3500)),
        latest_error=None,
        billing={},
    )
    assert outcome.to_changes()["usage"] == {
        "prompt_tokens": 4000,
        "completion_tokens": 20,
        "cached_input_tokens": 3500,
    }


def test_the_cache_split_is_written_and_read_in_one_shape() -> None:
    split = CacheTokens(cached_input_tokens=700, cache_write_input_tokens=0)
    assert split.to_fields() == {"cached_input_tokens": 700}
    assert split.to_totals() == {"cached_input": 700}
    assert CacheTokens.from_fields(split.to_fields()) == split
    assert CacheTokens.from_fields({"prompt_tokens": 9}) == CacheTokens()
    assert CacheTokens().to_fields() == {} and CacheTokens().to_totals() == {}
    assert split + CacheTokens(1, 2) == CacheTokens(701, 2)
