"""The client's sans-IO core driven by hand, without an HTTP client or an event loop: each
behaviour once (the sync and async loops only perform the effects; `test_client_sdk`,
`test_client_async`, `test_client_files` and `test_client_multipart` run them end to end).

A plan yields effects (`Send`, `Open`, `Read`, `Sleep`, `Emit`); `drive` answers each from a
script, throwing scripted transport errors into the plan the way both loops do."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from batchroute_client import (
    APIConnectionError,
    ConflictError,
    InsufficientFundsError,
    InternalServerError,
    NotFoundError,
    RateLimitError,
)
from batchroute_client._core import (
    Call,
    ClientBase,
    Emit,
    Open,
    Operations,
    Plan,
    Read,
    Runner,
    Send,
    Sleep,
    request_arguments,
    returning,
)
from batchroute_client._retry import Backoff
from batchroute_client.errors import error_for

from tests.unit.test_client_files import file_row
from tests.unit.test_client_multipart import DATA, etag, plan, started
from tests.unit.test_client_sdk import error

NOW = 1_767_225_600.0


def core(max_retries: int = 4) -> Operations:
    base = ClientBase(
        "sk-core",
        "https://api.test/",
        None,
        max_retries=max_retries,
        backoff=Backoff(base=0.5, cap=8.0, random=lambda: 1.0),
        clock=lambda: NOW,
        monotonic=lambda: 0.0,
    )
    return base.ops


def drive(plan_: Plan[Any], answer: Callable[[Any], Any]) -> tuple[list[Any], Any]:
    """Run `plan_`, answering every effect but `Sleep`/`Emit` with `answer(effect)` (an
    exception it returns is thrown into the plan); the effects seen and the plan's value."""
    runner = Runner(returning(plan_))
    seen: list[Any] = []
    result: Any = None
    while (effect := runner.next()) is not None:
        seen.append(effect)
        if isinstance(effect, Emit):
            result = effect.value
            continue
        with runner.answering():
            value = None if isinstance(effect, Sleep) else answer(effect)
            if isinstance(value, BaseException):
                raise value
            runner.resolve(value)
    return seen[:-1], result


def scripted(*answers: Any) -> Callable[[Any], Any]:
    queue = list(answers)
    return lambda effect: queue.pop(0)


def sleeps(effects: list[Any]) -> list[float]:
    return [e.seconds for e in effects if isinstance(e, Sleep)]


def test_retry_decisions_backoff_retry_after_and_what_is_repeatable() -> None:
    ops = core()
    answers = scripted(
        httpx.ConnectError("refused"),
        error(503, "unavailable"),
        error(429, "rate_limited", headers={"Retry-After": "7"}),
        httpx.Response(200, json={"batch": {}}),
    )
    effects, answer = drive(ops.request("GET", "/v1/things"), answers)
    assert sleeps(effects) == [0.5, 1.0, 7.0]  # backoff doubles; Retry-After is the minimum
    sends = [e for e in effects if isinstance(e, Send)]
    assert len(sends) == 4 and len({id(s.call) for s in sends}) == 1  # the same call every time
    assert sends[0].call.url == "https://api.test/v1/things" and answer == {"batch": {}}
    # not repeatable: a network error or a 5xx gives up at once, a 429 is still retried
    with pytest.raises(APIConnectionError):
        drive(ops.request("POST", "/v1/x", retry_on_network_error=False), scripted(httpx.ReadError("gone")))
    with pytest.raises(InternalServerError):
        drive(ops.request("POST", "/v1/x", retry_on_network_error=False), scripted(error(502, "bad_gateway")))
    effects, _ = drive(
        ops.request("POST", "/v1/x", retry_on_network_error=False),
        scripted(error(429, "rate_limited"), httpx.Response(200, json={})),
    )
    assert sleeps(effects) == [0.5]
    # retries run out after max_retries: the last answer's typed error
    with pytest.raises(RateLimitError):
        drive(core(max_retries=1).request("GET", "/v1/x"), scripted(error(429, "a"), error(429, "b")))


