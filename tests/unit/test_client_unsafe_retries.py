"""What the client repeats when an answer is lost, against `httpx.MockTransport`, sync and
async: a POST or PATCH through the generic `request`/`send` carries one `Idempotency-Key`
(given or generated) on every attempt and is repeated after a network error or a 5xx only on
the routes that honour the key (batches, compat batches, work orders) and a batch retry, which
keys itself; elsewhere only a 429 or a
503 that says nothing was done is. The upload starts (`files.create`, `files.start_upload`) take
no key and are not repeated either. A `Retry-After` longer than `MAX_RETRY_AFTER` is not slept
through: the typed error is raised at once with the wait asked. And the CLI's `--json` usage
error document. An injected sleeper records the waits; nothing really sleeps."""

from __future__ import annotations

import asyncio
import io
import json
import re
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import batchroute_client
import httpx
import pytest
from batchroute_client import (
    APIConnectionError,
    Client,
    InternalServerError,
    RateLimitError,
    _retry,
)
from batchroute_client._retry import Backoff, wait_before_retry
from batchroute_client.cli import main
from batchroute_client.cli.runtime import Runtime

from tests.unit.test_client_async import make as make_async
from tests.unit.test_client_files import file_row, signed
from tests.unit.test_client_sdk import BASE, Recorder, batch, error, make

GENERATED_KEY = re.compile(r"^br-[0-9a-f]{32}$")
LOST = ["timeout", "502", "500"]


def lost_answer(how: str) -> httpx.Response | Exception:
    """A fresh answer that tells the client nothing of what the service did (a response is
    read once by the client that got it, so each test makes its own)."""
    if how == "timeout":
        return httpx.ReadTimeout("the answer was lost")
    return error(int(how), "bad_gateway" if how == "502" else "internal_error")


def keys(recorder: Recorder) -> list[str | None]:
    return [request.headers.get("idempotency-key") for request in recorder.requests]


# -- request / send: POST and PATCH -----------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/v1/compat/v1/batches", "/v1/batches", "/v1/work-orders", "/v1/batches/batch_1/retry"]
)
def test_a_post_to_a_route_that_honours_the_key_is_repeated_with_one_generated_key(path: str) -> None:
    # Given a create whose answers are lost twice (a time-out, then a gateway's 502)
    recorder = Recorder(
        lost_answer("timeout"), lost_answer("502"), httpx.Response(200, json={"id": "batch_1"})
    )
    sleeps: list[float] = []
    got = make(recorder, sleeps).request("POST", path, json={"input_file_id": "file_1"})
    # Then it was repeated with the same generated key and the same body every time
    assert got == {"id": "batch_1"} and len(recorder.requests) == 3 and sleeps == [0.5, 1.0]
    (key,) = set(keys(recorder))
    assert key is not None and GENERATED_KEY.match(key)
    assert len({request.content for request in recorder.requests}) == 1
    # A new call gets a new key; the caller's own key (any case) is sent as is, never replaced
    recorder = Recorder(httpx.Response(200, json={}))
    client = make(recorder, [])
    client.request("POST", path, json={})
    client.request("POST", path, json={}, headers={"idempotency-key": "my-key-123"})
    sent = [request.headers.get_list("idempotency-key") for request in recorder.requests]
    assert sent[0] != [key] and sent[1] == ["my-key-123"]


@pytest.mark.parametrize("lost", LOST)
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/chat/completions"),
        ("POST", "/v1/batches/batch_1/redeliver"),
        ("PATCH", "/v1/work-orders/wo_1"),
        ("POST", "/v1/batches/batch_1"),
    ],
)
def test_a_post_or_patch_to_another_route_is_not_repeated_after_a_lost_answer(
    method: str, path: str, lost: str
) -> None:
    recorder = Recorder(lost_answer(lost), httpx.Response(200, json={}))
    sleeps: list[float] = []
    with pytest.raises((APIConnectionError, InternalServerError)):
        make(recorder, sleeps).request(method, path, json={})
    assert len(recorder.requests) == 1 and sleeps == []
    # It still carries a key (the service ignores it there)
    assert GENERATED_KEY.match(keys(recorder)[0] or "")


def test_a_post_to_another_route_is_repeated_on_the_answers_that_say_nothing_was_done() -> None:
    recorder = Recorder(
        error(429, "rate_limited", headers={"Retry-After": "3"}),
        error(503, "provider_unavailable"),
        httpx.Response(200, json={"ok": True}),
    )
    sleeps: list[float] = []
    assert make(recorder, sleeps).request("POST", "/v1/chat/completions", json={}) == {"ok": True}
    assert len(recorder.requests) == 3 and sleeps == [3.0, 1.0]
    assert len(set(keys(recorder))) == 1


