"""The emulators' prompt caches (emulators/cache.py, docs/emulators.md), over HTTP and by
an injected clock: a request repeated within the vendor's cache lifetime reports cached
input tokens in the vendor's own usage fields, one repeated after it does not, and one below
the vendor's minimum cacheable length never does."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import botocore.session
import httpx
import pytest
from anthropic.types import Usage as AnthropicUsage
from google.genai.types import GenerateContentResponseUsageMetadata
from openai.types import CompletionUsage
from openai.types.responses import ResponseUsage
from pydantic import BaseModel

from batchroute_tools.emulators.anthropic import AnthropicEmulator
from batchroute_tools.emulators.bedrock import BedrockEmulator
from batchroute_tools.emulators.behaviour import Behaviour, EmulatorConfig, prompt_tokens
from batchroute_tools.emulators.gemini import GeminiEmulator
from batchroute_tools.emulators.openai import OpenAIEmulator
from batchroute_tools.emulators.server import EmulatorServer, Vendor

GPT = "gpt-4o-mini-2024-07-18"
LONG = " ".join(f"rule {i}: answer in plain words." for i in range(600))  # past every minimum
SHORT = "Answer in plain words."


class Clock(list[float]):
    """The injected clock: `clock.now += 10` moves it on."""

    now = property(lambda self: self[0], lambda self, value: self.__setitem__(0, value))


@pytest.fixture
def clock() -> Clock:
    return Clock([1_700_000_000.0])


def _serving(*vendors: Vendor) -> Iterator[str]:
    server = EmulatorServer(list(vendors)).start()
    try:
        yield server.base_url
    finally:
        server.stop()


@pytest.fixture
def openai_server(clock: Clock) -> Iterator[str]:
    behaviour = Behaviour(EmulatorConfig())
    emulator = OpenAIEmulator(
        behaviour, provider="openai", prefix="/openai", models=(GPT,), clock=lambda: clock.now
    )
    host = OpenAIEmulator(
        behaviour, provider="groq", prefix="/groq", models=("llama",), batch=False, prompt_cache=None
    )
    yield from _serving(emulator.vendor, host.vendor)


def _chat(base: str, system: str, question: str, *, prefix: str = "/openai", model: str = GPT) -> Any:
    body = {
        "model": model,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": question}],
    }
    answer = httpx.post(f"{base}{prefix}/v1/chat/completions", json=body, timeout=10)
    assert answer.status_code == 200, answer.text
    return _sdk_typed(CompletionUsage, answer.json()["usage"])


def _sdk_typed(kind: type[BaseModel], usage: dict[str, Any]) -> dict[str, Any]:
    """`usage`, checked with the vendor SDK's type: its every field one the SDK declares."""
    parsed = kind.model_validate(usage)
    assert parsed.model_extra in (None, {}), parsed.model_extra
    return usage


def _response(base: str, system: str, question: str) -> Any:
    body = {"model": GPT, "instructions": system, "input": question}
    answer = httpx.post(f"{base}/openai/v1/responses", json=body, timeout=10)
    assert answer.status_code == 200, answer.text
    return _sdk_typed(ResponseUsage, answer.json()["usage"])


def test_openai_caches_a_long_shared_prefix_in_128_token_steps(openai_server: str, clock: Clock) -> None:
    first = _chat(openai_server, LONG, "first question")
    assert first["prompt_tokens_details"] == {"cached_tokens": 0}
    clock.now += 299  # within the 5 minutes of inactivity
    again = _chat(openai_server, LONG, "another question")
    shared = prompt_tokens([{"role": "system", "content": LONG}])
    cached = again["prompt_tokens_details"]["cached_tokens"]
    assert shared >= 1024 and cached == shared // 128 * 128 and cached % 128 == 0
    assert cached <= again["prompt_tokens"]
    clock.now += 299  # the read kept it alive
    assert _chat(openai_server, LONG, "a third")["prompt_tokens_details"]["cached_tokens"] == cached