@pytest.mark.parametrize(
    ("status", "cls"), [(404, NotFoundError), (409, ConflictError), (500, InternalServerError)]
)
def test_error_mapping_turns_an_answer_into_its_typed_error_with_code_and_request_id(
    status: int, cls: type
) -> None:
    answer = error(status, "the_code")
    answer.headers["x-request-id"] = "req_1"
    with pytest.raises(cls) as caught:
        drive(core(max_retries=0).request("GET", "/v1/x"), scripted(answer))
    assert caught.value.status == status and caught.value.code == "the_code"
    assert caught.value.request_id == "req_1"


def test_a_vendor_shape_error_without_a_code_is_coded_by_its_type() -> None:
    """The compat surface's errors are OpenAI's shape: `type` says what went wrong when `code` is null."""
    body = {
        "error": {"type": "insufficient_quota", "message": "Not enough credits.", "param": None, "code": None}
    }
    with pytest.raises(InsufficientFundsError) as caught:
        drive(
            core(max_retries=0).request("GET", "/v1/compat/v1/batches"),
            scripted(httpx.Response(402, json=body)),
        )
    assert (caught.value.code, caught.value.message) == ("insufficient_quota", "Not enough credits.")
    # A code, when there is one, wins; neither: `http_<status>`
    coded = {"error": {**body["error"], "code": "insufficient_credits"}}
    assert error_for(402, coded).code == "insufficient_credits"
    assert error_for(402, {"error": {"type": None, "message": "x", "code": None}}).code == "http_402"


def test_pagination_emits_every_row_and_follows_the_cursor() -> None:
    pages = scripted(
        httpx.Response(200, json={"data": [{"id": "a"}, {"id": "b"}], "next_cursor": "c1"}),
        httpx.Response(200, json={"data": [{"id": "c"}], "next_cursor": None}),
    )
    effects, _ = drive(core().paginate("/v1/batches", {"limit": 2}), pages)
    assert [e.value["id"] for e in effects if isinstance(e, Emit)] == ["a", "b", "c"]
    cursors = [e.call.params.get("cursor") for e in effects if isinstance(e, Send)]
    assert cursors == [None, "c1"]


def test_pagination_follows_the_vendor_cursor_of_a_compat_listing() -> None:
    """`/v1/compat/v1/...` lists page as OpenAI's do: `has_more` and `last_id`, asked for as `after`."""
    pages = scripted(
        httpx.Response(200, json={"object": "list", "data": [{"id": "a"}], "last_id": "a", "has_more": True}),
        httpx.Response(200, json={"object": "list", "data": [{"id": "b"}], "last_id": "b", "has_more": True}),
        httpx.Response(
            200, json={"object": "list", "data": [{"id": "c"}], "last_id": "c", "has_more": False}
        ),
    )
    effects, _ = drive(core().paginate("/v1/compat/v1/batches", {"limit": 1}), pages)
    assert [e.value["id"] for e in effects if isinstance(e, Emit)] == ["a", "b", "c"]
    queries = [dict(e.call.params) for e in effects if isinstance(e, Send)]
    assert queries == [{"limit": 1}, {"limit": 1, "after": "a"}, {"limit": 1, "after": "b"}]


def test_pagination_stops_on_a_vendor_page_without_more_or_without_a_last_id() -> None:
    for last in ({"last_id": "a", "has_more": False}, {"last_id": None, "has_more": True}):
        pages = scripted(httpx.Response(200, json={"data": [{"id": "a"}], **last}))
        effects, _ = drive(core().paginate("/v1/compat/v1/files", {}), pages)
        assert len([e for e in effects if isinstance(e, Send)]) == 1


def test_server_sent_events_are_read_line_by_line_until_done() -> None:
    lines = iter([": keep-alive", 'data: {"n": 1}', "", 'data: {"n": 2}', "data: [DONE]", 'data: {"n": 3}'])

    def answer(effect: Any) -> Any:
        if isinstance(effect, Open):
            return httpx.Response(200)
        assert isinstance(effect, Read) and effect.unit == "line"
        return next(lines)

    effects, _ = drive(core().stream_events("/v1/chat/completions", {"stream": True}), answer)
    assert [e.value for e in effects if isinstance(e, Emit)] == [{"n": 1}, {"n": 2}]


