"""Hostile request bodies get a 4xx in the spec's envelope, never a 500, and write nothing:
non-object items, JSON nested past any parser's patience, bodies past the size cap, and
documented object fields of the wrong type. A table of bodies and expected answers."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.adapters.s3_objects import S3Objects
from batchroute.config import get_settings
from batchroute.domain.batches.json_limits import MAX_JSON_DEPTH
from batchroute.money import Money
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from tests.integration.batch_pipeline_support import heartbeat_all_lanes
from tests.integration.principals import TestOrg, new_org
from tests.integration.test_quotes import _item

MiB = 1024 * 1024


@pytest.fixture
def client(local_aws: LocalStack) -> TestClient:
    identity_store.cache_clear()
    heartbeat_all_lanes()
    return TestClient(create_app(), raise_server_exceptions=False)


@pytest.fixture
def org(client: TestClient) -> TestOrg:
    return new_org(credit_usd="10")


def _headers(org: TestOrg, key: str = "hostile-key-0001") -> dict[str, str]:
    return {**org.key_headers(), "Idempotency-Key": key, "content-type": "application/json"}


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _nothing_written(org: TestOrg) -> None:
    ledger = LedgerStore(get_settings().table_name("ledger"))
    assert ledger.state(org.org_id).reserved == Money.zero()
    assert ledger.reservations(org.org_id) == []
    artifacts = S3Objects(get_settings().buckets["artifacts"])
    listed = artifacts.s3.list_objects_v2(Bucket=artifacts.bucket, Prefix="batches/")
    assert listed.get("KeyCount", 0) == 0, listed.get("Contents")


# -- 2. non-object items --------------------------------------------------------------------
NON_OBJECT_ITEMS = [
    ([None], "items[0]"),
    ([1], "items[0]"),
    (["x"], "items[0]"),
    ([[]], "items[0]"),
    ([True], "items[0]"),
    ([_item(0), None], "items[1]"),
]


@pytest.mark.parametrize(("items", "path"), NON_OBJECT_ITEMS)
def test_a_non_object_item_is_the_quotes_preflight_failure_and_writes_nothing(
    client: TestClient, org: TestOrg, items: list[Any], path: str
) -> None:
    # Given a body the quote endpoint refuses
    quoted = client.post("/v1/quotes/model", json={"items": items}, headers=org.key_headers())
    assert quoted.status_code == 400, quoted.text
    # When it is sent as a batch / Then the same 400 and the same jsonl_shape issue
    response = client.post("/v1/batches", json={"items": items}, headers=_headers(org))
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "batch_preflight_failed" == quoted.json()["error"]["code"]
    issues = error["details"]["preflight"]["errors"]
    assert issues == quoted.json()["error"]["details"]["preflight"]["errors"]
    assert any(i["category"] == "jsonl_shape" and i["path"].startswith(path) for i in issues), issues
    _nothing_written(org)


# -- 3. nesting too deep, on every route that takes a body -----------------------------------
def _body_routes() -> list[tuple[str, str]]:
    """Every POST, PUT and PATCH operation the OpenAPI document lists."""
    paths = create_app().openapi()["paths"]
    found = [
        (method.upper(), re.sub(r"\{[^}]+\}", "x_0000000000", path))
        for path, operations in paths.items()
        for method in operations
        if method in ("post", "put", "patch")
    ]
    assert len(found) > 20
    return found


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 990, 100_000])
def test_every_route_refuses_nesting_too_deep(client: TestClient, org: TestOrg, depth: int) -> None:
    # Every route in one stack: the refusal comes before a route reads or writes anything
    body = '{"model": "x", "messages": [{"role": "user", "content": ' + _nested(depth) + "}]}"
    wrong: dict[str, str] = {}
    for method, path in _body_routes():
        response = client.request(method, path, content=body, headers=_headers(org))
        error = response.json().get("error", {}) if response.status_code == 400 else {}
        expected = {"max_depth": MAX_JSON_DEPTH}
        if error.get("code") != "invalid_json" or (
            not path.startswith("/v1/compat/") and error.get("details") != expected
        ):
            wrong[f"{method} {path}"] = f"{response.status_code} {response.text[:200]}"
    assert wrong == {}


def test_every_route_refuses_a_lone_surrogate_and_takes_a_pair(client: TestClient, org: TestOrg) -> None:
    # A lone UTF-16 surrogate escape is no text: no UTF-8 writer (DynamoDB, S3, a vendor) can
    # send it, so every route refuses it before it reads a field (it was a 500 on the way out)
    lone = '{"model": "x", "messages": [{"role": "user", "content": "a \\ud800 b"}]}'
    wrong: dict[str, str] = {}
    for method, path in _body_routes():
        response = client.request(method, path, content=lone, headers=_headers(org))
        error = response.json().get("error", {}) if response.status_code == 400 else {}
        if error.get("code") != "invalid_json":
            wrong[f"{method} {path}"] = f"{response.status_code} {response.text[:200]}"
    assert wrong == {}
    # And a pair (one character beyond the BMP), or an escaped backslash before "ud800", is text
    for text in ("a \\ud83d\\ude00 b", "a \\\\ud800 b"):
        body = (
            '{"model": "meta-llama/Llama-3.3-70B-Instruct", "messages": [{"role": "user", "content": "'
            + text
            + '"}]}'
        )
        assert client.post("/v1/chat/completions", content=body, headers=org.key_headers()).status_code == 200


def test_nesting_within_the_limit_reaches_the_route(client: TestClient, org: TestOrg) -> None:
    # Brackets inside strings never count; real nesting up to the limit is the route's to judge
    content = [{"type": "text", "text": "[[[[" * 100}]
    body = {"model": "meta-llama/Llama-3.3-70B-Instruct", "messages": [{"role": "user", "content": content}]}
    assert client.post("/v1/chat/completions", json=body, headers=org.key_headers()).status_code == 200
    deep = {"items": [_item(0)], "metadata": json.loads(_nested(MAX_JSON_DEPTH - 1))}
    refused = client.post("/v1/batches", json=deep, headers=_headers(org))
    assert refused.status_code == 400 and refused.json()["error"]["details"]["field"] == "metadata"


def test_a_deep_line_in_an_uploaded_file_is_a_line_error(client: TestClient, org: TestOrg) -> None:
    rows = json.dumps(_item(0)) + "\n" + '{"customer_item_id": "d", "input": ' + _nested(5000) + "}\n"
    uploaded = client.post(
        "/v1/files",
        files={"file": ("items.jsonl", rows.encode(), "application/jsonl")},
        data={"purpose": "batch_input"},
        headers=org.key_headers(),
    )
    assert uploaded.status_code in (200, 201), uploaded.text
    quote = client.post(
        "/v1/quotes/model", json={"input_file_id": uploaded.json()["file"]["id"]}, headers=org.key_headers()
    )
    assert quote.status_code == 400, quote.text
    assert "nests deeper" in json.dumps(quote.json()["error"])


# -- 4. the body-size cap ----------------------------------------------------------------------
def test_a_body_over_the_cap_is_413_and_writes_nothing(client: TestClient, org: TestOrg) -> None:
    cap = get_settings().max_json_body_bytes
    assert cap == 4 * MiB
    body = json.dumps({"items": [_item(0)], "metadata": {"blob": "x" * (cap + 1)}})
    response = client.post("/v1/batches", content=body, headers=_headers(org))
    assert response.status_code == 413, response.text
    error = response.json()["error"]
    assert error["code"] == "payload_too_large" and error["details"] == {"max_bytes": cap}
    _nothing_written(org)


def test_the_cap_holds_for_chat_and_the_compat_surface_in_its_own_shape(
    client: TestClient, org: TestOrg
) -> None:
    cap = get_settings().max_json_body_bytes
    big = "x" * cap
    chat = client.post(
        "/v1/chat/completions",
        json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": big}]},
        headers=org.key_headers(),
    )
    assert chat.status_code == 413 and chat.json()["error"]["code"] == "payload_too_large"
    compat = client.post(
        "/v1/compat/v1/batches",
        json={"input_file_id": big, "endpoint": "/v1/chat/completions", "completion_window": "24h"},
        headers=org.key_headers(),
    )
    assert compat.status_code == 413
    assert compat.json()["error"]["type"] == "invalid_request_error"
    assert compat.json()["error"]["code"] == "payload_too_large"


def test_a_body_just_under_the_cap_is_judged_by_the_route(client: TestClient, org: TestOrg) -> None:
    cap = get_settings().max_json_body_bytes
    filler = "x" * (cap - 1000)
    response = client.post(
        "/v1/chat/completions",
        json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": filler}], "batch": "?"},
        headers=org.key_headers(),
    )
    assert response.status_code == 400 and response.json()["error"]["details"]["field"] == "batch"


# -- 5. documented object fields of the wrong type -----------------------------------------------
WRONG_TYPES = [
    ("/v1/batches", {"items": [_item(0)], "metadata": "x"}, "metadata"),
    ("/v1/batches", {"items": [_item(0)], "metadata": ["x"]}, "metadata"),
    ("/v1/batches", {"items": [_item(0)], "metadata": 5}, "metadata"),
    ("/v1/batches", {"items": [_item(0)], "metadata": {"k": {"nested": 1}}}, "metadata.k"),
    ("/v1/batches", {"items": [_item(0)], "metadata": {"k": "v" * 513}}, "metadata.k"),
    ("/v1/batches", {"items": [_item(0)], "metadata": {f"k{i}": "v" for i in range(17)}}, "metadata"),
    ("/v1/batches", {"items": [_item(0)], "max_price": "cheap"}, "max_price"),
    ("/v1/batches", {"items": [_item(0)], "required_tools": {"a": 1}}, "required_tools"),
    ("/v1/quotes/model", {"items": [_item(0)], "max_price": []}, "max_price"),
    ("/v1/quotes/model", {"items": [_item(0)], "regions": "eu"}, "region"),
    ("/v1/chat/completions", {"model": "gpt-4o-mini", "messages": [], "batch": {"metadata": []}}, None),
    ("/v1/chat/completions", {"model": "gpt-4o-mini", "messages": [], "stream_options": 1}, None),
    ("/v1/chat/completions", {"model": "gpt-4o-mini", "messages": [], "provider_preferences": []}, None),
]


@pytest.mark.parametrize(("path", "body", "field"), WRONG_TYPES)
def test_an_object_field_of_the_wrong_type_is_400_with_its_path(
    client: TestClient, org: TestOrg, path: str, body: dict[str, Any], field: str | None
) -> None:
    response = client.post(path, json=body, headers=_headers(org))
    assert response.status_code == 400, response.text
    details = response.json()["error"].get("details") or {}
    if field is not None:
        assert details.get("field") == field, response.text
    else:
        assert details.get("field"), response.text
    _nothing_written(org)


def test_good_metadata_is_kept_exactly(client: TestClient, org: TestOrg) -> None:
    metadata = {"team": "search", "run": 7, "dry": False}
    response = client.post(
        "/v1/batches", json={"items": [_item(0)], "metadata": metadata}, headers=_headers(org)
    )
    assert response.status_code == 202, response.text
    batch_id = response.json()["batch"]["id"]
    got = client.get(f"/v1/batches/{batch_id}", headers=org.key_headers()).json()["batch"]
    assert got["metadata"] == {"team": "search", "run": "7", "dry": "false"}