def test_openai_forgets_a_prefix_after_its_lifetime(openai_server: str, clock: Clock) -> None:
    _chat(openai_server, LONG, "first question")
    clock.now += 300
    assert _chat(openai_server, LONG, "again")["prompt_tokens_details"]["cached_tokens"] == 0
    clock.now += 1  # that request wrote it anew
    assert _chat(openai_server, LONG, "and again")["prompt_tokens_details"]["cached_tokens"] > 0


def test_openai_never_caches_below_1024_tokens(openai_server: str, clock: Clock) -> None:
    for _ in range(3):
        assert _chat(openai_server, SHORT, "question")["prompt_tokens_details"] == {"cached_tokens": 0}
        clock.now += 1


def test_openai_caches_per_model_and_a_host_without_caching_reports_none(openai_server: str) -> None:
    _chat(openai_server, LONG, "q")
    host = _chat(openai_server, LONG, "q", prefix="/groq", model="llama")
    assert "prompt_tokens_details" not in _chat(openai_server, LONG, "q", prefix="/groq", model="llama")
    assert host["prompt_tokens"] > 1024


def test_openai_batch_output_lines_and_a_stream_report_cached_tokens(
    openai_server: str, clock: Clock
) -> None:
    _chat(openai_server, LONG, "warm")
    lines = [
        {
            "custom_id": f"r{i}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {
                "model": GPT,
                "messages": [{"role": "system", "content": LONG}, {"role": "user", "content": f"{i}"}],
            },
        }
        for i in range(2)
    ]
    content = "".join(json.dumps(line) + "\n" for line in lines).encode()
    base = f"{openai_server}/openai/v1"
    uploaded = httpx.post(
        f"{base}/files", files={"file": ("in.jsonl", content)}, data={"purpose": "batch"}
    ).json()
    job = {"input_file_id": uploaded["id"], "endpoint": "/v1/chat/completions", "completion_window": "24h"}
    created = httpx.post(f"{base}/batches", json=job).json()
    clock.now += 1
    done = httpx.get(f"{base}/batches/{created['id']}").json()
    assert done["status"] == "completed", done
    output = httpx.get(f"{base}/files/{done['output_file_id']}/content").text.splitlines()
    usages = [_sdk_typed(CompletionUsage, json.loads(line)["response"]["body"]["usage"]) for line in output]
    assert [u["prompt_tokens_details"]["cached_tokens"] >= 1024 for u in usages] == [True, True]
    body = {
        "model": GPT,
        "messages": lines[0]["body"]["messages"],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    events = httpx.post(f"{base}/chat/completions", json=body).text.split("data: ")
    last = json.loads(next(e for e in reversed(events) if '"usage"' in e))
    assert _sdk_typed(CompletionUsage, last["usage"])["prompt_tokens_details"]["cached_tokens"] >= 1024


def test_the_responses_api_reports_cached_input_tokens(openai_server: str, clock: Clock) -> None:
    assert _response(openai_server, LONG, "first")["input_tokens_details"]["cached_tokens"] == 0
    clock.now += 10
    assert _response(openai_server, LONG, "second")["input_tokens_details"]["cached_tokens"] >= 1024
    clock.now += 301
    assert _response(openai_server, LONG, "third")["input_tokens_details"]["cached_tokens"] == 0
    assert _response(openai_server, SHORT, "x")["input_tokens_details"]["cached_tokens"] == 0
    assert _response(openai_server, SHORT, "x")["input_tokens_details"]["cached_tokens"] == 0


# -- Anthropic: what cache_control marks -----------------------------------------------------------
SONNET, HAIKU = "claude-sonnet-4-20250514", "claude-3-5-haiku-20241022"
MEDIUM = " ".join(f"rule {i}: answer in plain words." for i in range(130))  # 1,024 to 2,048 tokens
HEADERS = {"anthropic-version": "2023-06-01", "x-api-key": "k"}


@pytest.fixture
def anthropic_server(clock: Clock) -> Iterator[str]:
    emulator = AnthropicEmulator(Behaviour(EmulatorConfig()), clock=lambda: clock.now)
    yield from _serving(emulator.vendor)


def _marked(system: str, question: str, *, model: str = SONNET, **control: Any) -> dict[str, Any]:
    block = {"type": "text", "text": system, "cache_control": {"type": "ephemeral", **control}}
    return {
        "model": model,
        "max_tokens": 16,
        "system": [block],
        "messages": [{"role": "user", "content": question}],
    }


def _message(base: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{base}/anthropic/v1/messages", json=body, headers=HEADERS, timeout=10)


def _usage(base: str, body: dict[str, Any]) -> dict[str, Any]:
    answer = _message(base, body)
    assert answer.status_code == 200, answer.text
    usage = _sdk_typed(AnthropicUsage, answer.json()["usage"])
    return {k: v for k, v in usage.items() if k != "service_tier"}


def test_anthropic_writes_a_marked_prefix_then_reads_it(anthropic_server: str, clock: Clock) -> None:
    system = prompt_tokens([{"role": "system", "content": [{"type": "text", "text": LONG}]}])
    first = _usage(anthropic_server, _marked(LONG, "first question"))
    assert first["cache_creation_input_tokens"] >= system > 1024 and first["cache_read_input_tokens"] == 0
    clock.now += 299
    again = _usage(anthropic_server, _marked(LONG, "second question"))
    assert again["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
    assert again["cache_creation_input_tokens"] == 0
    whole = prompt_tokens([{"role": "system", "content": [{"type": "text", "text": LONG}]}, {"content": "x"}])
    assert 0 < again["input_tokens"] < whole - again["cache_read_input_tokens"] + 64  # only what follows
    clock.now += 299  # the read refreshed its five minutes
    assert _usage(anthropic_server, _marked(LONG, "third"))["cache_read_input_tokens"] > 0


def test_an_anthropic_stream_reports_the_cache_in_message_start(anthropic_server: str) -> None:
    _usage(anthropic_server, _marked(LONG, "warm"))
    streamed = _message(anthropic_server, {**_marked(LONG, "streamed"), "stream": True})
    start = next(json.loads(line[6:]) for line in streamed.text.splitlines() if '"message_start"' in line)
    usage = _sdk_typed(AnthropicUsage, start["message"]["usage"])
    assert usage["cache_read_input_tokens"] > 1024 and usage["cache_creation_input_tokens"] == 0


def test_anthropic_forgets_after_the_ttl_and_keeps_an_hour_when_asked(
    anthropic_server: str, clock: Clock
) -> None:
    _usage(anthropic_server, _marked(LONG, "q"))
    clock.now += 300
    lapsed = _usage(anthropic_server, _marked(LONG, "q"))
    assert lapsed["cache_read_input_tokens"] == 0 and lapsed["cache_creation_input_tokens"] > 0
    hour = " ".join(f"hour rule {i}." for i in range(900))
    _usage(anthropic_server, _marked(hour, "q", ttl="1h"))
    clock.now += 3599
    assert _usage(anthropic_server, _marked(hour, "q", ttl="1h"))["cache_read_input_tokens"] > 0


def test_anthropic_caches_nothing_unmarked_or_below_the_models_minimum(
    anthropic_server: str, clock: Clock
) -> None:
    plain = {
        "model": SONNET,
        "max_tokens": 16,
        "system": LONG,
        "messages": [{"role": "user", "content": "q"}],
    }
    for _ in range(2):
        usage = _usage(anthropic_server, plain)
        assert usage["cache_creation_input_tokens"] == usage["cache_read_input_tokens"] == 0
        clock.now += 1
    assert 1024 <= prompt_tokens([{"role": "system", "content": [{"type": "text", "text": MEDIUM}]}]) < 2048
    assert _usage(anthropic_server, _marked(MEDIUM, "q"))["cache_creation_input_tokens"] > 0  # Sonnet: 1,024
    for _ in range(2):  # Haiku 3.5: 2,048
        usage = _usage(anthropic_server, _marked(MEDIUM, "q", model=HAIKU))
        assert usage["cache_creation_input_tokens"] == usage["cache_read_input_tokens"] == 0


def test_anthropic_refuses_a_malformed_cache_control_as_the_api_does(anthropic_server: str) -> None:
    bad = _marked(LONG, "q")
    bad["system"][0]["cache_control"] = {"type": "persistent"}
    answer = _message(anthropic_server, bad)
    assert answer.status_code == 400 and answer.json()["error"]["type"] == "invalid_request_error"
    assert _message(anthropic_server, _marked(LONG, "q", ttl="2h")).status_code == 400
    five = _marked(LONG, "q")
    five["messages"][0]["content"] = [
        {"type": "text", "text": f"part {i}", "cache_control": {"type": "ephemeral"}} for i in range(4)
    ]
    answer = _message(anthropic_server, five)
    assert answer.status_code == 400 and "maximum of 4 blocks" in answer.json()["error"]["message"]
    late = _marked(LONG, "q")
    late["messages"][0]["content"] = [
        {"type": "text", "text": "q", "cache_control": {"type": "ephemeral", "ttl": "1h"}}
    ]
    assert _message(anthropic_server, late).status_code == 400  # 1h after 5m


def test_a_message_batch_reads_what_the_messages_api_wrote(anthropic_server: str, clock: Clock) -> None:
    _usage(anthropic_server, _marked(LONG, "q"))
    requests = [{"custom_id": f"r{i}", "params": _marked(LONG, f"item {i}")} for i in range(2)]
    created = httpx.post(
        f"{anthropic_server}/anthropic/v1/messages/batches", json={"requests": requests}, headers=HEADERS
    ).json()
    results = httpx.get(
        f"{anthropic_server}/anthropic/v1/messages/batches/{created['id']}/results", headers=HEADERS
    )
    lines = [json.loads(line) for line in results.text.splitlines()]
    assert [line["result"]["message"]["usage"]["cache_read_input_tokens"] > 0 for line in lines] == [
        True,
        True,
    ]


# -- Gemini: implicit caching ----------------------------------------------------------------------
@pytest.fixture
def gemini_server(clock: Clock) -> Iterator[str]:
    emulator = GeminiEmulator(Behaviour(EmulatorConfig()), clock=lambda: clock.now)
    yield from _serving(emulator.vendor)


def _generate(base: str, system: str, question: str, model: str = "gemini-2.5-flash") -> dict[str, Any]:
    body = {
        "systemInstruction": {"parts": [{"text": system}]},
        "contents": [{"role": "user", "parts": [{"text": question}]}],
    }
    answer = httpx.post(
        f"{base}/google/v1beta/models/{model}:generateContent",
        json=body,
        headers={"x-goog-api-key": "k"},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    return _sdk_typed(GenerateContentResponseUsageMetadata, answer.json()["usageMetadata"])


def test_gemini_reports_implicit_cache_hits_within_the_lifetime(gemini_server: str, clock: Clock) -> None:
    assert "cachedContentTokenCount" not in _generate(gemini_server, LONG, "first")
    clock.now += 299
    again = _generate(gemini_server, LONG, "second")
    assert 2048 <= again["cachedContentTokenCount"] < again["promptTokenCount"]
    clock.now += 300
    assert "cachedContentTokenCount" not in _generate(gemini_server, LONG, "third")


def test_gemini_caches_nothing_below_its_minimum_or_on_older_models(gemini_server: str, clock: Clock) -> None:
    for _ in range(2):
        assert "cachedContentTokenCount" not in _generate(gemini_server, MEDIUM, "q")  # 2.5: 2,048
        assert "cachedContentTokenCount" not in _generate(
            gemini_server, LONG, "q", model="gemini-2.0-flash-001"
        )
        clock.now += 1


# -- Bedrock Converse: cachePoint blocks ----------------------------------------------------------
# Claude 3.5 Haiku by its US inference profile: us-east-1 refuses its bare id on demand.
BEDROCK_CLAUDE, LLAMA = "us.anthropic.claude-3-5-haiku-20241022-v1:0", "meta.llama3-1-70b-instruct-v1:0"
POINT = {"cachePoint": {"type": "default"}}


@pytest.fixture
def bedrock_server(clock: Clock) -> Iterator[str]:
    emulator = BedrockEmulator(Behaviour(EmulatorConfig()), s3=None, clock=lambda: clock.now)
    yield from _serving(emulator.vendor)


def _converse(
    base: str, system: list[dict[str, Any]], question: str, model: str = BEDROCK_CLAUDE
) -> httpx.Response:
    body = {"system": system, "messages": [{"role": "user", "content": [{"text": question}]}]}
    return httpx.post(f"{base}/bedrock/runtime/model/{model}/converse", json=body, timeout=10)


def _bedrock_usage(base: str, system: list[dict[str, Any]], question: str) -> dict[str, Any]:
    answer = _converse(base, system, question)
    assert answer.status_code == 200, answer.text
    usage: dict[str, Any] = answer.json()["usage"]
    members = (
        botocore.session.get_session().get_service_model("bedrock-runtime").shape_for("TokenUsage").members
    )
    assert set(usage) <= set(members)  # botocore's TokenUsage declares every field
    return usage


def test_bedrock_writes_then_reads_at_a_cache_point(bedrock_server: str, clock: Clock) -> None:
    marked = [{"text": LONG}, POINT]
    first = _bedrock_usage(bedrock_server, marked, "first")
    assert first["cacheWriteInputTokens"] > 2048 and first["cacheReadInputTokens"] == 0
    assert (
        first["inputTokens"] + first["cacheWriteInputTokens"] + first["outputTokens"] == first["totalTokens"]
    )
    clock.now += 299
    again = _bedrock_usage(bedrock_server, marked, "second")
    assert (
        again["cacheReadInputTokens"] == first["cacheWriteInputTokens"]
        and again["cacheWriteInputTokens"] == 0
    )
    clock.now += 300
    assert _bedrock_usage(bedrock_server, marked, "third")["cacheReadInputTokens"] == 0


def test_a_bedrock_stream_reports_the_cache_in_its_metadata(bedrock_server: str) -> None:
    marked = {"system": [{"text": LONG}, POINT], "messages": [{"role": "user", "content": [{"text": "q"}]}]}
    url = f"{bedrock_server}/bedrock/runtime/model/{BEDROCK_CLAUDE}/converse-stream"
    first, again = (_stream_usage(httpx.post(url, json=marked, timeout=10).content) for _ in range(2))
    assert first["cacheWriteInputTokens"] > 2048 and first["cacheReadInputTokens"] == 0
    assert (
        again["cacheReadInputTokens"] == first["cacheWriteInputTokens"]
        and again["cacheWriteInputTokens"] == 0
    )


def _stream_usage(frames: bytes) -> dict[str, Any]:
    """The usage of a ConverseStream's metadata frame (its JSON payload, read from the frame)."""
    found = re.search(rb'"usage":(\{[^}]*\})', frames)
    assert found is not None
    usage: dict[str, Any] = json.loads(found.group(1))
    return usage


def test_bedrock_caches_nothing_unmarked_or_below_the_minimum(bedrock_server: str, clock: Clock) -> None:
    for _ in range(2):
        assert "cacheReadInputTokens" not in _bedrock_usage(bedrock_server, [{"text": LONG}], "q")
        short = _bedrock_usage(bedrock_server, [{"text": MEDIUM}, POINT], "q")  # Claude 3.5 Haiku: 2,048
        assert short["cacheReadInputTokens"] == short["cacheWriteInputTokens"] == 0
        clock.now += 1


def test_bedrock_refuses_a_bad_cache_point_as_bedrock_does(bedrock_server: str) -> None:
    bad = _converse(bedrock_server, [{"text": LONG}, {"cachePoint": {"type": "forever"}}], "q")
    assert bad.status_code == 400 and bad.headers["x-amzn-ErrorType"] == "ValidationException"
    llama = _converse(bedrock_server, [{"text": LONG}, POINT], "q", model=LLAMA)
    assert llama.status_code == 400 and "prompt caching" in llama.json()["message"]
    five = _converse(bedrock_server, [{"text": f"part {i}"} if i % 2 == 0 else POINT for i in range(10)], "q")
    assert five.status_code == 400 and "Found 5" in five.json()["message"]
