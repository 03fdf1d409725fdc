"""The client IP the anonymous limits key by is the trusted source only (issue 27 point 3):
API Gateway's sourceIp on AWS, the socket peer locally. The local server's app is driven
as uvicorn serves it (`api_config(...).load()` wraps it in uvicorn's proxy-header middleware
exactly when it would), from loopback, with a different X-Forwarded-For on every request."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import Request
from fastapi.testclient import TestClient

from batchroute.config import Settings
from batchroute_tools.local.provision import LocalStack
from batchroute_tools.local.runner import api_config
from functions.api.limits import client_ip
from tests.integration.accounts_harness import make_harness

PER_IP = 10


def _served(settings: Settings) -> TestClient:
    """The real app on moto as the local server runs it, reached from 127.0.0.1."""
    harness = make_harness(settings)
    config = api_config(harness.client.app, port=0, settings=settings)
    config.load()
    return TestClient(config.loaded_app, raise_server_exceptions=False, client=("127.0.0.1", 50000))


def _wrong_passwords(client: TestClient) -> list[int]:
    """30 wrong passwords, for 30 addresses (no account lockout), each claiming its own IP."""
    return [
        client.post(
            "/v1/auth/login",
            json={"email": f"user{n}@example.com", "password": "wrong-password"},
            headers={"X-Forwarded-For": f"198.51.100.{n}", "Forwarded": f"for=198.51.100.{n}"},
        ).status_code
        for n in range(30)
    ]


def test_forwarded_headers_from_loopback_are_ignored_by_default(local_aws: LocalStack) -> None:
    settings = Settings(rate_limit_login_per_ip=PER_IP)
    config = api_config(object(), port=8000, settings=settings)
    assert config.proxy_headers is False
    # When 30 wrong passwords come from loopback, each with another X-Forwarded-For
    statuses = _wrong_passwords(_served(settings))
    # Then they count as one IP: the per-IP login limit stops them after 10
    assert statuses == [401] * PER_IP + [429] * (30 - PER_IP)


def test_a_named_proxy_may_forward_the_client_address(local_aws: LocalStack) -> None:
    # Given the local server behind a proxy on loopback that TRUSTED_PROXIES names
    settings = Settings(rate_limit_login_per_ip=PER_IP, trusted_proxies=["127.0.0.1"])
    assert api_config(object(), port=8000, settings=settings).proxy_headers is True
    # Then each forwarded address counts on its own
    assert _wrong_passwords(_served(settings)) == [401] * 30


def _request(scope: dict[str, Any]) -> Request:
    base: dict[str, Any] = {"type": "http", "method": "POST", "path": "/", "headers": []}
    return Request({**base, **scope})


@pytest.mark.parametrize(
    "event",
    [
        {"requestContext": {"identity": {"sourceIp": "203.0.113.9"}}},  # REST API
        {"requestContext": {"http": {"sourceIp": "203.0.113.9"}}},  # HTTP API
    ],
)
def test_on_lambda_the_client_ip_is_api_gateways_source_ip(event: dict[str, Any]) -> None:
    request = _request(
        {
            "aws.event": {**event, "headers": {"x-forwarded-for": "198.51.100.1"}},
            "headers": [(b"x-forwarded-for", b"198.51.100.1"), (b"forwarded", b"for=198.51.100.1")],
            "client": ("10.0.0.1", 443),
        }
    )
    assert client_ip(request) == "203.0.113.9"


def test_without_a_gateway_the_client_ip_is_the_socket_peer_never_a_header() -> None:
    request = _request(
        {
            "headers": [(b"x-forwarded-for", b"198.51.100.1"), (b"x-real-ip", b"198.51.100.2")],
            "client": ("127.0.0.1", 5),
        }
    )
    assert client_ip(request) == "127.0.0.1"
