"""Direct chat's money when the vendor's stream is not the simulator's (review of direct chat):
a compatible host that reports no usage, a Gemini stream the client leaves, a Gemini refusal
after the stream opened, and a settlement that fails. The real adapters sit behind the lanes
with in-memory vendors (httpx.MockTransport), as in test_chat_tool_calls.py."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import httpx
import openai
import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.dynamo.chat_holds import ChatHoldStore
from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.catalog import builtin_catalog
from batchroute.clock import FixedClock, SystemClock
from batchroute.config import get_settings
from batchroute.domain.catalog.pricing import token_cost
from batchroute.domain.chat.requests import parse_chat_request
from batchroute.errors import TransientError
from batchroute.money import Money
from batchroute.providers import base, simulated
from batchroute.providers.gemini import transform as gemini_transform
from batchroute.providers.gemini.client import GeminiModels
from batchroute.providers.http import VendorHttp
from batchroute.providers.openai.client import OpenAIChat
from batchroute.providers.openai.transform import HOST_ROUTE
from batchroute.providers.retry import RetryPolicy
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from tests.integration.batch_pipeline_support import heartbeat_all_lanes
from tests.integration.principals import TestOrg, chat_sdk, instant_chat_client, ledger_store, new_org
from tests.integration.test_chat_holds import (
    ScriptedProvider,
    _asgi_post,
    _direct,
    _Disconnected,
    _principal,
    _request,
    _settings,
    _sweep,
)

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
FLASH = "gemini-2.0-flash"


def _lane_cost(lane_id: str, prompt: int, completion: int) -> Money:
    price = next(lane for lane in builtin_catalog().lanes if lane.lane_id == lane_id).price
    return Money.usd_ceil(token_cost(prompt, completion, price.input_per_mtok, price.output_per_mtok))


def _hold(org: TestOrg) -> Any:
    return next(r for r in ledger_store().reservations(org.org_id) if r.purpose == "chat_hold")


def _store() -> ChatHoldStore:
    settings = get_settings()
    return ChatHoldStore(
        ledger=LedgerStore(settings.table_name("ledger")),
        batches_table=settings.table_name("batches"),
        controls_table=settings.table_name("controls"),
    )


def _sse(events: list[Any]) -> bytes:
    return b"".join(
        b"data: " + (e if isinstance(e, bytes) else json.dumps(e).encode()) + b"\n\n" for e in events
    )


class Vendor:
    """A vendor answering each call with `events` as an SSE stream (or `body` when set)."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.body: Callable[[], Iterator[bytes]] | None = None
        self.calls = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        content = self.body() if self.body is not None else _sse(self.events)
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=content)


def _serve(monkeypatch: pytest.MonkeyPatch, slug: str, adapter: Any) -> None:
    """`adapter` answers the `slug` lanes in place of the simulated provider."""
    simulated_stream = simulated.SimulatedSyncProvider.stream

    def stream(
        self: simulated.SimulatedSyncProvider, request: base.ProviderRequest
    ) -> Iterator[base.StreamEvent]:
        return adapter.stream(request) if self.slug == slug else simulated_stream(self, request)

    monkeypatch.setattr(simulated.SimulatedSyncProvider, "stream", stream)


def _gemini(vendor: Vendor) -> GeminiModels:
    transport = httpx.MockTransport(vendor)
    http = VendorHttp(
        "http://vendor.test",
        vendor="google",
        transport=transport,
        status_errors=gemini_transform.status_error,
    )
    return GeminiModels("google", http)


@pytest.fixture
def vendor() -> Vendor:
    return Vendor()


@pytest.fixture
def stack(local_aws: LocalStack) -> LocalStack:
    """The local stack with every lane's heartbeat fresh (the app's own, no test client)."""
    identity_store.cache_clear()
    heartbeat_all_lanes()
    return local_aws


# -- a compatible host whose stream reports no usage ------------------------------------------
def host_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "llama",
        "choices": [choice],
    }


WORDS = 200
NO_USAGE_STREAM = (
    [host_chunk({"role": "assistant", "content": ""})]
    + [host_chunk({"content": f"word{i} "}) for i in range(WORDS)]
    + [host_chunk({}, "stop"), b"[DONE]"]
)


@pytest.fixture
def groq_client(
    local_aws: LocalStack, vendor: Vendor, monkeypatch: pytest.MonkeyPatch
) -> Iterator[TestClient]:
    transport = httpx.MockTransport(vendor)
    adapter = OpenAIChat(
        "groq", VendorHttp("http://vendor.test/v1", vendor="groq", transport=transport), route=HOST_ROUTE
    )
    _serve(monkeypatch, "groq", adapter)
    with instant_chat_client() as test_client:
        yield test_client


