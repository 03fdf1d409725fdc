"""The API shell: envelope on every non-2xx, health, runtime, OpenAPI, read-only mode."""

from __future__ import annotations

import json

import pytest
from fastapi import APIRouter, FastAPI
from fastapi.testclient import TestClient
from pydantic import BaseModel, Field

from batchroute.config import Settings
from functions.api.app import create_app


class _Echo(BaseModel):
    label: str = Field(min_length=1, max_length=120)
    password: str


def _app_with_probe_routes(settings: Settings | None = None) -> FastAPI:
    """The real app plus two probe routes that exercise the error mapping."""
    app = create_app(settings)
    probe = APIRouter()

    @probe.post("/v1/_probe/echo")
    def echo(body: _Echo) -> dict[str, str]:
        return {"label": body.label}

    @probe.get("/v1/_probe/boom")
    def boom() -> None:
        raise RuntimeError("database password is hunter2")

    app.include_router(probe)
    return app


@pytest.fixture
def client() -> TestClient:
    return TestClient(_app_with_probe_routes(), raise_server_exceptions=False)


def test_health_get_and_head(client: TestClient) -> None:
    # Given the app / When health is asked / Then it answers per spec
    response = client.get("/v1/health")
    assert response.status_code == 200
    assert response.json() == {"ok": True, "service": "batchroute", "read_only": False}
    head = client.head("/v1/health")
    assert head.status_code == 200 and head.content == b""


def test_runtime_anonymous_is_public_safe(client: TestClient) -> None:
    body = client.get("/v1/runtime").json()
    assert body["environment"] == "local"
    assert body["read_only"] is False
    assert body["capabilities"]["email_delivery"]["enabled"] is True
    assert "provider_simulation" not in body and "routing" not in body


def test_unknown_route_is_404_in_the_envelope(client: TestClient) -> None:
    response = client.get("/v1/does-not-exist")
    assert response.status_code == 404
    assert response.json() == {"error": {"code": "not_found", "message": "No such resource."}}


def test_wrong_method_is_405_in_the_envelope(client: TestClient) -> None:
    response = client.delete("/v1/health")
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"
    # and Allow names every method of the path (RFC 9110 15.5.6), its routes' all
    assert response.headers["allow"] == "GET, HEAD"
    assert client.put("/v1/batches").headers["allow"] == "GET, POST"
    compat = client.put("/v1/compat/v1/batches")
    assert compat.status_code == 405 and compat.headers["allow"] == "GET, POST"


def test_validation_failure_is_400_with_a_stable_code_and_no_echo(client: TestClient) -> None:
    # Given a body that breaks the schema and carries a secret
    response = client.post("/v1/_probe/echo", json={"label": "", "password": "s3cret-value"})
    # Then 400 invalid_request, the failing path named, the secret never echoed
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["details"]["errors"][0]["path"] == "body.label"
    assert "s3cret-value" not in response.text


def test_malformed_json_is_400_invalid_json(client: TestClient) -> None:
    response = client.post(
        "/v1/_probe/echo", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_json"


def test_unexpected_error_is_500_without_internals(client: TestClient) -> None:
    response = client.get("/v1/_probe/boom", headers={"x-request-id": "req-boom-0001"})
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "internal_error"
    assert "hunter2" not in response.text and "RuntimeError" not in response.text
    # the 500 is answered outside the middleware, and still names the request
    assert response.headers["x-request-id"] == "req-boom-0001"
    assert len(client.get("/v1/_probe/boom").headers["x-request-id"]) >= 8


def test_every_answer_carries_a_request_id(client: TestClient) -> None:
    response = client.get("/v1/health", headers={"x-request-id": "req-12345678"})
    assert response.headers["x-request-id"] == "req-12345678"
    assert len(client.get("/v1/health").headers["x-request-id"]) >= 8


def test_read_only_mode_refuses_mutations_but_serves_reads() -> None:
    # Given READ_ONLY=1
    client = TestClient(_app_with_probe_routes(Settings(read_only=True)), raise_server_exceptions=False)
    # When a mutating request arrives / Then 503 read_only; reads and health keep working
    response = client.post("/v1/_probe/echo", json={"label": "x", "password": "p"})
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "read_only"
    health = client.get("/v1/health")
    assert health.status_code == 200 and health.json()["read_only"] is True
    assert client.get("/v1/runtime").json()["read_only"] is True
    # and on the vendor-compatible surface the refusal takes the vendor's error shape
    compat = client.post("/v1/compat/v1/batches", json={})
    assert compat.status_code == 503
    assert compat.json() == {
        "error": {
            "type": "server_error",
            "param": None,
            "code": "read_only",
            "message": "The service is in read-only maintenance; retry later.",
        }
    }


def test_openapi_document_is_3_1_and_documents_every_route() -> None:
    app = create_app()
    document = TestClient(app).get("/openapi.json").json()
    assert document["openapi"] == "3.1.0"
    assert document["info"]["version"] == "1.0.0"
    documented = {(path, method.upper()) for path, item in document["paths"].items() for method in item}
    served = {
        (route.path, method)
        for route in app.routes
        if getattr(route, "include_in_schema", False)
        for method in getattr(route, "methods", ())
    }
    assert served <= documented
    assert "422" not in json.dumps(document["paths"])
    assert "ErrorEnvelope" in document["components"]["schemas"]
