"""The emulators' prompt caches (emulators/cache.py, docs/emulators.md), over HTTP and by
an injected clock: a request repeated within the vendor's cache lifetime reports cached
input tokens in the vendor's own usage fields, one repeated after it does not, and one below
the vendor's minimum cacheable length never does."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from batchroute_tools.emulators.behaviour import Behaviour, EmulatorConfig, prompt_tokens
from batchroute_tools.emulators.openai import OpenAIEmulator
from batchroute_tools.emulators.server import EmulatorServer

GPT = "gpt-4o-mini-2024-07-18"
LONG = " ".join(f"rule {i}: answer in plain words." for i in range(600))  # past every minimum
SHORT = "Answer in plain words."


class Clock(list[float]):
    """The injected clock: `clock.now += 10` moves it on."""

    now = property(lambda self: self[0], lambda self, value: self.__setitem__(0, value))


@pytest.fixture
def clock() -> Clock:
    return Clock([1_700_000_000.0])


@pytest.fixture
def openai_server(clock: Clock) -> Iterator[str]:
    behaviour = Behaviour(EmulatorConfig())
    emulator = OpenAIEmulator(
        behaviour, provider="openai", prefix="/openai", models=(GPT,), clock=lambda: clock.now
    )
    host = OpenAIEmulator(
        behaviour, provider="groq", prefix="/groq", models=("llama",), batch=False, prompt_cache=None
    )
    server = EmulatorServer([emulator.vendor, host.vendor]).start()
    yield server.base_url
    server.stop()


def _chat(base: str, system: str, question: str, *, prefix: str = "/openai", model: str = GPT) -> Any:
    body = {
        "model": model,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": question}],
    }
    answer = httpx.post(f"{base}{prefix}/v1/chat/completions", json=body, timeout=10)
    assert answer.status_code == 200, answer.text
    return answer.json()["usage"]


def _response(base: str, system: str, question: str) -> Any:
    body = {"model": GPT, "instructions": system, "input": question}
    answer = httpx.post(f"{base}/openai/v1/responses", json=body, timeout=10)
    assert answer.status_code == 200, answer.text
    return answer.json()["usage"]


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


def test_the_responses_api_reports_cached_input_tokens(openai_server: str, clock: Clock) -> None:
    assert _response(openai_server, LONG, "first")["input_tokens_details"]["cached_tokens"] == 0
    clock.now += 10
    assert _response(openai_server, LONG, "second")["input_tokens_details"]["cached_tokens"] >= 1024
    clock.now += 301
    assert _response(openai_server, LONG, "third")["input_tokens_details"]["cached_tokens"] == 0
    assert _response(openai_server, SHORT, "x")["input_tokens_details"]["cached_tokens"] == 0
    assert _response(openai_server, SHORT, "x")["input_tokens_details"]["cached_tokens"] == 0