@pytest.mark.parametrize("stream", [False, True])
def test_a_host_stream_without_usage_is_charged_at_the_estimate(
    groq_client: TestClient, vendor: Vendor, stream: bool
) -> None:
    # Given a compatible host that streams 200 deltas and reports no usage at all
    vendor.events = NO_USAGE_STREAM
    org = new_org(credit_usd="5")
    before = ledger_store().state(org.org_id).balance
    messages: Any = [{"role": "user", "content": "Write a long essay."}]
    body = {
        "model": LLAMA,
        "messages": messages,
        "max_tokens": 1000,
        "provider_preferences": {"only": ["groq"]},
    }
    sdk = chat_sdk(groq_client, org)
    kw: Any = {"model": LLAMA, "messages": messages, "max_tokens": 1000, "extra_body": body}
    # When the SDK asks for it, streamed or not
    if stream:
        chunks = list(sdk.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw))
        shown = chunks[-1].usage
    else:
        shown = sdk.chat.completions.create(**kw).usage
    # Then it is charged (and shown) as the estimate: the prompt's, and one token per delta
    prompt = parse_chat_request(body, builtin_catalog()).facts.prompt_tokens
    assert shown is not None and (shown.prompt_tokens, shown.completion_tokens) == (prompt, WORDS)
    charge = _lane_cost(f"groq/{LLAMA}", prompt, WORDS)
    assert charge > Money.zero()
    hold = _hold(org)
    assert hold.status == "settled" and hold.charged == charge
    assert before - ledger_store().state(org.org_id).balance == charge


# -- a Gemini stream the client leaves: charged what Gemini counted ---------------------------
PROMPT_COUNTED = 1200
TOKENS_PER_CHUNK = 30


def _gemini_chunk(i: int, *, last: bool = False) -> bytes:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": "lorem ipsum dolor " * 6}]}}
    if last:
        candidate["finishReason"] = "STOP"
    output = TOKENS_PER_CHUNK * (i + 1)
    meta = {
        "promptTokenCount": PROMPT_COUNTED,
        "candidatesTokenCount": output,
        "totalTokenCount": PROMPT_COUNTED + output,
    }
    return b"data: " + json.dumps({"candidates": [candidate], "usageMetadata": meta}).encode() + b"\r\n\r\n"