def test_get_put_and_delete_are_repeated_as_before_and_the_caller_can_override() -> None:
    for method in ("GET", "PUT", "DELETE"):
        recorder = Recorder(error(500, "internal_error"), httpx.Response(200, json={}))
        make(recorder, []).request(method, "/v1/things/1")
        assert len(recorder.requests) == 2 and keys(recorder) == [None, None]
    # retry_on_network_error given: True repeats a POST anywhere, False never repeats one
    recorder = Recorder(error(500, "internal_error"), httpx.Response(200, json={}))
    make(recorder, []).request("POST", "/v1/batches/batch_1/redeliver", retry_on_network_error=True)
    assert len(recorder.requests) == 2
    recorder = Recorder(httpx.ConnectError("reset"), httpx.Response(200, json={}))
    with pytest.raises(APIConnectionError):
        make(recorder, []).request("POST", "/v1/batches", json={}, retry_on_network_error=False)
    assert len(recorder.requests) == 1


def test_send_decides_by_method_and_route_below_the_base_url() -> None:
    # A base URL with a path: the route is what follows it
    def client(recorder: Recorder) -> Client:
        return Client(
            api_key="sk-test-secret",
            base_url=f"{BASE}/prod",
            http_client=httpx.Client(transport=httpx.MockTransport(recorder)),
            sleep=lambda _: None,
        )

    recorder = Recorder(error(502, "bad_gateway"), httpx.Response(201, json={}))
    client(recorder).send("POST", f"{BASE}/prod/v1/work-orders", json={})
    assert len(recorder.requests) == 2 and len(set(keys(recorder))) == 1
    recorder = Recorder(error(502, "bad_gateway"), httpx.Response(201, json={}))
    with pytest.raises(InternalServerError):
        client(recorder).request("POST", "/v1/chat/completions", json={})
    assert len(recorder.requests) == 1
    # Another host, or the same path outside the base URL's: not a route that honours the key
    for url in ("https://elsewhere.test/prod/v1/batches", f"{BASE}/v1/batches"):
        recorder = Recorder(error(502, "bad_gateway"), httpx.Response(201, json={}))
        with pytest.raises(InternalServerError):
            client(recorder).send("POST", url, json={})
        assert len(recorder.requests) == 1
    recorder = Recorder(error(502, "bad_gateway"), httpx.Response(200, json={}))
    client(recorder).send("GET", "https://elsewhere.test/x")
    assert len(recorder.requests) == 2


def test_the_async_client_repeats_the_same_way() -> None:
    recorder = Recorder(lost_answer("timeout"), httpx.Response(200, json={"id": "batch_1"}))
    got = asyncio.run(make_async(recorder, []).request("POST", "/v1/compat/v1/batches", json={}))
    assert got == {"id": "batch_1"} and len(recorder.requests) == 2 and len(set(keys(recorder))) == 1
    recorder = Recorder(lost_answer("500"), httpx.Response(200, json={}))
    with pytest.raises(InternalServerError):
        asyncio.run(make_async(recorder, []).request("POST", "/v1/batches/batch_1/redeliver"))
    assert len(recorder.requests) == 1


# -- uploads that take no key -----------------------------------------------------------------------


@pytest.mark.parametrize("lost", LOST)
def test_a_direct_upload_and_a_signed_upload_start_are_not_repeated_after_a_lost_answer(lost: str) -> None:
    recorder = Recorder(lost_answer(lost), httpx.Response(201, json={"file": file_row()}))
    sleeps: list[float] = []
    with pytest.raises((APIConnectionError, InternalServerError)):
        make(recorder, sleeps).files.create(b'{"customer_item_id": "a"}\n')
    assert len(recorder.requests) == 1 and sleeps == []
    recorder = Recorder(lost_answer(lost), signed(100))
    with pytest.raises((APIConnectionError, InternalServerError)):
        make(recorder, sleeps).files.start_upload(filename="a.jsonl", size=100)
    assert len(recorder.requests) == 1 and sleeps == []
    # The high-level upload too, sync and async
    recorder = Recorder(lost_answer(lost), httpx.Response(201, json={"file": file_row()}))
    with pytest.raises((APIConnectionError, InternalServerError)):
        asyncio.run(make_async(recorder, []).files.upload(b'{"customer_item_id": "a"}\n'))
    assert len(recorder.requests) == 1


def test_a_rate_limited_upload_is_repeated_after_its_retry_after() -> None:
    recorder = Recorder(
        error(429, "rate_limited", headers={"Retry-After": "2"}),
        httpx.Response(201, json={"file": file_row()}),
    )
    sleeps: list[float] = []
    assert make(recorder, sleeps).files.create(b'{"customer_item_id": "a"}\n').id == "file_1"
    assert len(recorder.requests) == 2 and sleeps == [2.0]
    assert recorder.requests[0].content == recorder.requests[1].content


