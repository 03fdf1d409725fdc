"""The Python client against `httpx.MockTransport`: the spec's retry rules (network errors,
429, 5xx; never 400/401/403/409), `Retry-After` as the minimum wait, one `Idempotency-Key`
and body across create retries, cursor pagination, `wait` with progress, error mapping.
An injected sleeper records the waits; nothing really sleeps."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from batchroute_client import (
    APIConnectionError,
    APIError,
    AuthenticationError,
    BadRequestError,
    Client,
    ConflictError,
    InsufficientFundsError,
    InternalServerError,
    InvalidRequestError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    UnexpectedResponse,
    WaitTimeoutError,
)
from batchroute_client._retry import Backoff
from batchroute_client.models import Batch, BillingControls

BASE = "https://api.test"
Answer = Callable[[httpx.Request], httpx.Response]


def batch(
    batch_id: str = "batch_1", state: str = "running", completed: int = 0, settled: bool | None = None
) -> dict[str, Any]:
    """A batch summary; a terminal one is settled (`settled_at`) unless `settled=False`, as the
    service shows it once its work in flight has ended."""
    if settled is None:
        settled = state in ("completed", "failed", "canceled", "expired")
    return {
        "id": batch_id,
        "object": "batch",
        "state": state,
        "counts": {
            "total": 3,
            "pending": 3 - completed,
            "running": 0,
            "completed": completed,
            "failed": 0,
            "canceled": 0,
        },
        "created_at": "2026-03-01T10:00:00.000Z",
        "settled_at": "2026-03-01T10:05:00.000Z" if settled else None,
    }


def error(status: int, code: str, headers: dict[str, str] | None = None, **details: Any) -> httpx.Response:
    body: dict[str, Any] = {"error": {"code": code, "message": f"{code} happened"}}
    if details:
        body["error"]["details"] = details
    return httpx.Response(status, json=body, headers=headers)


class Recorder:
    """A transport answering from a script, recording every request."""

    def __init__(
        self, *answers: httpx.Response | Exception | Callable[[httpx.Request], httpx.Response]
    ) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        if callable(answer):
            return answer(request)
        return answer


def make(recorder: Recorder, sleeps: list[float], max_retries: int = 4, **kwargs: Any) -> Client:
    return Client(
        api_key="sk-test-secret",
        base_url=BASE,
        max_retries=max_retries,
        http_client=httpx.Client(transport=httpx.MockTransport(recorder)),
        backoff=Backoff(base=0.5, cap=8.0, random=lambda: 1.0),
        sleep=sleeps.append,
        clock=lambda: 1_767_225_600.0,
        **kwargs,
    )


def test_network_errors_429_and_5xx_are_retried_with_exponential_backoff() -> None:
    recorder = Recorder(
        httpx.ConnectError("refused"),
        error(429, "rate_limited"),
        error(503, "unavailable"),
        error(500, "internal_error"),
        httpx.Response(200, json={"batch": batch(), "billing_receipt": None}),
    )
    sleeps: list[float] = []
    got = make(recorder, sleeps).batches.get("batch_1")
    assert got.id == "batch_1" and got.counts.total == 3
    assert len(recorder.requests) == 5
    assert sleeps == [0.5, 1.0, 2.0, 4.0]
    assert recorder.requests[0].headers["authorization"] == "Bearer sk-test-secret"


def test_an_answer_that_says_not_to_retry_is_not_retried() -> None:
    # The vendor-compatible surface's 429 insufficient_quota says so: no credit will come back
    # in the seconds a retry waits
    refused = error(429, "insufficient_quota", headers={"x-should-retry": "false"})
    recorder = Recorder(refused, httpx.Response(200, json={"batch": batch(), "billing_receipt": None}))
    sleeps: list[float] = []
    with pytest.raises(APIError):
        make(recorder, sleeps).request("GET", "/v1/compat/v1/batches/batch_1")
    assert len(recorder.requests) == 1 and sleeps == []


def test_jitter_draws_between_half_and_all_of_the_delay_and_is_capped() -> None:
    assert Backoff(base=0.5, cap=8.0, random=lambda: 0.0).delay(3) == 1.0
    assert Backoff(base=0.5, cap=8.0, random=lambda: 1.0).delay(3) == 2.0
    assert Backoff(base=0.5, cap=8.0, random=lambda: 1.0).delay(10) == 8.0


def test_retry_after_is_the_minimum_wait_in_seconds_or_as_an_http_date() -> None:
    recorder = Recorder(
        error(429, "rate_limited", headers={"Retry-After": "7"}),
        error(429, "rate_limited", headers={"Retry-After": "Thu, 01 Jan 2026 00:00:30 GMT"}),
        error(503, "unavailable", headers={"Retry-After": "0"}),
        httpx.Response(200, json={"batch": batch(), "billing_receipt": None}),
    )
    sleeps: list[float] = []
    make(recorder, sleeps).batches.get("batch_1")
    # 7 s > backoff 0.5; the date is 30 s after the injected clock (2026-01-01T00:00:00Z) > 1.0;
    # Retry-After 0 never shortens the backoff (2.0)
    assert sleeps == [7.0, 30.0, 2.0]


def test_retries_stop_at_max_retries_and_raise_the_typed_error() -> None:
    recorder = Recorder(error(503, "unavailable"))
    sleeps: list[float] = []
    with pytest.raises(InternalServerError) as caught:
        make(recorder, sleeps, max_retries=2).batches.get("batch_1")
    assert len(recorder.requests) == 3 and len(sleeps) == 2
    assert (caught.value.status, caught.value.code) == (503, "unavailable")
    recorder = Recorder(httpx.ReadTimeout("slow"))
    with pytest.raises(APIConnectionError):
        make(recorder, [], max_retries=1).batches.get("batch_1")
    assert len(recorder.requests) == 2
    recorder = Recorder(error(429, "rate_limited"))
    with pytest.raises(RateLimitError):
        make(recorder, [], max_retries=0).batches.get("batch_1")
    assert len(recorder.requests) == 1


@pytest.mark.parametrize(
    ("status", "code", "cls"),
    [
        (400, "batch_preflight_failed", BadRequestError),
        (401, "unauthorized", AuthenticationError),
        (402, "insufficient_credits", InsufficientFundsError),
        (403, "forbidden", PermissionDeniedError),
        (404, "not_found", NotFoundError),
        (409, "idempotency_conflict", ConflictError),
    ],
)
def test_4xx_are_never_retried_and_map_to_typed_errors(status: int, code: str, cls: type) -> None:
    recorder = Recorder(error(status, code, limit="10.00"))
    sleeps: list[float] = []
    with pytest.raises(cls) as caught:
        make(recorder, sleeps).batches.create(quote_id="qlock_1", items=[])
    assert len(recorder.requests) == 1 and sleeps == []
    assert (caught.value.status, caught.value.code, caught.value.message) == (
        status,
        code,
        f"{code} happened",
    )
    assert caught.value.details == {"limit": "10.00"}
    assert "sk-test-secret" not in str(caught.value)


def test_create_reuses_one_idempotency_key_and_body_on_every_retry() -> None:
    recorder = Recorder(
        httpx.ConnectError("reset"), error(502, "bad_gateway"), httpx.Response(202, json={"batch": batch()})
    )
    client = make(recorder, [])
    created = client.batches.create(quote_id="qlock_1", items=[{"customer_item_id": "a"}])
    assert created.id == "batch_1"
    keys = {request.headers["idempotency-key"] for request in recorder.requests}
    bodies = {request.content for request in recorder.requests}
    assert len(recorder.requests) == 3 and len(keys) == 1 and len(bodies) == 1
    (key,) = keys
    assert 8 <= len(key) <= 128
    assert json.loads(bodies.pop()) == {"quote_id": "qlock_1", "items": [{"customer_item_id": "a"}]}
    # A new call gets a new key; a given key is sent as is
    client.batches.create(quote_id="qlock_1", items=[])
    assert recorder.requests[-1].headers["idempotency-key"] != key
    client.batches.create(quote_id="qlock_1", items=[], idempotency_key="my-key-123")
    assert recorder.requests[-1].headers["idempotency-key"] == "my-key-123"


def test_retry_batch_is_repeated_after_a_network_error_a_5xx_or_a_429() -> None:
    """The service keys a retry by its source batch (docs/batches.md, "Retry"): a repeat
    answers with the batch the lost attempt created, so it is safe to send again."""
    answer = {"batch": batch("batch_2", "priced"), "source_batch_id": "batch_1", "retry_item_count": 2}
    for failure in (httpx.ReadTimeout("lost"), error(500, "internal_error"), error(429, "rate_limited")):
        recorder = Recorder(failure, httpx.Response(202, json=answer))
        retried = make(recorder, []).batches.retry("batch_1")
        assert (retried.batch.id, retried.source_batch_id, retried.retry_item_count) == (
            "batch_2",
            "batch_1",
            2,
        )
        assert len(recorder.requests) == 2
        assert {r.url.path for r in recorder.requests} == {"/v1/batches/batch_1/retry"}


def test_list_iterates_every_page_following_next_cursor() -> None:
    pages = {
        None: {"data": [batch("batch_3"), batch("batch_2")], "next_cursor": "c1", "workspace_total_count": 3},
        "c1": {"data": [batch("batch_1")], "next_cursor": None, "workspace_total_count": 3},
    }

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=pages[request.url.params.get("cursor")])

    recorder = Recorder(answer)
    ids = [b.id for b in make(recorder, []).batches.list(state="active", page_size=2)]
    assert ids == ["batch_3", "batch_2", "batch_1"]
    assert [r.url.params.get("cursor") for r in recorder.requests] == [None, "c1"]
    assert all(r.url.params["state"] == "active" and r.url.params["limit"] == "2" for r in recorder.requests)


def test_results_and_items_iterate_every_page() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        cursor = request.url.params.get("cursor")
        if request.url.path.endswith("/results"):
            row = {
                "customer_item_id": f"r{cursor}",
                "sequence_number": 0,
                "status": "completed",
                "output": {"text": "hi"},
                "error": None,
            }
        else:
            row = {
                "sequence_number": 0,
                "customer_item_id": f"i{cursor}",
                "model": "m",
                "operation": "responses",
                "status": "failed",
                "error": {"code": "x", "message": "y"},
                "output_preview": None,
            }
        return httpx.Response(
            200, json={"batch_id": "batch_1", "data": [row], "next_cursor": None if cursor else "2"}
        )

    client = make(Recorder(answer), [])
    assert [r.customer_item_id for r in client.batches.results("batch_1")] == ["rNone", "r2"]
    items = list(client.batches.items("batch_1", status="failed"))
    assert [i.customer_item_id for i in items] == ["iNone", "i2"] and items[0].error == {
        "code": "x",
        "message": "y",
    }


def test_wait_polls_to_a_terminal_state_reporting_progress() -> None:
    recorder = Recorder(
        httpx.Response(200, json={"batch": batch(completed=0), "billing_receipt": None}),
        httpx.Response(200, json={"batch": batch(completed=2), "billing_receipt": None}),
        httpx.Response(200, json={"batch": batch(state="completed", completed=3), "billing_receipt": None}),
    )
    sleeps: list[float] = []
    seen: list[tuple[str, int]] = []
    done = make(recorder, sleeps).batches.wait(
        "batch_1", poll_interval=2.5, on_progress=lambda b: seen.append((b.state, b.counts.completed))
    )
    assert done.state == "completed" and done.is_terminal
    assert seen == [("running", 0), ("running", 2), ("completed", 3)]
    assert sleeps == [2.5, 2.5]


def canceled(pending: int, running: int, *, settled: bool) -> httpx.Response:
    """A canceled batch of 3: one item completed, `running` still in flight, `pending` not
    yet counted canceled; settled once its in-flight work ended."""
    body = batch(state="canceled", completed=1, settled=settled)
    body["counts"].update(pending=pending, running=running, canceled=2 - pending - running)
    return httpx.Response(200, json={"batch": body, "billing_receipt": None})


def test_wait_on_a_canceled_batch_returns_once_its_work_in_flight_ended_and_it_settled() -> None:
    # Given a batch canceled while one item runs and one waits: terminal, not settled
    recorder = Recorder(
        canceled(pending=1, running=1, settled=False),
        canceled(pending=0, running=1, settled=False),
        canceled(pending=0, running=0, settled=True),
    )
    sleeps: list[float] = []
    seen: list[tuple[int, int, bool]] = []
    done = make(recorder, sleeps).batches.wait(
        "batch_1",
        poll_interval=2,
        on_progress=lambda b: seen.append((b.counts.running, b.counts.pending, b.is_settled)),
    )
    # Then wait kept polling past `canceled` until the batch settled
    assert seen == [(1, 1, False), (1, 0, False), (0, 0, True)] and sleeps == [2, 2]
    assert done.state == "canceled" and done.is_terminal and done.is_settled
    assert done.counts.canceled == 2 and done.settled_at


def test_a_wait_that_times_out_on_an_unsettled_canceled_batch_says_so() -> None:
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    client = Client(
        api_key="k",
        base_url=BASE,
        http_client=httpx.Client(transport=httpx.MockTransport(Recorder(canceled(0, 1, settled=False)))),
        sleep=sleep,
        monotonic=lambda: now[0],
    )
    with pytest.raises(WaitTimeoutError, match="batch_1 canceled, not settled yet after 5 s"):
        client.batches.wait("batch_1", poll_interval=2, timeout=5)


def test_wait_gives_up_after_its_timeout() -> None:
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    recorder = Recorder(httpx.Response(200, json={"batch": batch(), "billing_receipt": None}))
    client = Client(
        api_key="k",
        base_url=BASE,
        http_client=httpx.Client(transport=httpx.MockTransport(recorder)),
        sleep=sleep,
        monotonic=lambda: now[0],
    )
    with pytest.raises(WaitTimeoutError):
        client.batches.wait("batch_1", poll_interval=10, timeout=35)
    # polled at 0, 10, 20 and 30 s, and a last time when the 35 s were up: never earlier
    assert len(recorder.requests) == 5 and now[0] == 35
    # And an interval longer than the timeout still waits the whole timeout
    now[0] = 0.0
    with pytest.raises(WaitTimeoutError):
        client.batches.wait("batch_1", poll_interval=10, timeout=5)
    assert len(recorder.requests) == 7 and now[0] == 5


def test_a_client_needs_a_key_and_never_shows_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BATCHROUTE_API_KEY", raising=False)
    with pytest.raises(ValueError, match="API key"):
        Client(base_url=BASE)
    monkeypatch.setenv("BATCHROUTE_API_KEY", "sk-from-env")
    monkeypatch.setenv("BATCHROUTE_BASE_URL", BASE)
    client = Client()
    assert "sk-from-env" not in repr(client) and client.base_url == BASE


def test_chat_job_and_billing_controls_are_typed() -> None:
    job = {
        "id": "chatjob_1",
        "object": "chat.completion.job",
        "status": "completed",
        "model": "m",
        "batch_id": "batch_1",
        "created": 1767225600,
        "result": {"object": "chat.completion", "choices": []},
        "error": None,
    }
    controls = {
        "org_id": "org_1",
        "configured": True,
        "limit_enabled": True,
        "limit_period": "monthly",
        "limit_amount": {"currency": "usd", "amount": "50"},
        "limit_mode": "hard",
        "limit_timezone": "UTC",
        "low_balance_amount": None,
        "alert_thresholds": [],
        "alert_email_enabled": True,
        "alert_webhook_enabled": False,
        "created_at": None,
        "updated_at": None,
    }

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/chat/completions/chatjob_1":
            return httpx.Response(200, json=job)
        assert request.url.path == "/v1/billing/controls"
        return httpx.Response(200, json={"controls": controls})

    client = make(Recorder(answer), [])
    got = client.chat_job("chatjob_1")
    assert (got.id, got.status, got.batch_id, got.created) == (
        "chatjob_1",
        "completed",
        "batch_1",
        1767225600,
    )
    assert got.result == job["result"]
    limits = client.billing_controls()
    assert limits.limit_enabled and limits.limit_amount is not None and str(limits.limit_amount.value) == "50"
    assert limits.low_balance_amount is None and limits.limit_mode == "hard"
    assert limits.configured is True and (limits.created_at, limits.updated_at) == (None, None)


def test_billing_controls_keep_configured_and_their_times_and_default_email_alerts_on() -> None:
    """The spec's billing controls: `configured` and the timestamps are typed, and an absent
    `alert_email_enabled` is the spec's default, true."""
    saved = BillingControls.from_dict(
        {
            "org_id": "org_1",
            "configured": True,
            "limit_enabled": False,
            "limit_mode": "soft",
            "limit_timezone": "UTC",
            "alert_email_enabled": False,
            "created_at": "2026-03-01T10:00:00.000Z",
            "updated_at": "2026-03-02T10:00:00.000Z",
        }
    )
    assert saved.configured and not saved.alert_email_enabled
    assert (saved.created_at, saved.updated_at) == ("2026-03-01T10:00:00.000Z", "2026-03-02T10:00:00.000Z")
    fresh = BillingControls.from_dict(
        {"org_id": "org_1", "limit_enabled": False, "limit_mode": "soft", "limit_timezone": "UTC"}
    )
    assert (fresh.configured, fresh.alert_email_enabled, fresh.alert_webhook_enabled) == (False, True, False)
    assert (fresh.created_at, fresh.updated_at) == (None, None)


