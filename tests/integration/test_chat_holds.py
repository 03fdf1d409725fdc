"""Chat holds on moto: a client that goes away mid-stream stops the upstream call and pays
only what was generated; a request whose function dies is settled by the sweeper at its last
checkpoint; settlement happens exactly once whoever comes first; the hold is settled before
the answer's last byte (on AWS nothing runs after it). The AWS calls before the first byte
(two: key, then the hold with the rate limit in it) are counted in test_chat_fast_path.py."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient
from starlette.requests import ClientDisconnect

from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.adapters.dynamo.chat_holds import ChatHoldStore
from batchroute.adapters.dynamo.controls import ControlsStore
from batchroute.adapters.dynamo.lanes import LaneStateStore
from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.adapters.dynamo.route_policies import RoutePolicyStore
from batchroute.catalog import builtin_catalog
from batchroute.clock import FixedClock, SystemClock
from batchroute.config import get_settings
from batchroute.domain.accounts.access import Principal
from batchroute.domain.billing.usage import usage_day
from batchroute.domain.catalog.pricing import ToolUses, token_cost, usage_cost
from batchroute.domain.chat.requests import ChatRequest, parse_chat_request
from batchroute.money import Money
from batchroute.providers.base import (
    ProviderRequest,
    ProviderResult,
    StreamDelta,
    StreamEnd,
    StreamEvent,
    StreamStart,
    SyncProvider,
    Usage,
)
from batchroute.providers.simulated import SimulatedSyncProvider
from batchroute.services.catalog.catalog import guards_for
from batchroute.services.chat.direct import DirectCall, DirectChat, DirectOptions
from batchroute.services.chat.state import HoldKeeper, LaneStateCache, LaneStats
from batchroute.services.routing.policy import PolicyReader
from batchroute.services.workflow.sweeper import HoldSweepReport, resolve_stale_chat_holds
from batchroute.wiring import Wiring
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from tests.integration.batch_pipeline_support import heartbeat_all_lanes
from tests.integration.principals import TestOrg, new_org

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
EDGE = next(lane for lane in builtin_catalog().lanes if lane.lane_id == f"edge-eu/{LLAMA}")


class ScriptedProvider:
    """Streams `tokens` one-word deltas and remembers whether it was closed early."""

    def __init__(
        self, slug: str, tokens: int = 10, *, reported: Usage | None = None, tool_uses: Usage | None = None
    ) -> None:
        self.slug = slug
        self.tokens = tokens
        self.reported = reported  # the usage the vendor reports on each delta (message_start's)
        self.tool_uses = tool_uses.tool_uses if tool_uses else ()  # hosted tool calls it bills
        self.closed_early = False
        self.sent = 0

    def complete(self, request: ProviderRequest) -> ProviderResult:  # pragma: no cover - unused
        raise NotImplementedError

    def stream(self, request: ProviderRequest) -> Iterator[StreamEvent]:
        def events() -> Iterator[StreamEvent]:
            try:
                yield StreamStart()
                for _ in range(self.tokens):
                    self.sent += 1
                    yield StreamDelta(" word", usage=self.reported)
                usage = Usage(prompt_tokens=50, completion_tokens=self.tokens, tool_uses=self.tool_uses)
                output = {"type": "message", "role": "assistant", "content": "x", "finish_reason": "stop"}
                yield StreamEnd(ProviderResult("chat", "completed", output=output, usage=usage))
            except GeneratorExit:
                self.closed_early = True
                raise

        return events()


class Providers:
    def __init__(self, provider: ScriptedProvider) -> None:
        self.provider = provider

    def sync(self, slug: str) -> SyncProvider:
        return self.provider


@pytest.fixture
def stack(local_aws: LocalStack) -> LocalStack:
    identity_store.cache_clear()
    heartbeat_all_lanes()
    return local_aws


def _direct(provider: ScriptedProvider, clock: FixedClock | SystemClock) -> tuple[DirectChat, ChatHoldStore]:
    settings = get_settings()
    store = ChatHoldStore(
        ledger=LedgerStore(settings.table_name("ledger")),
        batches_table=settings.table_name("batches"),
        controls_table=settings.table_name("controls"),
    )
    direct = DirectChat(
        catalog=builtin_catalog(),
        lanes=LaneStateCache(LaneStateStore(settings.table_name("controls")), 60),
        stats=LaneStats(),
        holds=HoldKeeper(store, clock),
        store=store,
        providers=Providers(provider),
        controls=ControlsStore(settings.table_name("controls")),
        guards=guards_for(settings),
        clock=clock,
        policies=PolicyReader(RoutePolicyStore(settings.table_name("controls")), clock),
        watch=Wiring(settings, clock).billing_watch,
        availability=LaneStateStore(settings.table_name("controls")),
        options=DirectOptions(checkpoint_seconds=2),
    )
    return direct, store


def _request(**extra: Any) -> Any:
    body = {"model": LLAMA, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 100, **extra}
    return parse_chat_request(body, builtin_catalog())


def _principal(org: TestOrg) -> Principal:
    return Principal(org_id=org.org_id, role="owner", via="api_key", key_id="key_test")


def _cost(prompt: int, completion: int) -> Money:
    price = EDGE.price
    return Money.usd_ceil(token_cost(prompt, completion, price.input_per_mtok, price.output_per_mtok))


def test_disconnect_stops_upstream_and_charges_only_what_was_generated(stack: LocalStack) -> None:
    # Given a stream that delivered 3 of its 10 tokens
    org = new_org(credit_usd="1")
    provider = ScriptedProvider("edge-eu", tokens=10)
    direct, _ = _direct(provider, SystemClock())
    request = _request(stream=True)
    call = direct.open(_principal(org), request)
    for _ in range(3):
        assert isinstance(call.next_event(), StreamDelta)
    # When the client goes away (the stream's finally calls finish)
    result = call.finish(error="client_disconnected")
    # Then the upstream call was closed and only prompt + 3 tokens were charged
    assert provider.closed_early and provider.sent == 3
    assert result.charged == _cost(request.facts.prompt_tokens, 3)
    ledger = LedgerStore(get_settings().table_name("ledger"))
    assert ledger.state(org.org_id).reserved == Money.zero()
    assert ledger.violations(org.org_id) == []
    # And finishing again changes nothing (exactly once)
    assert call.finish() is result


def test_a_request_whose_vendor_billed_hosted_tools_reads_back_and_lists(stack: LocalStack) -> None:
    # Given a direct answer whose vendor billed a web search (its usage keeps tool_uses)
    org = new_org(credit_usd="1")
    billed = Usage(tool_uses=(("web_search", 1),))
    direct, store = _direct(ScriptedProvider("edge-eu", tokens=2, tool_uses=billed), SystemClock())
    call = direct.open(_principal(org), _request())
    while not isinstance(call.next_event(), StreamEnd):
        pass
    call.finish()
    # Then its record reads back with that usage, and the org's batch list holds it
    record = store.record(call.batch_id)
    assert record is not None and record.usage is not None
    assert record.usage["tool_uses"] == {"web_search": 1}
    assert record.usage["completion_tokens"] == 2
    listed, _ = BatchRecords(get_settings().table_name("batches")).list_for_org(
        org.org_id, limit=10, start_after=None, states=None
    )
    assert [batch.batch_id for batch in listed] == [call.batch_id]


def _sweep(ledger: LedgerStore, store: ChatHoldStore, clock: FixedClock) -> HoldSweepReport:
    controls = ControlsStore(get_settings().table_name("controls"))
    return resolve_stale_chat_holds(
        ledger, store, builtin_catalog(), clock, controls=controls, stale_seconds=300
    )


def _checkpointed(direct: DirectChat, org: TestOrg, request: ChatRequest, clock: FixedClock) -> DirectCall:
    """A stream opened for `org` that checkpointed after 5 tokens (its first delta starts the
    checkpoint clock; the 5th comes 4 s later), then went quiet as if its function died."""
    call = direct.open(_principal(org), request)
    call.next_event()
    for _ in range(4):
        clock.advance(seconds=1)
        call.next_event()
    return call


def test_sweeper_settles_a_dead_request_at_its_last_checkpoint_exactly_once(stack: LocalStack) -> None:
    # Given a stream that checkpointed after 5 tokens, then its function died
    org = new_org(credit_usd="1")
    clock = FixedClock()
    direct, store = _direct(ScriptedProvider("edge-eu", tokens=10), clock)
    call = _checkpointed(direct, org, _request(stream=True), clock)
    ledger = LedgerStore(get_settings().table_name("ledger"))
    # When the sweeper runs before the hold is stale, nothing happens
    early = _sweep(ledger, store, clock)
    assert early.settled == []
    # And once it is stale, the hold settles at the checkpointed usage
    clock.advance(seconds=301)
    report = _sweep(ledger, store, clock)
    assert report.settled == [call.hold_id]
    checkpoint = store.record(call.batch_id)
    assert checkpoint is not None and checkpoint.state == "failed"
    assert report.charged_micros == _cost(call.request.facts.prompt_tokens, 5).micros
    # And its receipt has what every receipt has (the SDK reads it as any other)
    billing = checkpoint.billing or {}
    assert billing["batch_id"] == call.batch_id and billing["recovered_by"] == "sweeper"
    assert billing["provider_subtotal"] == billing["credit_charged"]
    assert billing["service_fee"] == Money.zero().to_api()
    # And its usage is counted on its (UTC) day, on the lane that streamed it
    day = usage_day(clock.now(), "UTC")
    (counter,) = ledger.usage_between(org.org_id, day, day)
    assert (counter.provider, counter.figures.cost_micros) == ("edge-eu", report.charged_micros)
    assert (counter.figures.output_tokens, counter.figures.chat_requests) == (5, 1)
    # Then the request coming back cannot charge (or count) again
    late = call.finish()
    assert late.replayed and late.charged.micros == report.charged_micros
    assert ledger.usage_between(org.org_id, day, day) == [counter]
    assert ledger.violations(org.org_id) == []
    assert _sweep(ledger, store, clock).settled == []


def test_sweeper_charges_a_dead_stream_its_cached_input_at_the_cached_price(stack: LocalStack) -> None:
    # Given a stream whose vendor reported most of its long input read from its prompt cache
    # (and some written to it), checkpointed after 5 tokens, then its function died
    org = new_org(credit_usd="1")
    clock = FixedClock()
    content = "lorem " * 4000
    request = _request(model="claude-3-5-haiku", messages=[{"role": "user", "content": content}], stream=True)
    prompt = request.facts.prompt_tokens
    reported = Usage(prompt, 1, cached_input_tokens=prompt * 3 // 4, cache_write_input_tokens=prompt // 8)
    direct, store = _direct(ScriptedProvider("anthropic", tokens=10, reported=reported), clock)
    call = _checkpointed(direct, org, request, clock)
    # When the sweeper settles it once it is stale
    clock.advance(seconds=301)
    ledger = LedgerStore(get_settings().table_name("ledger"))
    report = _sweep(ledger, store, clock)
    # Then each input kind is charged at the lane's direct price for it, far below fresh input
    assert report.settled == [call.hold_id]
    price = call.lane.lane.price
    cached = usage_cost(
        price.direct,
        prompt,
        5,
        cached_input_tokens=reported.cached_input_tokens,
        cache_write_input_tokens=reported.cache_write_input_tokens,
    )
    assert report.charged_micros == Money.usd_ceil(cached).micros
    assert report.charged_micros < Money.usd_ceil(usage_cost(price.direct, prompt, 5)).micros
    # And the record and the usage counters keep the split
    record = store.record(call.batch_id)
    assert record is not None and record.state == "failed"
    day = usage_day(clock.now(), "UTC")
    (counter,) = ledger.usage_between(org.org_id, day, day)
    assert counter.figures.cached_input_tokens == reported.cached_input_tokens
    assert counter.figures.cache_write_input_tokens == reported.cache_write_input_tokens
    # And the money adds up: reserved = charged + released, settled exactly once
    billing = record.billing or {}
    reserved, charged, released = (
        Money.usd(Decimal(billing[name]["amount"]))
        for name in ("credit_reserved", "credit_charged", "credit_released")
    )
    assert charged.micros == report.charged_micros and reserved == charged + released
    assert ledger.state(org.org_id).reserved == Money.zero()
    assert ledger.violations(org.org_id) == []
    assert _sweep(ledger, store, clock).settled == []
    late = call.finish()
    assert late.replayed and late.charged.micros == report.charged_micros


def test_sweeper_charges_a_dead_stream_the_web_searches_its_vendor_reported(stack: LocalStack) -> None:
    # Given a stream asking Claude for web search, whose vendor reported two searches, that was
    # checkpointed after 5 tokens, then its function died
    org = new_org(credit_usd="1")
    clock = FixedClock()
    request = _request(
        model="claude-sonnet-4",
        messages=[{"role": "user", "content": "Search the news."}],
        tools=[{"type": "web_search"}],
        stream=True,
    )
    prompt = request.facts.prompt_tokens
    reported = Usage(prompt, 1, (("web_search", 2),))
    direct, store = _direct(ScriptedProvider("anthropic", tokens=10, reported=reported), clock)
    call = _checkpointed(direct, org, request, clock)
    # When the sweeper settles it once it is stale
    clock.advance(seconds=301)
    ledger = LedgerStore(get_settings().table_name("ledger"))
    report = _sweep(ledger, store, clock)
    # Then the tokens are charged at the lane's direct prices and the two searches at 10.00 USD
    # per 1,000 (they were run: the vendor bills them whatever became of the stream)
    assert report.settled == [call.hold_id]
    tokens = usage_cost(call.lane.lane.price.direct, prompt, 5)
    assert report.charged_micros == Money.usd_ceil(tokens + Decimal("0.02")).micros
    # And the money adds up: reserved = charged + released, settled exactly once
    record = store.record(call.batch_id)
    assert record is not None and record.usage_checkpoint is not None
    assert record.usage_checkpoint.usage.tool_uses == ToolUses((("web_search", 2),))
    billing = record.billing or {}
    reserved, charged, released = (
        Money.usd(Decimal(billing[name]["amount"]))
        for name in ("credit_reserved", "credit_charged", "credit_released")
    )
    assert charged.micros == report.charged_micros and reserved == charged + released
    assert ledger.violations(org.org_id) == []
    late = call.finish()
    assert late.replayed and late.charged.micros == report.charged_micros


def test_sweeper_counts_a_dead_request_in_the_orgs_limit_period_not_utcs(stack: LocalStack) -> None:
    # Given an org whose daily hard limit runs on Los Angeles days, and a stream that died at
    # 20:00 there on 1 March (04:00 UTC on 2 March) after a checkpoint at 5 tokens
    org = new_org(credit_usd="1")
    client = TestClient(create_app(), raise_server_exceptions=False)
    controls_body = {
        "limit_enabled": True,
        "limit_period": "daily",
        "limit_amount": "0.0001",
        "limit_mode": "hard",
        "limit_timezone": "America/Los_Angeles",
    }
    saved = client.put("/v1/billing/controls", json=controls_body, headers=org.session_headers("billing"))
    assert saved.status_code == 200, saved.text
    clock = FixedClock(datetime(2026, 3, 2, 4, 0, tzinfo=UTC))
    direct, store = _direct(ScriptedProvider("edge-eu", tokens=10), clock)
    call = _checkpointed(direct, org, _request(stream=True), clock)
    clock.advance(seconds=301)
    # When the sweeper settles it
    ledger = LedgerStore(get_settings().table_name("ledger"))
    report = _sweep(ledger, store, clock)
    assert report.settled == [call.hold_id] and report.charged_micros > 0
    # Then its spend is in the Los Angeles day and month the hard limit reads (not 2 March UTC),
    # and its usage on that day
    spend = {key: money.micros for key, money in ledger.spend_counters(org.org_id).items()}
    assert spend == {"D#2026-03-01": report.charged_micros, "M#2026-03": report.charged_micros}
    (counter,) = ledger.usage_between(org.org_id, "2026-03-01", "2026-03-01")
    assert counter.figures.cost_micros == report.charged_micros
    assert ledger.violations(org.org_id) == []


def test_hold_covers_the_dearest_lane_that_may_answer(stack: LocalStack) -> None:
    org = new_org(credit_usd="1")
    direct, _ = _direct(ScriptedProvider("edge-eu"), SystemClock())
    plan = direct.plan(_request())
    dearest = max(plan.lanes, key=lambda lane: lane.hold)
    prompt = _request().facts.prompt_tokens
    price = dearest.lane.price
    expected = Money.usd_ceil(
        (Decimal(prompt) * price.input_per_mtok + Decimal(dearest.max_output_tokens) * price.output_per_mtok)
        / 1_000_000
    )
    assert plan.hold == expected
    assert org.org_id


# -- the HTTP answer: settled before its last byte; a disconnect stops upstream -----------------
class _Disconnected(OSError):
    pass


def _asgi_post(app: Any, body: dict[str, Any], headers: dict[str, str], send: Any) -> None:
    """Drive the app as an ASGI server would (spec 2.4: a failed send is a disconnect)."""
    payload = json.dumps(body).encode()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/chat/completions",
        "raw_path": b"/v1/chat/completions",
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]
        + [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": payload, "more_body": False}
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def main() -> None:
        with contextlib.suppress(_Disconnected, ClientDisconnect):
            await app(scope, receive, send)

    anyio.run(main)


def _settings(**update: Any) -> Any:
    return get_settings().model_copy(update={"simulated_ttft_ms": 0, "simulated_inter_token_ms": 0, **update})


@pytest.mark.parametrize("stream", [True, False])
def test_hold_is_settled_before_the_answers_last_byte(
    stack: LocalStack, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    """This test used to assert the opposite order (`["last byte", "settle"]`, the settlement
    never holding back `[DONE]`). On AWS that loses money: under the Lambda Web Adapter's
    response streaming the invocation ends once the response's last byte is sent and Lambda
    freezes the environment, so a settlement left for after it runs only if that environment
    is reused; otherwise the sweeper settles the hold minutes later at its last checkpoint
    (nothing for an answer shorter than one checkpoint interval). The contract (spec, chat
    completions rule 3: the actual usage is charged after the call) wins over the few
    milliseconds the settlement adds before `[DONE]`."""
    # Given an org and a direct request, streamed or not
    org = new_org(credit_usd="1")
    settings = get_settings()
    ledger = LedgerStore(settings.table_name("ledger"))
    log: list[str] = []
    finish = DirectCall.finish
    at_last_byte: dict[str, Any] = {}

    def recording_finish(self: DirectCall, *, error: str | None = None) -> Any:
        if self.settlement is None:  # a later call only hands back the settlement
            log.append("settle")
        return finish(self, error=error)

    monkeypatch.setattr(DirectCall, "finish", recording_finish)

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            log.append("last byte")  # on AWS: the invocation's end
            hold = next(r for r in ledger.reservations(org.org_id) if r.purpose == "chat_hold")
            at_last_byte.update(status=hold.status, reserved=ledger.state(org.org_id).reserved)

    body = {
        "model": LLAMA,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 8,
        "stream": stream,
    }
    # When the app answers it
    _asgi_post(create_app(_settings()), body, org.key_headers(), send)
    # Then the hold was settled, once, before the last byte left
    assert log == ["settle", "last byte"]
    assert at_last_byte == {"status": "settled", "reserved": Money.zero()}
    assert ledger.state(org.org_id).reserved == Money.zero()
    assert ledger.violations(org.org_id) == []
    hold = next(r for r in ledger.reservations(org.org_id) if r.purpose == "chat_hold")
    assert hold.status == "settled" and hold.charged > Money.zero()


def test_client_disconnect_over_http_stops_upstream_and_charges_what_was_generated(
    stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a stream whose provider paces its tokens (20 ms apart, 10 s of them at most)
    org = new_org(credit_usd="1")
    closed: list[int] = []
    original = SimulatedSyncProvider._events

    def events(self: SimulatedSyncProvider, request: ProviderRequest, answer: Any, text: str) -> Any:
        sent = 0
        inner = original(self, request, answer, text)
        try:
            for event in inner:
                sent += isinstance(event, StreamDelta)
                yield event
        except GeneratorExit:
            closed.append(sent)
            inner.close()
            raise

    monkeypatch.setattr(SimulatedSyncProvider, "_events", events)
    content_chunks = 0

    async def send(message: dict[str, Any]) -> None:
        nonlocal content_chunks
        if message["type"] == "http.response.body" and b'"content":"' in message.get("body", b""):
            content_chunks += 1
            if content_chunks > 3:  # the client goes away after the role chunk and 3 deltas
                raise _Disconnected("client went away")

    body = {
        "model": LLAMA,
        "messages": [{"role": "user", "content": "tell me a long story"}],
        "max_tokens": 500,
        "stream": True,
    }
    _asgi_post(create_app(_settings(simulated_inter_token_ms=20)), body, org.key_headers(), send)
    # Then the upstream stream was closed early, and what it generated was charged, once
    assert len(closed) == 1 and 3 <= closed[0] < 20
    ledger = LedgerStore(get_settings().table_name("ledger"))
    hold = next(r for r in ledger.reservations(org.org_id) if r.purpose == "chat_hold")
    request = parse_chat_request(body, builtin_catalog())
    assert hold.status == "settled"
    assert hold.charged == _cost(request.facts.prompt_tokens, closed[0])
    assert ledger.state(org.org_id).reserved == Money.zero()
    assert ledger.violations(org.org_id) == []
