"""The API as `make run` serves it: health, runtime, errors and the OpenAPI document."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.e2e


def test_health_answers_get(api: httpx.Client) -> None:
    response = api.get("/v1/health")
    assert response.status_code == 200
    body = response.json()
    assert body["ok"] is True
    assert body["service"] == "batchroute"
    assert isinstance(body["read_only"], bool)


def test_health_answers_head_without_a_body(api: httpx.Client) -> None:
    response = api.head("/v1/health")
    assert response.status_code == 200
    assert response.content == b""


def test_runtime_says_local_to_anonymous_callers(api: httpx.Client) -> None:
    response = api.get("/v1/runtime")
    assert response.status_code == 200
    assert response.json()["environment"] == "local"


def test_unknown_route_is_a_404_in_the_error_envelope(api: httpx.Client) -> None:
    response = api.get("/v1/no-such-route")
    assert response.status_code == 404
    error = response.json()["error"]
    assert isinstance(error["code"], str)
    assert isinstance(error["message"], str)


def test_openapi_document_is_3_1_at_version_1(api: httpx.Client) -> None:
    response = api.get("/openapi.json")
    assert response.status_code == 200
    document = response.json()
    assert document["openapi"] == "3.1.0"
    assert document["info"]["version"] == "1.0.0"