def _chunk(text: str | None, finish: str | None = None) -> dict[str, Any]:
    delta = {"content": text} if text is not None else {"role": "assistant"}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "provider": "p",
        "system_fingerprint": None,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


def test_the_last_chunk_of_a_stream_with_include_usage_carries_the_usage_typed() -> None:
    usage = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    last = {**_chunk(None), "choices": [], "usage": usage}
    sse = "".join(f"data: {json.dumps(e)}\n\n" for e in (_chunk("Hi", "stop"), last)) + "data: [DONE]\n\n"
    recorder = Recorder(httpx.Response(200, text=sse, headers={"content-type": "text/event-stream"}))
    options = {"stream_options": {"include_usage": True}}
    chunks = list(make(recorder, []).chat.stream("m", [{"role": "user", "content": "hi"}], **options))
    assert [(c.text, c.usage) for c in chunks] == [("Hi", None), ("", usage)]
    assert json.loads(recorder.requests[0].content)["stream_options"] == {"include_usage": True}


def test_chat_stream_yields_chunks_until_done_and_retries_only_a_429() -> None:
    events = [_chunk(None), _chunk("Hel"), _chunk("lo"), _chunk(None, "stop")]
    sse = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    recorder = Recorder(
        error(429, "rate_limited", headers={"Retry-After": "2"}),
        httpx.Response(200, text=sse, headers={"content-type": "text/event-stream"}),
    )
    sleeps: list[float] = []
    chunks = list(make(recorder, sleeps).chat.stream("m", [{"role": "user", "content": "hi"}]))
    assert "".join(c.text for c in chunks) == "Hello" and len(chunks) == 4
    assert sleeps == [2.0] and len(recorder.requests) == 2
    assert json.loads(recorder.requests[-1].content)["stream"] is True
    # A 5xx on a direct (charged) chat request is not repeated
    recorder = Recorder(error(502, "upstream_failed"), httpx.Response(200, text=sse))
    with pytest.raises(InternalServerError):
        list(make(recorder, []).chat.stream("m", [{"role": "user", "content": "hi"}]))
    assert len(recorder.requests) == 1


