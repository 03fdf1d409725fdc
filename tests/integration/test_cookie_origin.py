"""Cross-site writes with the session cookie (issue 27 point 3): a POST, PUT, PATCH or DELETE
that the cookie authenticates is refused 403 `forbidden_origin` unless its Origin (else its
Referer) is the service's own; bearer keys, reads, and clients that send neither header are
not affected. Also `X-Content-Type-Options: nosniff` on every answer. On moto."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from batchroute.config import Settings, get_settings
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from tests.integration.principals import TestOrg, new_org

PUBLIC = "https://console.example.com"
KEYS = "/v1/auth/account/api-keys"
EVIL = "https://evil.example"


@pytest.fixture
def app(local_aws: LocalStack) -> FastAPI:
    identity_store.cache_clear()
    settings = get_settings().model_copy(
        update={"public_base_url": PUBLIC, "console_origins": ["https://www.console.example.com"]}
    )
    return create_app(settings)


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.fixture
def org(client: TestClient) -> TestOrg:
    return new_org()


def _keys(client: TestClient, org: TestOrg) -> list[str]:
    listed = client.get(KEYS, headers=org.session_headers())
    assert listed.status_code == 200, listed.text
    return [key["label"] for key in listed.json()["data"]]


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": EVIL},
        {"Origin": "null"},  # sandboxed frames, data: URLs
        {"Origin": "http://console.example.com"},  # the scheme is part of the origin
        {"Referer": f"{EVIL}/page"},
        {"Origin": EVIL, "Referer": f"{PUBLIC}/console/"},  # Origin wins
    ],
)
def test_a_cookie_write_from_another_origin_is_refused(
    client: TestClient, org: TestOrg, headers: dict[str, str]
) -> None:
    response = client.post(KEYS, json={"label": "planted"}, headers={**org.session_headers(), **headers})
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden_origin"
    assert set(response.json()["error"]) <= {"code", "message", "details"}
    assert "planted" not in _keys(client, org)


@pytest.mark.parametrize("blank", ["", " "])
def test_a_blank_authorization_header_is_no_key_and_no_way_past_the_origin_check(
    client: TestClient, org: TestOrg, blank: str
) -> None:
    # Given a cookie write from another origin that also carries an empty Authorization header
    # (the origin check lets a request with the header through, as a key's)
    headers = {**org.session_headers(), "Origin": EVIL, "Authorization": blank}
    response = client.post(KEYS, json={"label": "planted"}, headers=headers)
    # Then the header is the credential: a blank one is refused, never the cookie used instead
    assert response.status_code == 401, response.text
    assert response.json()["error"]["code"] == "invalid_authorization"
    assert "planted" not in _keys(client, org)


def test_sign_out_from_another_origin_is_refused(client: TestClient, org: TestOrg) -> None:
    cookie = org.session_headers()
    refused = client.delete("/v1/sessions/current", headers={**cookie, "Origin": EVIL})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden_origin"
    assert client.get("/v1/sessions/current", headers=cookie).json()["session"] is not None


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": PUBLIC},
        {"Origin": "https://www.console.example.com"},  # CONSOLE_ORIGINS
        {"Referer": f"{PUBLIC}/console/settings/keys"},
        {"Origin": "http://testserver"},  # the request's own host: a same-origin page
        {},  # no Origin and no Referer: not a browser, so no other site is driving it
    ],
)
def test_a_cookie_write_from_the_service_origin_is_accepted(
    client: TestClient, org: TestOrg, headers: dict[str, str]
) -> None:
    response = client.post(KEYS, json={"label": "mine"}, headers={**org.session_headers(), **headers})
    assert response.status_code == 201, response.text


def test_bearer_keys_and_reads_are_not_affected(client: TestClient, org: TestOrg) -> None:
    # A key's write from anywhere (a key is never sent by a browser on its own)
    key = org.key_headers("owner")
    changed = client.put(
        "/v1/auth/account/profile", json={"display_name": "Acme 2"}, headers={**key, "Origin": EVIL}
    )
    assert changed.status_code == 200, changed.text
    # Even alongside a cookie: the bearer key is what authenticates it
    both = {**key, **org.session_headers(), "Origin": EVIL}
    assert (
        client.put("/v1/auth/account/profile", json={"display_name": "A3"}, headers=both).status_code == 200
    )
    # And a cookie read from another origin is not a write (CORS keeps the answer from it)
    assert client.get(KEYS, headers={**org.session_headers(), "Origin": EVIL}).status_code == 200


def test_the_compat_surface_refuses_in_the_vendor_shape(client: TestClient, org: TestOrg) -> None:
    response = client.post(
        "/v1/compat/v1/uploads",
        json={"filename": "a.jsonl", "purpose": "batch", "bytes": 10, "mime_type": "application/jsonl"},
        headers={**org.session_headers(), "Origin": EVIL},
    )
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden_origin"
    assert "type" in response.json()["error"]


# -- nosniff -----------------------------------------------------------------------------------
def test_every_answer_says_nosniff(app: FastAPI, client: TestClient, org: TestOrg) -> None:
    @app.get("/v1/_probe/boom")
    def boom() -> None:
        raise RuntimeError("unexpected")

    answers = {
        "ok": client.get("/v1/health"),
        "401": client.get("/v1/auth/account"),
        "404": client.get("/v1/no-such-route"),
        "400": client.post(
            "/v1/auth/login", content=b"{not json", headers={"content-type": "application/json"}
        ),
        "403 origin": client.post(
            KEYS, json={"label": "x"}, headers={**org.session_headers(), "Origin": EVIL}
        ),
        "500": client.get("/v1/_probe/boom"),
        "openapi": client.get("/openapi.json"),
    }
    for name, answer in answers.items():
        assert answer.headers.get("x-content-type-options") == "nosniff", name
    assert answers["500"].status_code == 500


def test_read_only_refusals_say_nosniff(local_aws: LocalStack) -> None:
    settings = Settings(read_only=True)
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        refused = client.post("/v1/batches", json={})
    assert refused.status_code == 503
    assert refused.headers["x-content-type-options"] == "nosniff"
