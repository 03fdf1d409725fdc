"""The HTTP every vendor adapter shares: how vendor answers map to provider errors, and a
stream's two time-outs (first byte, then idle between chunks)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from batchroute.providers.base import PermanentProviderError, ProviderUnavailable, TransientProviderError
from batchroute.providers.http import Timeouts, VendorHttp, error_for_status, vendor_error_codes
from batchroute.providers.whole_answers import json_bytes


def _openai_error(code: str, kind: str, message: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}}).encode()


def test_an_openai_account_out_of_credit_makes_the_lane_unavailable_not_retried() -> None:
    # Given OpenAI's 429 for an account without credit
    body = _openai_error("insufficient_quota", "insufficient_quota", "You exceeded your current quota")
    # When it is mapped
    error = error_for_status(429, {"retry-after": "1"}, body, vendor="openai")
    # Then the lane is unusable (fail over), not a throttle to wait out
    assert isinstance(error, ProviderUnavailable)
    assert error.code == "insufficient_quota"
    assert "exceeded your current quota" in error.message


def test_a_plain_429_is_still_a_throttle_with_its_wait() -> None:
    body = _openai_error("rate_limit_exceeded", "requests", "Rate limit reached")
    error = error_for_status(429, {"retry-after-ms": "1500"}, body, vendor="openai")
    assert isinstance(error, TransientProviderError)
    assert error.code == "rate_limited"
    assert error.retry_after_seconds == 1.5


def test_overloaded_is_transient_on_529_and_on_a_5xx_that_says_so() -> None:
    anthropic = json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    for status in (529, 503):
        error = error_for_status(status, {}, anthropic, vendor="anthropic")
        assert isinstance(error, TransientProviderError)
        assert error.code == "overloaded"


def test_a_4xx_that_merely_mentions_overloaded_is_not_transient() -> None:
    # Given a validation error whose text happens to say "overloaded"
    body = _openai_error("invalid_value", "invalid_request_error", "'overloaded' is not a valid role")
    # When it is mapped
    error = error_for_status(400, {}, body, vendor="openai")
    # Then the item fails: waiting would not change the answer
    assert isinstance(error, PermanentProviderError)
    assert error.code == "provider_rejected"


def test_vendor_error_codes_read_both_code_and_type() -> None:
    assert vendor_error_codes(_openai_error("insufficient_quota", "x", "m")) == {"insufficient_quota", "x"}
    assert vendor_error_codes(b"not json") == frozenset()
    assert vendor_error_codes(json.dumps({"type": "error", "error": {"type": "overloaded_error"}})) == {
        "error",
        "overloaded_error",
    }


class _Chunks(httpx.SyncByteStream):
    """A body whose every chunk notes the read time-out the transport would use for it."""

    def __init__(self, request: httpx.Request, chunks: list[bytes], seen: list[Any]) -> None:
        self.request = request
        self.chunks = chunks
        self.seen = seen

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.chunks:
            self.seen.append(("body", self.request.extensions["timeout"]["read"]))
            yield chunk


class _StreamTransport(httpx.BaseTransport):
    def __init__(self) -> None:
        self.seen: list[Any] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(("head", request.extensions["timeout"]["read"]))
        events = [b'data: {"n": 1}\n\n', b'data: {"n": 2}\n\n', b"data: [DONE]\n\n"]
        return httpx.Response(
            200,
            headers={"content-type": "text/event-stream"},
            stream=_Chunks(request, events, self.seen),
            request=request,
        )


def test_a_stream_waits_first_byte_for_its_start_then_idle_between_chunks() -> None:
    # Given an endpoint with a short first-byte and a longer idle time-out
    transport = _StreamTransport()
    http = VendorHttp(
        "http://vendor.test/v1",
        vendor="openai",
        timeouts=Timeouts(first_byte=7.0, idle=42.0),
        transport=transport,
    )
    # When a stream is read to its end
    with http.sse("/chat/completions", json_body={"stream": True}) as source:
        data = [event.data for event in source.iter_sse()]
    # Then its answer was awaited for first_byte, and each chunk after it for idle
    assert data == ['{"n": 1}', '{"n": 2}', "[DONE]"]
    assert transport.seen == [("head", 7.0), ("body", 42.0), ("body", 42.0), ("body", 42.0)]


def test_a_request_s_own_first_byte_wait_wins_over_the_endpoint_s() -> None:
    transport = _StreamTransport()
    http = VendorHttp("http://vendor.test", vendor="openai", timeouts=Timeouts(idle=9.0), transport=transport)
    with http.sse("/x", json_body={}, first_byte_timeout=2.5) as source:
        list(source.iter_sse())
    assert transport.seen[0] == ("head", 2.5)
    assert {seen for kind, seen in transport.seen if kind == "body"} == {9.0}


def test_a_stream_that_falls_silent_after_it_began_times_out_as_a_retryable_error() -> None:
    # Given a vendor whose stream stops sending after its first event
    class Silent(httpx.SyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            yield b'data: {"n": 1}\n\n'
            raise httpx.ReadTimeout("idle")

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Silent())

    http = VendorHttp("http://vendor.test", vendor="openai", transport=httpx.MockTransport(answer))
    # When it is read
    with pytest.raises(TransientProviderError) as raised, http.sse("/x", json_body={}) as source:
        list(source.iter_sse())
    # Then the item is retried (a time-out, not a failover)
    assert raised.value.code == "provider_timeout"


def test_timeouts_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        Timeouts(idle=0)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@given(_JSON.filter(lambda body: body is not None))
def test_whole_answer_calls_send_the_very_bytes_httpx_would(body: Any) -> None:
    """The urllib3 path's body encoding is httpx's, byte for byte, for any JSON (None is no
    body on either path)."""
    assert json_bytes(body) == httpx.Request("POST", "http://vendor.test", json=body).content