def test_a_json_body_is_encoded_by_the_core_not_by_httpx_so_any_httpx_sends_the_same_bytes() -> None:
    # httpx 0.27 escapes non-ASCII (a CJK text doubles, an emoji triples): the core hands
    # httpx the compact UTF-8 bytes itself, whatever its version
    body = {"items": [{"input": "季度报告 🙂"}], "routing_mode": "cheapest"}
    arguments = request_arguments(Call("POST", "https://api.test/v1/quotes/model", json=body), lambda b: b)
    assert "json" not in arguments
    assert arguments["content"] == '{"items":[{"input":"季度报告 🙂"}],"routing_mode":"cheapest"}'.encode()
    assert arguments["headers"]["content-type"] == "application/json"
    # a body without JSON is left as it is, and a caller's content type is kept
    raw = Call("POST", "https://api.test/v1/files", content=lambda: b"x", headers={"content-type": "a/b"})
    assert request_arguments(raw, lambda b: b)["content"] == b"x"
    typed = Call("POST", "https://api.test/v1/x", json={}, headers={"Content-Type": "application/merge"})
    assert request_arguments(typed, lambda b: b)["headers"]["content-type"] == "application/merge"


def test_upload_planning_direct_signed_and_multipart_with_a_resigned_part() -> None:
    ops = core()
    effects, file = drive(
        ops.file_upload(b'{"a": 1}\n', purpose="batch"),
        scripted(httpx.Response(201, json={"file": file_row()})),
    )
    assert [(e.call.method, e.call.url) for e in effects] == [("POST", "https://api.test/v1/files")]
    assert file.status == "processed"

    answers = scripted(
        started(),
        etag("e1"),
        etag("e2"),
        httpx.Response(403, text="expired"),  # part 3's URL expired: signed again, once
        httpx.Response(200, json={"multipart": plan([3], fresh=True)}),
        etag("e3"),
        httpx.Response(200, json={"file": file_row("uploaded", len(DATA), line_count=0)}),
        httpx.Response(200, json={"file": file_row("uploaded", len(DATA), line_count=0)}),
        httpx.Response(200, json={"file": file_row("processed", len(DATA))}),
    )
    effects, file = drive(ops.file_upload(DATA, method="signed", poll_interval=3.0), answers)
    steps = [(e.call.method, httpx.URL(e.call.url).path) for e in effects if isinstance(e, Send)]
    assert steps == [
        ("POST", "/v1/files/uploads"),
        ("PUT", "/uploads/staging/org_1/file_1"),
        ("PUT", "/uploads/staging/org_1/file_1"),
        ("PUT", "/uploads/staging/org_1/file_1"),
        ("POST", "/v1/files/file_1/parts"),
        ("PUT", "/uploads/staging/org_1/file_1"),
        ("POST", "/v1/files/file_1/complete"),
        ("GET", "/v1/files/file_1"),
        ("GET", "/v1/files/file_1"),
    ]
    assert sleeps(effects) == [3.0] and file.status == "processed"
    complete = next(e for e in effects if isinstance(e, Send) and e.call.url.endswith("/complete"))
    assert [p["etag"] for p in complete.call.json["parts"]] == ['"e1"', '"e2"', '"e3"']
    puts = [e.call for e in effects if isinstance(e, Send) and e.call.method == "PUT"]
    assert all("Authorization" not in (c.headers or {}) for c in puts)
    assert b"".join(b"".join(c.content()) for c in puts[:2]) + b"".join(puts[3].content()) == DATA


def test_a_failed_multipart_upload_is_canceled_and_the_error_raised() -> None:
    answers = scripted(
        started(),
        httpx.ConnectError("down"),
        httpx.ConnectError("down"),
        httpx.Response(200, json={"file": file_row("canceled", len(DATA))}),
    )
    seen: list[str] = []

    def answer(effect: Any) -> Any:
        seen.append(f"{effect.call.method} {httpx.URL(effect.call.url).path}")
        return answers(effect)

    with pytest.raises(APIConnectionError):
        drive(core(max_retries=1).file_upload(DATA, method="signed"), answer)
    assert seen[-1] == "POST /v1/files/file_1/cancel"
