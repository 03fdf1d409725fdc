"""Whole vendor answers over urllib3 (providers/whole_answers.py) against a scripted loopback
server: what goes on the wire, and every network failure mapped to the same provider error
as the httpx path it replaced (the same VendorHttp over httpx's own transport)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import httpx
import pytest

from batchroute.providers.base import (
    PermanentProviderError,
    ProviderError,
    ProviderUnavailable,
    TransientProviderError,
)
from batchroute.providers.http import Timeouts, VendorHttp

Script = Callable[[socket.socket, bytes], None]


@dataclass
class Scripted:
    """A loopback HTTP server that answers each request as the current script says and keeps
    every raw request it read."""

    port: int = 0
    script: Script | None = None
    requests: list[bytes] = field(default_factory=list)

    def url(self, path: str = "/v1") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


def _read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        (
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        ),
        0,
    )
    while len(body) < length:
        body += conn.recv(65536)
    return head + b"\r\n\r\n" + body


@pytest.fixture
def server() -> Iterator[Scripted]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    scripted = Scripted(port=listener.getsockname()[1])
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            while not stop.is_set():
                request = _read_request(conn)
                if not request:
                    return
                scripted.requests.append(request)
                assert scripted.script is not None
                scripted.script(conn, request)
                if conn.fileno() < 0:
                    return

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield scripted
    stop.set()
    listener.close()


def _answer(status: int, body: bytes, *headers: str) -> Script:
    def script(conn: socket.socket, _request: bytes) -> None:
        head = [f"HTTP/1.1 {status} X", f"content-length: {len(body)}", *headers]
        conn.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)

    return script


def _close_without_answering(conn: socket.socket, _request: bytes) -> None:
    conn.shutdown(socket.SHUT_RDWR)
    conn.close()


def _cut_halfway(conn: socket.socket, _request: bytes) -> None:
    conn.sendall(
        b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 400\r\n\r\n{"id": "cut'
    )
    conn.shutdown(socket.SHUT_RDWR)
    conn.close()


def _silent(conn: socket.socket, _request: bytes) -> None:
    threading.Event().wait(1.0)


PATHS = {
    "urllib3": {},  # what VendorHttp uses for whole answers
    "httpx": {"transport": httpx.HTTPTransport()},  # the path it replaced, the reference
}


def _http(url: str, path: str, **extra: object) -> VendorHttp:
    return VendorHttp(
        url,
        vendor="groq",
        headers={"authorization": "Bearer sk-test"},
        timeouts=Timeouts(connect=1.0, read=0.3),
        **PATHS[path],  # type: ignore[arg-type]
        **extra,  # type: ignore[arg-type]
    )


def _raised(call: Callable[[], object]) -> ProviderError:
    with pytest.raises(ProviderError) as raised:
        call()
    return raised.value


@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_json_call_carries_the_endpoints_headers_and_a_compact_utf8_body(
    server: Scripted, path: str
) -> None:
    server.script = _answer(200, b'{"ok": true}', "content-type: application/json")
    http = _http(server.url(), path)
    body = {"model": "m", "messages": [{"role": "user", "content": "héllo ✓"}], "n": 1.5}
    assert http.request_json("POST", "/chat/completions", json_body=body, params={"a": "1 2"}) == {"ok": True}
    head, _, sent = server.requests[-1].partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    assert lines[0] == "POST /v1/chat/completions?a=1+2 HTTP/1.1"
    assert headers["authorization"] == "Bearer sk-test"
    assert headers["user-agent"].startswith(f"python-{path}/")  # the client each path is
    assert headers["content-type"] == "application/json"
    assert sent == json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    assert json.loads(sent) == body


@pytest.mark.parametrize("path", sorted(PATHS))
def test_an_absolute_url_is_called_as_given_and_bytes_come_back_whole(server: Scripted, path: str) -> None:
    server.script = _answer(200, b"line 1\nline 2\n")
    http = _http("http://127.0.0.1:9/elsewhere", path)
    assert http.request_bytes("GET", server.url("/results/1")) == b"line 1\nline 2\n"
    assert server.requests[-1].startswith(b"GET /results/1 HTTP/1.1")


@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_redirect_is_not_followed_and_a_429_keeps_its_wait(server: Scripted, path: str) -> None:
    http = _http(server.url(), path)
    server.script = _answer(307, b"", f"location: {server.url('/other')}")
    redirected = _raised(lambda: http.request_json("GET", "/models"))
    assert isinstance(redirected, PermanentProviderError)
    assert len(server.requests) == 1
    server.script = _answer(429, b'{"error": {"message": "slow down"}}', "retry-after-ms: 1500")
    throttled = _raised(lambda: http.request_json("GET", "/models"))
    assert isinstance(throttled, TransientProviderError)
    assert (throttled.code, throttled.retry_after_seconds) == ("rate_limited", 1.5)
    assert "slow down" in str(throttled)


@pytest.mark.parametrize("path", sorted(PATHS))
def test_each_network_failure_maps_as_the_httpx_path_mapped_it(server: Scripted, path: str) -> None:
    http = _http(server.url(), path)
    expected: list[tuple[Script, type[ProviderError], str]] = [
        (_close_without_answering, ProviderUnavailable, "provider_unreachable"),
        (_cut_halfway, TransientProviderError, "stream_interrupted"),
        (_silent, TransientProviderError, "provider_timeout"),
        (_answer(200, b"not json"), TransientProviderError, "provider_bad_response"),
    ]
    for script, kind, code in expected:
        server.script = script
        error = _raised(lambda: http.request_json("POST", "/chat/completions", json_body={"x": 1}))
        assert (type(error), error.code) == (kind, code), script
        assert "sk-test" not in str(error)


@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_host_that_refuses_connections_is_unreachable(path: str) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    error = _raised(lambda: _http(f"http://127.0.0.1:{port}/v1", path).request_json("GET", "/models"))
    assert (type(error), error.code) == (ProviderUnavailable, "provider_unreachable")


def test_a_nan_in_a_body_is_refused_before_anything_is_sent(server: Scripted) -> None:
    server.script = _answer(200, b"{}")
    with pytest.raises(ValueError, match="JSON compliant"):
        _http(server.url(), "urllib3").request_json("POST", "/x", json_body={"temperature": float("nan")})
    assert server.requests == []