def test_chat_create_and_queue_are_not_repeated_after_a_network_error() -> None:
    completion = {
        "id": "chatcmpl-2",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "provider": "p",
        "system_fingerprint": None,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "Hi!"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
    recorder = Recorder(httpx.Response(200, json=completion))
    answer = make(recorder, []).chat.create("m", [{"role": "user", "content": "hi"}], temperature=0)
    assert answer.text == "Hi!" and answer.provider == "p"
    assert json.loads(recorder.requests[0].content)["temperature"] == 0
    recorder = Recorder(httpx.ConnectError("reset"), httpx.Response(200, json=completion))
    with pytest.raises(APIConnectionError):
        make(recorder, []).chat.create("m", [{"role": "user", "content": "hi"}])
    assert len(recorder.requests) == 1
    job = {"id": "chatjob_1", "status": "queued", "batch_id": "batch_1", "created": 1, "model": "m"}
    recorder = Recorder(httpx.Response(202, json=job))
    queued = make(recorder, []).chat.queue("m", [{"role": "user", "content": "hi"}])
    assert (queued.id, queued.status) == ("chatjob_1", "queued")
    assert json.loads(recorder.requests[0].content)["batch"] is True


@pytest.mark.parametrize("code", ["provider_unavailable", "provider_failed"])
def test_a_chat_request_the_service_says_it_did_nothing_for_is_repeated(code: str) -> None:
    # A 503 whose code says no provider answered (or the answer failed before it was whole):
    # the service released the hold and charged nothing (docs/chat.md), so it is repeated
    # after its Retry-After, streamed or not
    completion = {
        "id": "chatcmpl-3",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "provider": "p",
        "system_fingerprint": None,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
    recorder = Recorder(error(503, code, headers={"Retry-After": "1"}), httpx.Response(200, json=completion))
    sleeps: list[float] = []
    assert make(recorder, sleeps).chat.create("m", [{"role": "user", "content": "hi"}]).text == "Hi"
    assert len(recorder.requests) == 2 and sleeps == [1.0]
    sse = f"data: {json.dumps(_chunk('Hi', 'stop'))}\n\ndata: [DONE]\n\n"
    recorder = Recorder(error(503, code), httpx.Response(200, text=sse))
    assert (
        "".join(c.text for c in make(recorder, []).chat.stream("m", [{"role": "user", "content": "hi"}]))
        == "Hi"
    )
    assert len(recorder.requests) == 2
    # Another 503 (the request may have run) is not repeated
    recorder = Recorder(error(503, "upstream_busy"), httpx.Response(200, json=completion))
    with pytest.raises(InternalServerError):
        make(recorder, []).chat.create("m", [{"role": "user", "content": "hi"}])
    assert len(recorder.requests) == 1


# -- answers that are not the API's JSON ------------------------------------------------------------
HTML = httpx.Response(
    200, text="<!doctype html><title>Console</title>", headers={"content-type": "text/html"}
)


def test_an_answer_that_is_not_the_apis_json_raises_unexpected_response_naming_what_answered() -> None:
    console = Client(
        api_key="sk-test-secret",
        base_url=BASE + "/console",
        http_client=httpx.Client(transport=httpx.MockTransport(Recorder(HTML))),
    )
    with pytest.raises(UnexpectedResponse) as raised:
        console.batches.get("batch_1")
    got = raised.value
    assert (got.method, got.url, got.status, got.content_type) == (
        "GET",
        f"{BASE}/console/v1/batches/batch_1",
        200,
        "text/html",
    )
    assert str(got).startswith(f"GET {BASE}/console/v1/batches/batch_1 answered HTTP 200 (text/html): ")
    assert "not the API's JSON" in str(got) and "sk-test-secret" not in str(got)
    # The raw request, the listings and the account read the same way.
    for call in (lambda: console.request("GET", "/v1/usage"), lambda: list(console.batches.list())):
        with pytest.raises(UnexpectedResponse):
            call()

    # JSON that is not the document, and an empty body where one is needed.
    client = make(Recorder(httpx.Response(200, json={"hello": "world"})), [])
    with pytest.raises(
        UnexpectedResponse, match=r"JSON that is not the API's document \(KeyError: 'batch'\)"
    ):
        client.batches.get("batch_1")
    with pytest.raises(UnexpectedResponse, match="JSON that is not the API's document"):
        make(Recorder(httpx.Response(200, json=["a"])), []).account()
    with pytest.raises(UnexpectedResponse, match=r"answered HTTP 200 \(no content type\): an empty body"):
        make(Recorder(httpx.Response(200)), []).usage()
    # An empty body is still fine where the API may send none.
    assert make(Recorder(httpx.Response(204)), []).request("POST", "/v1/x") is None


def test_a_proxy_error_page_keeps_its_status_class_and_names_the_url_status_and_content_type() -> None:
    page = httpx.Response(502, text="<html>Bad Gateway</html>", headers={"content-type": "text/html"})
    sleeps: list[float] = []
    with pytest.raises(InternalServerError) as raised:
        make(Recorder(page), sleeps, max_retries=1).usage()
    assert raised.value.code == "http_502" and len(sleeps) == 1
    assert raised.value.message == f"HTTP 502 from GET {BASE}/v1/usage (text/html), not the API's JSON error"
    # A signed URL's query (its signature) never reaches the message.
    signed = "https://bucket.test/results.jsonl?X-Amz-Signature=s3cr3t"
    recorder = Recorder(
        lambda request: (
            httpx.Response(200, json={"url": signed})
            if request.url.host == "api.test"
            else httpx.Response(403, text="<Error/>", headers={"content-type": "application/xml"})
        )
    )
    with pytest.raises(PermissionDeniedError) as denied:
        make(recorder, []).batches.download_artifact("batch_1", io.BytesIO())
    assert denied.value.message == (
        "HTTP 403 from GET https://bucket.test/results.jsonl (application/xml), not the API's JSON error"
    )


def test_a_stream_that_is_not_the_apis_event_stream_raises_unexpected_response() -> None:
    client = make(Recorder(HTML), [])
    with pytest.raises(UnexpectedResponse, match="not the API's event stream"):
        list(client.chat.stream("m", [{"role": "user", "content": "hi"}]))
    broken = httpx.Response(200, text="data: {not json\n\n", headers={"content-type": "text/event-stream"})
    with pytest.raises(UnexpectedResponse, match="an event that is not the API's JSON"):
        list(make(Recorder(broken), []).chat.stream("m", [{"role": "user", "content": "hi"}]))


def test_a_key_is_stripped_and_one_with_whitespace_control_or_non_ascii_characters_is_refused_unshown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A secret mounted from a file or a CRLF .env ends in a newline: it is dropped, not sent
    recorder = Recorder(httpx.Response(200, json={"batch": batch(), "billing_receipt": None}))
    client = Client(
        api_key=" sk-test-secret\r\n",
        base_url=BASE,
        http_client=httpx.Client(transport=httpx.MockTransport(recorder)),
    )
    client.batches.get("batch_1")
    assert recorder.requests[0].headers["authorization"] == "Bearer sk-test-secret"
    monkeypatch.setenv("BATCHROUTE_API_KEY", "sk-from-env\n")
    assert Client(base_url=BASE).headers()["Authorization"] == "Bearer sk-from-env"
    # A key HTTP cannot carry is refused at once, and its text never holds the key
    for key in ("brk_…9f2c", "sk-in side", "sk-bell\x07x", "sk-two\nlines"):
        with pytest.raises(ValueError, match="API key holds whitespace, control or non-ASCII") as refused:
            Client(api_key=key, base_url=BASE)
        assert key.strip() not in str(refused.value)


def test_a_base_url_without_an_http_scheme_or_host_is_refused_at_construction() -> None:
    for url in ("api.acme.test", "ftp://api.acme.test", "http://", "sk-live-secret"):
        with pytest.raises(ValueError, match="base URL must be http:// or https://") as refused:
            Client(api_key="sk-test-secret", base_url=url)
        assert "acme" not in str(refused.value) and "secret" not in str(refused.value)
    assert Client(api_key="sk-test-secret", base_url=" https://api.test/ \n").base_url == BASE


@pytest.mark.parametrize(
    "refusal",
    [
        httpx.LocalProtocolError("Illegal header value b'Bearer sk-test-secret\\n'"),
        httpx.UnsupportedProtocol("Request URL has an unsupported protocol 'sk-test-secret://'."),
        httpx.InvalidURL("Invalid non-printable ASCII character in URL, 'sk-test-secret'"),
    ],
)
def test_a_request_that_cannot_be_sent_is_not_retried_and_its_text_is_never_shown(
    refusal: Exception,
) -> None:
    recorder = Recorder(refusal)
    sleeps: list[float] = []
    with pytest.raises(InvalidRequestError) as refused:
        make(recorder, sleeps).usage()
    assert len(recorder.requests) == 1 and sleeps == []
    assert str(refused.value).startswith("GET /v1/usage: the request cannot be sent")
    # Neither the message nor a chained cause (a logged traceback) holds the refused value
    assert "sk-test-secret" not in str(refused.value)
    assert refused.value.__cause__ is None and refused.value.__suppress_context__


@pytest.mark.parametrize("key", ["badkey\u00e9xx12", "bad\x01key1234", "badkey\x7fxx12"])
def test_a_header_value_http_cannot_carry_is_an_invalid_request_sent_nowhere(key: str) -> None:
    # Given an idempotency key with a non-ASCII or control character (httpx raised a bare
    # UnicodeEncodeError for one, and sent the other to a 400)
    recorder = Recorder(httpx.Response(202, json={"batch": batch()}))
    with pytest.raises(InvalidRequestError) as refused:
        make(recorder, []).batches.create(items=[{"customer_item_id": "a"}], idempotency_key=key)
    # Then nothing was sent, and the message does not hold the value
    assert recorder.requests == [] and key not in str(refused.value)


def test_ids_are_sent_as_one_path_segment() -> None:
    # Given an id that would climb the path ("../usage" would GET /v1/usage with the key)
    recorder = Recorder(httpx.Response(404, json={"error": {"code": "batch_not_found", "message": "x"}}))
    with pytest.raises(APIError):
        make(recorder, [], max_retries=0).batches.get("../usage")
    # Then it stays inside the batch's path, encoded
    assert recorder.requests[0].url.raw_path == b"/v1/batches/..%2Fusage"
    # And so do the dot segments a URL would resolve ("/v1/batches/../cancel" is "/v1/cancel")
    with pytest.raises(APIError):
        make(recorder, [], max_retries=0).batches.cancel("..")
    assert recorder.requests[1].url.raw_path == b"/v1/batches/%2E%2E/cancel"


def test_a_receipt_the_stale_hold_sweep_wrote_before_it_named_its_batch_still_reads() -> None:
    money = {"currency": "usd", "amount": "0.0012"}
    swept = {
        "basis": "direct",
        "final_settled_price": money,
        "credit_reserved": {"currency": "usd", "amount": "0.002"},
        "credit_charged": money,
        "credit_released": {"currency": "usd", "amount": "0.0008"},
        "settled_at": "2026-12-01T10:00:00Z",
        "recovered_by": "sweeper",
    }
    recorder = Recorder(httpx.Response(200, json=swept))
    receipt = make(recorder, []).batches.receipt("batch_1")
    assert receipt.batch_id == "batch_1" and receipt.provider_subtotal.amount == "0.0012"
    assert receipt.service_fee.amount == "0"


def test_a_stream_that_fails_midway_raises_its_error_event_as_an_api_error() -> None:
    failure = {
        "code": "provider_failed",
        "message": "The provider edge-eu failed while answering (stream_interrupted).",
        "details": {"provider": "edge-eu", "provider_code": "stream_interrupted"},
    }
    sse = "".join(
        f"data: {json.dumps(e)}\n\n" for e in (_chunk("Hello"), _chunk(" world"), {"error": failure})
    )
    answer = httpx.Response(
        200, text=sse, headers={"content-type": "text/event-stream", "x-request-id": "req_9"}
    )
    texts: list[str] = []
    stream = make(Recorder(answer), []).chat.stream("m", [{"role": "user", "content": "hi"}])
    with pytest.raises(APIError) as raised:
        texts.extend(chunk.text for chunk in stream)
    assert "".join(texts) == "Hello world"
    assert (raised.value.code, raised.value.message, raised.value.details) == (
        failure["code"],
        failure["message"],
        failure["details"],
    )
    assert raised.value.request_id == "req_9" and raised.value.status == 200


def test_a_stream_that_ends_without_done_was_cut_off_and_raises() -> None:
    sse = "".join(f"data: {json.dumps(_chunk(t))}\n\n" for t in ("The answer is", " forty"))
    answer = httpx.Response(200, text=sse, headers={"content-type": "text/event-stream"})
    texts: list[str] = []
    stream = make(Recorder(answer), []).chat.stream("m", [{"role": "user", "content": "hi"}])
    with pytest.raises(APIConnectionError, match="ended before \\[DONE\\]: the answer was cut off"):
        texts.extend(chunk.text for chunk in stream)
    assert "".join(texts) == "The answer is forty"


def test_a_cancel_whose_answer_was_lost_returns_the_batch_its_retry_finds_canceled() -> None:
    not_cancellable = error(409, "batch_not_cancellable", state="canceled")
    got = httpx.Response(200, json={"batch": batch(state="canceled"), "billing_receipt": None})
    for lost in (httpx.ReadTimeout("answer lost"), error(502, "bad_gateway")):
        recorder = Recorder(lost, not_cancellable, got)
        canceled = make(recorder, []).batches.cancel("batch_1", reason="stop")
        assert canceled.state == "canceled"
        assert [f"{r.method} {r.url.path}" for r in recorder.requests] == [
            "POST /v1/batches/batch_1/cancel",
            "POST /v1/batches/batch_1/cancel",
            "GET /v1/batches/batch_1",
        ]
    # A 409 to the first attempt is the answer: the batch was canceled (or ended) before
    recorder = Recorder(not_cancellable)
    with pytest.raises(ConflictError) as first:
        make(recorder, []).batches.cancel("batch_1")
    assert first.value.details == {"state": "canceled"} and len(recorder.requests) == 1
    # A retry that finds the batch ended otherwise is refused too
    recorder = Recorder(httpx.ReadTimeout("lost"), error(409, "batch_not_cancellable", state="completed"))
    with pytest.raises(ConflictError):
        make(recorder, []).batches.cancel("batch_1")
    assert len(recorder.requests) == 2


def test_a_json_body_is_sent_compact_utf8_so_its_size_is_what_was_measured() -> None:
    recorder = Recorder(error(400, "stop"))
    items = [
        {"customer_item_id": "季度-1", "input": {"messages": [{"role": "user", "content": "季度报告 🙂"}]}}
    ]
    with pytest.raises(BadRequestError):
        make(recorder, []).quotes.model(items=items)
    (sent,) = recorder.requests
    expected = json.dumps({"items": items}, ensure_ascii=False, separators=(",", ":")).encode()
    assert sent.content == expected and sent.headers["content-length"] == str(len(expected))
    assert sent.headers["content-type"] == "application/json"


def test_a_batch_types_its_execution_summary_and_file_ids() -> None:
    body = {
        **batch(state="failed"),
        "output_file_id": "file_out",
        "error_file_id": "file_err",
        "receipt_file_id": "file_rcpt",
        "execution_summary": {"latest_error": "no eligible lane", "preflight": {"ok": False, "errors": []}},
    }
    got = Batch.from_dict(body)
    assert (got.output_file_id, got.error_file_id, got.receipt_file_id) == (
        "file_out",
        "file_err",
        "file_rcpt",
    )
    assert got.execution_summary is not None and got.execution_summary.preflight == {
        "ok": False,
        "errors": [],
    }
    assert got.latest_error == "no eligible lane"
    assert Batch.from_dict(batch()).latest_error is None
