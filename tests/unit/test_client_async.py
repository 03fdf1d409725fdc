"""The async client against `httpx.MockTransport`: the same retry rules, idempotency key reuse,
pagination, `wait` and typed errors as the sync client (driven with `asyncio.run`)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from batchroute_client import (
    APIConnectionError,
    APIError,
    AsyncClient,
    ConflictError,
    InternalServerError,
    NotFoundError,
    UnexpectedResponse,
)
from batchroute_client._retry import Backoff

from tests.unit.test_client_sdk import BASE, Recorder, _chunk, batch, error
from tests.unit.test_client_settings import attempt, catalog_model, retention


def make(recorder: Recorder, sleeps: list[float], max_retries: int = 4) -> AsyncClient:
    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    return AsyncClient(
        api_key="sk-async-secret",
        base_url=BASE,
        max_retries=max_retries,
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(recorder)),
        backoff=Backoff(base=0.5, cap=8.0, random=lambda: 1.0),
        sleep=sleep,
        clock=lambda: 1_767_225_600.0,
    )


def test_create_retries_network_errors_429_and_5xx_with_one_idempotency_key() -> None:
    recorder = Recorder(
        httpx.ConnectError("refused"),
        error(429, "rate_limited", headers={"Retry-After": "3"}),
        error(503, "unavailable"),
        httpx.Response(202, json={"batch": batch(state="priced")}),
    )
    sleeps: list[float] = []
    created = asyncio.run(make(recorder, sleeps).batches.create(quote_id="qlock_1", items=[]))
    assert created.id == "batch_1" and created.state == "priced"
    assert sleeps == [0.5, 3.0, 2.0]
    assert len({r.headers["idempotency-key"] for r in recorder.requests}) == 1
    assert len({r.content for r in recorder.requests}) == 1 and len(recorder.requests) == 4


def test_4xx_are_not_retried_and_exhausted_retries_raise() -> None:
    recorder = Recorder(error(409, "idempotency_conflict"))
    sleeps: list[float] = []
    with pytest.raises(ConflictError) as caught:
        asyncio.run(make(recorder, sleeps).batches.create(quote_id="qlock_1", idempotency_key="k-12345678"))
    assert caught.value.code == "idempotency_conflict" and len(recorder.requests) == 1 and sleeps == []
    with pytest.raises(InternalServerError):
        asyncio.run(make(Recorder(error(500, "internal_error")), [], max_retries=1).batches.get("batch_1"))
    recorder = Recorder(httpx.ConnectError("reset"), httpx.Response(202, json={}))
    with pytest.raises(APIConnectionError):
        asyncio.run(make(recorder, []).files.create(b'{"customer_item_id": "a"}\n'))
    assert len(recorder.requests) == 1
    # A batch retry keys itself (docs/batches.md, "Retry"): repeated like a create
    answer = {"batch": batch("batch_2", "priced"), "source_batch_id": "batch_1", "retry_item_count": 1}
    recorder = Recorder(httpx.ReadTimeout("lost"), httpx.Response(202, json=answer))
    assert asyncio.run(make(recorder, []).batches.retry("batch_1")).batch.id == "batch_2"
    assert len(recorder.requests) == 2


def test_list_is_an_async_iterator_over_every_page_and_wait_reports_progress() -> None:
    pages = {
        None: {"data": [batch("batch_2")], "next_cursor": "c1", "workspace_total_count": 2},
        "c1": {"data": [batch("batch_1")], "next_cursor": None, "workspace_total_count": 2},
    }
    polls = iter([batch(completed=1), batch(state="completed", completed=3)])

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/batches":
            return httpx.Response(200, json=pages[request.url.params.get("cursor")])
        return httpx.Response(200, json={"batch": next(polls), "billing_receipt": None})

    sleeps: list[float] = []
    seen: list[int] = []

    async def run() -> tuple[list[str], Any]:
        client = make(Recorder(answer), sleeps)
        ids = [b.id async for b in client.batches.list()]
        done = await client.batches.wait(
            "batch_1", poll_interval=1.5, on_progress=lambda b: seen.append(b.counts.done)
        )
        return ids, done

    ids, done = asyncio.run(run())
    assert ids == ["batch_2", "batch_1"]
    assert done.state == "completed" and seen == [1, 3] and sleeps == [1.5]


def test_async_chat_stream_and_create_retry_only_a_429() -> None:
    events = [_chunk(None), _chunk("Hi"), _chunk(" there"), _chunk(None, "stop")]
    sse = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    recorder = Recorder(error(429, "rate_limited"), httpx.Response(200, text=sse))
    sleeps: list[float] = []

    async def stream() -> str:
        client = make(recorder, sleeps)
        return "".join([c.text async for c in client.chat.stream("m", [{"role": "user", "content": "hi"}])])

    assert asyncio.run(stream()) == "Hi there"
    assert sleeps == [0.5] and len(recorder.requests) == 2
    recorder = Recorder(error(503, "unavailable"), httpx.Response(200, json={}))
    with pytest.raises(InternalServerError):
        asyncio.run(make(recorder, []).chat.create("m", [{"role": "user", "content": "hi"}]))
    assert len(recorder.requests) == 1


def test_an_html_page_raises_unexpected_response_not_a_json_error() -> None:
    page = httpx.Response(200, text="<html></html>", headers={"content-type": "text/html"})

    async def scenario() -> None:
        async with make(Recorder(page), []) as client:
            await client.batches.get("batch_1")

    with pytest.raises(
        UnexpectedResponse, match=r"GET https://api.test/v1/batches/batch_1 answered HTTP 200"
    ):
        asyncio.run(scenario())


def test_an_async_stream_that_fails_midway_raises_its_error_event_and_one_cut_off_raises_too() -> None:
    failure = {
        "code": "provider_failed",
        "message": "The provider failed.",
        "details": {"provider": "edge-eu"},
    }
    failed = "".join(f"data: {json.dumps(e)}\n\n" for e in (_chunk("Hello"), {"error": failure}))
    cut = f"data: {json.dumps(_chunk('Hello'))}\n\n"
    texts: list[str] = []

    async def stream(body: str) -> None:
        answer = httpx.Response(200, text=body, headers={"x-request-id": "req_7"})
        async for chunk in make(Recorder(answer), []).chat.stream("m", [{"role": "user", "content": "hi"}]):
            texts.append(chunk.text)

    with pytest.raises(APIError) as raised:
        asyncio.run(stream(failed))
    assert texts == ["Hello"] and raised.value.request_id == "req_7"
    assert (raised.value.code, raised.value.message, raised.value.details) == (
        "provider_failed",
        "The provider failed.",
        {"provider": "edge-eu"},
    )
    with pytest.raises(APIConnectionError, match="the stream ended before"):
        asyncio.run(stream(cut))


def test_the_settings_billing_delivery_and_catalog_calls_are_awaited_and_listed_async() -> None:
    pages = {
        None: {"data": [attempt("att_2")], "next_cursor": "c1"},
        "c1": {"data": [attempt("att_1")], "next_cursor": None},
    }

    def answer(request: httpx.Request) -> httpx.Response:
        path = request.url.raw_path.decode().split("?")[0]
        if path == "/v1/billing/auto-topup/attempts":
            return httpx.Response(200, json=pages[request.url.params.get("cursor")])
        if path == "/v1/retention-settings":
            return httpx.Response(200, json=retention("until_deleted"))
        if path == "/v1/catalog/models/meta-llama/Llama-3.3-70B-Instruct":
            return httpx.Response(200, json={"model": catalog_model(), "pricing_updated_at": None})
        return error(404, "delivery_target_not_found")

    recorder = Recorder(answer)

    async def run() -> tuple[Any, list[str], Any]:
        async with make(recorder, []) as client:
            settings = await client.settings.update_retention(retention_tier="until_deleted")
            attempts = [a.id async for a in client.billing.auto_topup_attempts(page_size=1)]
            model = await client.catalog.model("meta-llama/Llama-3.3-70B-Instruct")
            with pytest.raises(NotFoundError) as missing:
                await client.delivery_targets.test("dt_9")
            assert missing.value.code == "delivery_target_not_found"
            return settings, attempts, model

    settings, attempts, model = asyncio.run(run())
    assert settings.retention_tier == "until_deleted" and attempts == ["att_2", "att_1"]
    assert model.providers[0].pricing.batch_output == "0.79"
    assert [(r.method, r.url.path, dict(r.url.params)) for r in recorder.requests] == [
        ("PUT", "/v1/retention-settings", {}),
        ("GET", "/v1/billing/auto-topup/attempts", {"limit": "1"}),
        ("GET", "/v1/billing/auto-topup/attempts", {"limit": "1", "cursor": "c1"}),
        ("GET", "/v1/catalog/models/meta-llama/Llama-3.3-70B-Instruct", {}),
        ("POST", "/v1/delivery-targets/dt_9/test", {}),
    ]
    assert json.loads(recorder.requests[0].content) == {"retention_tier": "until_deleted"}
