"""The client address the rate limits and the audit use: API Gateway's view, never a header."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from functions.api.limits import client_ip


def request(
    event: dict[str, Any] | None = None, client: tuple[str, int] | None = ("10.0.0.9", 1234)
) -> Request:
    scope: dict[str, Any] = {
        "type": "http",
        "method": "GET",
        "path": "/",
        "headers": [(b"x-forwarded-for", b"1.2.3.4")],
        "client": client,
    }
    if event is not None:
        scope["aws.event"] = event
    return Request(scope)


def test_rest_api_source_ip_wins() -> None:
    event = {"requestContext": {"identity": {"sourceIp": "198.51.100.7"}}}
    assert client_ip(request(event)) == "198.51.100.7"


def test_http_api_source_ip_is_read_too() -> None:
    event = {"requestContext": {"http": {"sourceIp": "2001:db8::1"}}}
    assert client_ip(request(event)) == "2001:db8::1"


def test_without_a_gateway_event_the_socket_peer_is_used_and_forwarded_headers_ignored() -> None:
    assert client_ip(request()) == "10.0.0.9"
    assert client_ip(request({"requestContext": {}})) == "10.0.0.9"
    assert client_ip(request(client=None)) == "unknown"
