"""The webhook sender: SSRF guard, pinning to the checked address, no redirects, outcomes.

The transport (httpx.MockTransport) and the resolver are injected: no socket is opened."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import httpx
import pytest

from batchroute.adapters.webhook_sender import WebhookSender
from batchroute.domain.delivery.network import UrlGuard

PUBLIC_V4 = "93.184.216.34"
PUBLIC_V6 = "2606:2800:220:1:248:1893:25c8:1946"
BODY = b'{"id":"evt_1","type":"batch.completed","batch":{"id":"batch_1","state":"completed"}}'
SIGNED = {
    "X-Service-Signature": "sig",
    "X-Service-Timestamp": "1767225600",
    "X-Service-Event": "batch.completed",
}
NOW = datetime(2026, 1, 1, tzinfo=UTC)

Handler = Callable[[httpx.Request], httpx.Response]


def _resolver(*answers: str) -> Callable[[str, int], list[str]]:
    def resolve(host: str, port: int) -> list[str]:
        resolve.calls.append((host, port))  # type: ignore[attr-defined]
        return list(answers)

    resolve.calls = []  # type: ignore[attr-defined]
    return resolve


class Recorder:
    def __init__(self, *responses: httpx.Response | Exception) -> None:
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        request.read()
        self.requests.append(request)
        answer = self.responses.pop(0) if len(self.responses) > 1 else self.responses[0]
        if isinstance(answer, Exception):
            raise answer
        # A fresh response each time: a response's stream is read once.
        return httpx.Response(answer.status_code, headers=answer.headers, stream=answer.stream)


def _sender(
    recorder: Recorder, *answers: str, allow_loopback: bool = False, environment: str = "production"
) -> WebhookSender:
    return WebhookSender(
        UrlGuard(allow_loopback, environment, _resolver(*(answers or (PUBLIC_V4,)))),
        transport=httpx.MockTransport(recorder),
        now=lambda: NOW,
    )


def test_connects_to_the_checked_address_with_host_header_and_sni_of_the_name() -> None:
    # Given a name that resolves to one public address
    recorder = Recorder(httpx.Response(204))
    sender = _sender(recorder, PUBLIC_V4)
    # When a delivery is sent
    outcome = sender.send("https://hooks.example.com/batch?x=1", BODY, SIGNED)
    # Then the connection goes to the checked IP, and the name travels as Host and SNI
    assert outcome.status_code == 204 and outcome.error is None and outcome.succeeded
    (request,) = recorder.requests
    assert request.url.host == PUBLIC_V4
    assert request.url.scheme == "https" and request.url.port is None
    assert request.url.raw_path == b"/batch?x=1"
    assert request.headers["host"] == "hooks.example.com"
    assert request.extensions["sni_hostname"] == "hooks.example.com"
    # And the body and signature headers are sent as given
    assert request.method == "POST" and request.content == BODY
    for name, value in SIGNED.items():
        assert request.headers[name] == value
    assert request.headers["content-type"] == "application/json"
    assert request.headers["user-agent"].startswith("batchroute-webhooks/")


def test_resolves_each_time_and_pins_a_non_default_port_and_ipv6() -> None:
    recorder = Recorder(httpx.Response(200))
    resolve = _resolver(PUBLIC_V6)
    sender = WebhookSender(UrlGuard(resolve=resolve), transport=httpx.MockTransport(recorder))
    sender.send("https://Hooks.Example.com:8443/h", BODY, SIGNED)
    sender.send("https://Hooks.Example.com:8443/h", BODY, SIGNED)
    assert resolve.calls == [("hooks.example.com", 8443)] * 2  # type: ignore[attr-defined]
    request = recorder.requests[0]
    assert request.url.host == PUBLIC_V6 and request.url.port == 8443
    assert request.headers["host"] == "hooks.example.com:8443"
    assert request.extensions["sni_hostname"] == "hooks.example.com"


def test_an_internal_answer_is_refused_before_any_connection() -> None:
    for address in ("10.0.0.5", "169.254.169.254", "127.0.0.1", "::ffff:127.0.0.1", "fd00:ec2::254"):
        recorder = Recorder(httpx.Response(200))
        outcome = _sender(recorder, PUBLIC_V4, address).send("https://rebind.example.com/", BODY, SIGNED)
        assert outcome.status_code is None and outcome.error is not None
        assert outcome.error.startswith("unsafe_url"), outcome.error
        assert recorder.requests == []


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("http://hooks.example.com/", "https_required"),
        ("https://localhost/", "unsafe_url"),
        ("https://user:pw@hooks.example.com/", "unsafe_url"),
        ("ftp://hooks.example.com/", "https_required"),
        ("http://127.0.0.1:9999/hook", "https_required"),  # loopback not allowed by default
    ],
)
def test_unsafe_urls_fail_the_attempt_without_a_request(url: str, code: str) -> None:
    recorder = Recorder(httpx.Response(200))
    outcome = _sender(recorder).send(url, BODY, SIGNED)
    assert outcome.error is not None and outcome.error.startswith(code)
    assert recorder.requests == []


def test_loopback_is_admitted_only_when_allowed_and_not_in_production() -> None:
    recorder = Recorder(httpx.Response(200))
    allowed = _sender(recorder, allow_loopback=True, environment="local")
    outcome = allowed.send("http://127.0.0.1:9999/hook", BODY, SIGNED)
    assert outcome.status_code == 200
    (request,) = recorder.requests
    assert (request.url.host, request.url.port) == ("127.0.0.1", 9999)
    assert "sni_hostname" not in request.extensions
    refused = _sender(recorder, allow_loopback=True, environment="production")
    assert refused.send("http://127.0.0.1:9999/hook", BODY, SIGNED).error is not None
    assert len(recorder.requests) == 1


@pytest.mark.parametrize("code", [301, 302, 307, 308])
def test_redirects_are_not_followed(code: int) -> None:
    recorder = Recorder(httpx.Response(code, headers={"location": "http://169.254.169.254/latest"}))
    outcome = _sender(recorder).send("https://hooks.example.com/", BODY, SIGNED)
    assert outcome.status_code == code and not outcome.succeeded
    assert len(recorder.requests) == 1


def test_retry_after_is_read_as_seconds_or_date() -> None:
    recorder = Recorder(
        httpx.Response(429, headers={"retry-after": "120"}),
        httpx.Response(429, headers={"retry-after": "Thu, 01 Jan 2026 00:05:00 GMT"}),
        httpx.Response(500),
    )
    sender = _sender(recorder)
    assert sender.send("https://hooks.example.com/", BODY, SIGNED).retry_after_seconds == 120
    assert sender.send("https://hooks.example.com/", BODY, SIGNED).retry_after_seconds == 300
    assert sender.send("https://hooks.example.com/", BODY, SIGNED).retry_after_seconds is None


def test_a_timeout_is_a_failed_attempt() -> None:
    recorder = Recorder(httpx.ReadTimeout("slow"))
    outcome = _sender(recorder).send("https://hooks.example.com/", BODY, SIGNED)
    assert outcome.status_code is None and outcome.error == "timed out after 10 s"


def test_a_refused_connection_tries_the_next_checked_address_only() -> None:
    second = "93.184.216.35"
    recorder = Recorder(httpx.ConnectError("refused"), httpx.Response(200))
    outcome = _sender(recorder, PUBLIC_V4, second).send("https://hooks.example.com/", BODY, SIGNED)
    assert outcome.status_code == 200
    assert [r.url.host for r in recorder.requests] == [PUBLIC_V4, second]
    assert all(r.extensions["sni_hostname"] == "hooks.example.com" for r in recorder.requests)


def test_every_address_refusing_is_a_connection_error() -> None:
    recorder = Recorder(httpx.ConnectError("refused"))
    outcome = _sender(recorder).send("https://hooks.example.com/", BODY, SIGNED)
    assert outcome.status_code is None
    assert outcome.error is not None and outcome.error.startswith(f"could not connect to {PUBLIC_V4}")


def test_other_transport_errors_are_failures_not_exceptions() -> None:
    recorder = Recorder(httpx.RemoteProtocolError("garbage"))
    outcome = _sender(recorder).send("https://hooks.example.com/", BODY, SIGNED)
    assert outcome.status_code is None and outcome.error == "RemoteProtocolError: garbage"


def test_only_a_small_part_of_a_large_answer_is_read() -> None:
    class Endless(httpx.SyncByteStream):
        def __init__(self) -> None:
            self.chunks = 0

        def __iter__(self):  # type: ignore[no-untyped-def]
            while True:
                self.chunks += 1
                yield b"x" * 4096

    stream = Endless()
    recorder = Recorder(httpx.Response(200, stream=stream))
    outcome = _sender(recorder).send("https://hooks.example.com/", BODY, SIGNED)
    assert outcome.status_code == 200
    assert stream.chunks == 16  # 64 KiB, then the answer is dropped