def test_a_gemini_stream_the_client_leaves_is_charged_geminis_counts(
    stack: LocalStack, vendor: Vendor, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a Gemini stream of 40 chunks of 30 tokens, every chunk's usageMetadata counting the
    # prompt (1200) and the output so far; the vendor pauses after 20 until the client has left
    gate = threading.Event()

    def body() -> Iterator[bytes]:
        for i in range(40):
            if i == 20:
                gate.wait(timeout=10)
            yield _gemini_chunk(i, last=i == 39)

    vendor.body = body
    _serve(monkeypatch, "google", _gemini(vendor))
    org = new_org(credit_usd="1")
    seen = 0

    async def send(message: dict[str, Any]) -> None:
        nonlocal seen
        if message["type"] == "http.response.body" and b'"content":"lorem' in message.get("body", b""):
            seen += 1
            if seen == 20:  # the client goes away after 20 content chunks
                gate.set()
                raise _Disconnected("client went away")

    messages = [{"role": "user", "content": "tell me a long story " * 300}]
    body_json = {"model": FLASH, "messages": messages, "max_tokens": 2000, "stream": True}
    _asgi_post(create_app(_settings()), body_json, org.key_headers(), send)
    # Then the hold is settled at Gemini's prompt count and its output count so far (not the
    # prompt estimate and one token per chunk)
    hold = _hold(org)
    record = _store().record(hold.ref)
    assert record is not None and record.billing is not None
    usage = record.billing["provider_lanes"][0]["usage"]
    assert usage["prompt_tokens"] == PROMPT_COUNTED
    assert usage["completion_tokens"] >= 20 * TOKENS_PER_CHUNK
    assert usage["completion_tokens"] % TOKENS_PER_CHUNK == 0
    assert hold.status == "settled"
    assert hold.charged == _lane_cost(f"google/{FLASH}", PROMPT_COUNTED, usage["completion_tokens"])
    assert ledger_store().state(org.org_id).reserved == Money.zero()


# -- a Gemini refusal after the stream opened -------------------------------------------------
def _gemini_event(parts: list[Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}}
    if finish:
        candidate["finishReason"] = finish
    meta = {"promptTokenCount": 100, "candidatesTokenCount": 42, "totalTokenCount": 142}
    return {"candidates": [candidate], "usageMetadata": meta, **extra}


PROMPT_BLOCKED = [
    {
        "promptFeedback": {"blockReason": "SAFETY"},
        "usageMetadata": {"promptTokenCount": 100, "totalTokenCount": 100},
    }
]
SAFETY_MIDWAY = [_gemini_event([{"text": "Checking"}]), _gemini_event([], "SAFETY")]
ASK: Any = [{"role": "user", "content": "Weather?"}]


@pytest.fixture
def gemini_client(
    local_aws: LocalStack, vendor: Vendor, monkeypatch: pytest.MonkeyPatch
) -> Iterator[TestClient]:
    _serve(monkeypatch, "google", _gemini(vendor))
    with instant_chat_client() as test_client:
        yield test_client


def test_a_blocked_prompt_is_refused_400_once_and_charges_nothing(
    gemini_client: TestClient, vendor: Vendor
) -> None:
    # Given Gemini blocking the prompt in its stream's first chunk
    vendor.events = PROMPT_BLOCKED
    org = new_org(credit_usd="5")
    before = ledger_store().state(org.org_id).balance
    # When the SDK (retrying a 5xx twice, its default) asks for a completion
    with pytest.raises(openai.BadRequestError) as raised:
        chat_sdk(gemini_client, org, max_retries=2).chat.completions.create(
            model=FLASH, messages=ASK, max_tokens=200
        )
    # Then it is refused 400 `provider_rejected` as a refusal before the first byte is, the
    # vendor was called once, and nothing was charged
    assert raised.value.code == "provider_rejected"
    assert isinstance(raised.value.body, dict)
    assert raised.value.body["details"] == {"provider": "google", "provider_code": "content_blocked"}
    assert "retry-after" not in raised.value.response.headers
    assert vendor.calls == 1
    assert ledger_store().state(org.org_id).balance == before
    assert _hold(org).charged == Money.zero()


def _streamed(client: TestClient, org: TestOrg) -> list[str]:
    body = {"model": FLASH, "messages": ASK, "max_tokens": 200, "stream": True}
    with client.stream("POST", "/v1/chat/completions", json=body, headers=org.key_headers()) as answer:
        assert answer.status_code == 200
        raw = b"".join(answer.iter_bytes()).decode()
    return [e.removeprefix("data: ") for e in raw.split("\n\n") if e]


def test_a_streamed_blocked_prompt_is_refused_400_before_the_stream_and_charges_nothing(
    gemini_client: TestClient, vendor: Vendor
) -> None:
    # Given Gemini blocking the prompt in its stream's first chunk
    vendor.events = PROMPT_BLOCKED
    org = new_org(credit_usd="5")
    before = ledger_store().state(org.org_id).balance
    body = {"model": FLASH, "messages": ASK, "max_tokens": 200, "stream": True}
    # When a streamed completion is asked for
    answer = gemini_client.post("/v1/chat/completions", json=body, headers=org.key_headers())
    # Then it is refused before the stream starts, as any refusal before the first byte is
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert (error["code"], error["details"]["provider_code"]) == ("provider_rejected", "content_blocked")
    assert ledger_store().state(org.org_id).balance == before
    hold = _hold(org)
    assert hold.status != "pending" and hold.charged == Money.zero()
    assert ledger_store().state(org.org_id).reserved == Money.zero()


def test_a_stream_gemini_stops_midway_ends_in_provider_rejected_and_charges_what_was_sent(
    gemini_client: TestClient, vendor: Vendor
) -> None:
    vendor.events = SAFETY_MIDWAY
    org = new_org(credit_usd="5")
    events = _streamed(gemini_client, org)
    # Then the delta sent stands, the last event is the refusal, and what was generated is charged
    assert any('"content":"Checking"' in e for e in events)
    assert json.loads(events[-1])["error"]["code"] == "provider_rejected"
    hold = _hold(org)
    assert hold.status == "settled" and hold.charged > Money.zero()
    assert ledger_store().state(org.org_id).reserved == Money.zero()


# -- a settlement that fails ------------------------------------------------------------------
def _failing_settle(monkeypatch: pytest.MonkeyPatch, failures: int) -> list[int]:
    """ChatHoldStore.settle raises TransientError `failures` times, then settles; counts tries."""
    tries: list[int] = []
    original = ChatHoldStore.settle

    def settle(self: ChatHoldStore, settlement: Any) -> Any:
        tries.append(1)
        if len(tries) <= failures:
            raise TransientError("resolving kept colliding with other wallet writes")
        return original(self, settlement)

    monkeypatch.setattr(ChatHoldStore, "settle", settle)
    return tries


def test_a_settlement_that_fails_is_retried_with_backoff(
    stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a finished answer whose first two settlement attempts fail
    org = new_org(credit_usd="1")
    waits: list[float] = []
    direct, _ = _direct(ScriptedProvider("edge-eu", tokens=10), SystemClock())
    direct = replace(
        direct,
        settle_retry=RetryPolicy(max_attempts=3, base_seconds=0.2, random=lambda: 0.5, sleeper=waits.append),
    )
    call = direct.open(_principal(org), _request())
    while call.next_event() is not None:
        pass
    tries = _failing_settle(monkeypatch, failures=2)
    # When it finishes
    result = call.finish()
    # Then the third try settled it, after two jittered waits (by the injected sleeper)
    assert len(tries) == 3 and waits == [0.1, 0.2]
    assert result is not None and result.charged == _lane_cost(call.lane.lane_id, 50, 10)
    assert ledger_store().state(org.org_id).reserved == Money.zero()


def test_a_settlement_that_keeps_failing_leaves_the_final_usage_to_the_sweeper(
    stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a short answer (no checkpoint while it streamed) whose settlement keeps failing
    org = new_org(credit_usd="1")
    clock = FixedClock()
    direct, store = _direct(ScriptedProvider("edge-eu", tokens=10), clock)
    direct = replace(direct, settle_retry=RetryPolicy(max_attempts=3, sleeper=lambda _: None))
    call = direct.open(_principal(org), _request())
    while call.next_event() is not None:
        pass
    tries = _failing_settle(monkeypatch, failures=3)
    # When it finishes, it gives up after its tries (and a second finish tries no more)
    assert call.finish() is None and len(tries) == 3
    assert call.finish() is None and len(tries) == 3
    # Then its record holds the final usage, and the sweeper charges exactly that
    record = store.record(call.batch_id)
    assert record is not None and record.usage_checkpoint is not None
    assert (record.usage_checkpoint.usage.prompt_tokens, record.usage_checkpoint.usage.completion_tokens) == (
        50,
        10,
    )
    clock.advance(seconds=301)
    report = _sweep(LedgerStore(get_settings().table_name("ledger")), store, clock)
    assert report.settled == [call.hold_id]
    assert report.charged_micros == _lane_cost(call.lane.lane_id, 50, 10).micros
    assert ledger_store().state(org.org_id).reserved == Money.zero()
    # and the record says what the customer got: a completed answer, not a failure
    swept = store.record(call.batch_id)
    assert swept is not None and swept.state == "completed"
    assert swept.counts["completed"] == 1 and swept.counts["failed"] == 0
    assert swept.execution_summary is not None and swept.execution_summary.latest_error is None


def test_a_delivered_answer_whose_settlement_fails_once_is_still_charged(
    stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the app's settlement retry on an injected sleeper, and a first settlement attempt
    # that fails (the wallet's transaction kept colliding)
    waits: list[float] = []
    policy = RetryPolicy(max_attempts=3, sleeper=waits.append)
    monkeypatch.setattr("batchroute.services.chat.direct.SETTLE_RETRY", policy, raising=False)
    tries = _failing_settle(monkeypatch, failures=1)
    org = new_org(credit_usd="1")
    body = {"model": LLAMA, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 50}
    sent = bytearray()

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            sent.extend(message.get("body", b""))

    # When the app answers it (an exception escaping the app is the old code's: nothing retried)
    with contextlib.suppress(TransientError):
        _asgi_post(create_app(_settings()), body, org.key_headers(), send)
    # Then the answer was delivered and its hold settled at its usage by the second try
    usage = json.loads(sent)["usage"]
    hold = _hold(org)
    assert hold.status == "settled" and len(tries) == 2 and len(waits) == 1
    lane_id = f"{json.loads(sent)['provider']}/{LLAMA}"
    assert hold.charged == _lane_cost(lane_id, usage["prompt_tokens"], usage["completion_tokens"])
    assert ledger_store().state(org.org_id).reserved == Money.zero()