# -- a Retry-After too long to wait for ---------------------------------------------------------------


def test_a_retry_after_longer_than_the_maximum_raises_at_once_with_the_wait_asked() -> None:
    recorder = Recorder(
        error(429, "rate_limited", headers={"Retry-After": "86400"}),
        httpx.Response(200, json={"batch": batch()}),
    )
    sleeps: list[float] = []
    with pytest.raises(RateLimitError) as caught:
        make(recorder, sleeps).batches.get("batch_1")
    assert len(recorder.requests) == 1 and sleeps == []
    assert (caught.value.status, caught.value.code, caught.value.retry_after) == (
        429,
        "rate_limited",
        86400.0,
    )
    # An HTTP date an hour after the clock (2026-01-01T00:00:00Z): the same, counted from the clock
    recorder = Recorder(error(429, "rate_limited", headers={"Retry-After": "Thu, 01 Jan 2026 01:00:00 GMT"}))
    with pytest.raises(RateLimitError) as caught:
        make(recorder, sleeps).batches.get("batch_1")
    assert caught.value.retry_after == 3600.0 and sleeps == []
    # The async client too
    recorder = Recorder(error(429, "rate_limited", headers={"Retry-After": "61"}))
    with pytest.raises(RateLimitError) as caught:
        asyncio.run(make_async(recorder, sleeps).batches.get("batch_1"))
    assert caught.value.retry_after == 61.0 and len(recorder.requests) == 1 and sleeps == []
    assert _retry.MAX_RETRY_AFTER == 60.0


def test_a_retry_after_up_to_the_maximum_is_waited_for() -> None:
    recorder = Recorder(
        error(429, "rate_limited", headers={"Retry-After": "60"}),
        httpx.Response(200, json={"batch": batch()}),
    )
    sleeps: list[float] = []
    assert make(recorder, sleeps).batches.get("batch_1").id == "batch_1"
    assert sleeps == [60.0]
    # The maximum is the backoff's to set; a failure without Retry-After carries none
    short = Backoff(random=lambda: 1.0, max_retry_after=5.0)
    assert wait_before_retry(short, 1, 4, status=429, retry_after="6") is None
    assert wait_before_retry(short, 1, 4, status=429, retry_after="5") == 5.0
    assert wait_before_retry(short, 1, 4, status=503, retry_after="inf") is None
    with pytest.raises(RateLimitError) as caught:
        make(Recorder(error(429, "rate_limited")), [], max_retries=0).batches.get("batch_1")
    assert caught.value.retry_after is None


def test_the_backoff_and_the_longest_wait_are_importable_from_the_package_as_documented() -> None:
    """docs/client.md ("Retries") passes `backoff=Backoff(...)` and names `MAX_RETRY_AFTER`."""
    assert (batchroute_client.Backoff, batchroute_client.MAX_RETRY_AFTER) == (Backoff, _retry.MAX_RETRY_AFTER)
    assert {"Backoff", "MAX_RETRY_AFTER"} <= set(batchroute_client.__all__)
    recorder = Recorder(error(429, "rate_limited", headers={"Retry-After": "6"}))
    backoff = batchroute_client.Backoff(random=lambda: 1.0, max_retry_after=5.0)
    client = Client(
        api_key="sk-test-secret",
        base_url=BASE,
        http_client=httpx.Client(transport=httpx.MockTransport(recorder)),
        backoff=backoff,
        sleep=lambda _: None,
    )
    with pytest.raises(RateLimitError) as caught:
        client.batches.get("batch_1")
    assert caught.value.retry_after == 6.0 and len(recorder.requests) == 1


# -- the CLI's --json usage error ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv", [["--json", "list", "--limit", "-1"], ["list", "--json", "--nonsense"], ["--json", "status"]]
)
def test_a_json_usage_error_prints_the_error_document_on_stdout(argv: list[str], tmp_path: Path) -> None:
    env = {
        "BATCHROUTE_API_KEY": "sk-cli",
        "BATCHROUTE_BASE_URL": BASE,
        "BATCHROUTE_CONFIG": str(tmp_path / "c"),
    }
    runtime = Runtime(
        env=env, http_client=lambda: httpx.Client(transport=httpx.MockTransport(Recorder(error(500, "x"))))
    )
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(argv, runtime)
    assert code == 2
    document = json.loads(out.getvalue())
    assert document["error"]["code"] == "usage_error" and document["error"]["message"]
    assert "Usage: batchroute" in err.getvalue()  # the usage text stays on stderr
