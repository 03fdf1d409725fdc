"""What /openapi.json says a request may hold is what the routes enforce, where a route checks a
field itself (to answer its own stable code) rather than through its model:

- POST /v1/batches' Idempotency-Key is documented required, 8-128 characters, and the route
  refuses exactly outside that (a generated client must not make it optional);
- a schedule's webhook secret is documented 8-256, as it is checked;
- a pct_of_limit threshold is documented a whole percent 0-100 (500 passed the USD branch);
- a webhook target is `{url, secret}` on every route that takes one: an unknown key is refused
  on a batch and on a queued chat job, as on the org default (it was dropped silently).
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from jsonschema import Draft202012Validator

from tests.integration.batch_pipeline_support import LLAMA, item
from tests.integration.principals import TestOrg
from tests.integration.test_batches_api import client as client  # the fixtures
from tests.integration.test_batches_api import org as org

HOOK = "https://8.8.8.8/hooks/batch"  # public: the SSRF guard passes it without DNS


@pytest.fixture
def document(client: TestClient) -> dict[str, Any]:
    answer: dict[str, Any] = client.get("/openapi.json").json()
    return answer


def _validator(document: dict[str, Any], schema: dict[str, Any]) -> Draft202012Validator:
    return Draft202012Validator({**schema, "components": document["components"]})


def _create(client: TestClient, org: TestOrg, key: str | None, body: dict[str, Any]) -> Any:
    headers = org.key_headers() | ({"Idempotency-Key": key} if key is not None else {})
    return client.post("/v1/batches", json=body, headers=headers)


def test_the_batch_idempotency_key_is_documented_as_the_route_enforces_it(
    client: TestClient, org: TestOrg, document: dict[str, Any]
) -> None:
    (parameter,) = [
        p for p in document["paths"]["/v1/batches"]["post"]["parameters"] if p["name"] == "Idempotency-Key"
    ]
    assert parameter["in"] == "header" and parameter["required"] is True
    documented = _validator(document, parameter["schema"])
    body = {"items": [item(0)]}
    for key, code in (("k" * 7, "invalid_idempotency_key"), ("k" * 129, "invalid_idempotency_key")):
        assert not documented.is_valid(key)
        answer = _create(client, org, key, body)
        assert answer.status_code == 400 and answer.json()["error"]["code"] == code
    missing = _create(client, org, None, body)
    assert missing.status_code == 400 and missing.json()["error"]["code"] == "idempotency_key_required"
    for key in ("k" * 8, "k" * 128):
        assert documented.is_valid(key)
        assert _create(client, org, key, body).status_code == 202
    # A work order's key is optional, with the same limits
    (optional,) = [
        p
        for p in document["paths"]["/v1/work-orders"]["post"]["parameters"]
        if p["name"] == "Idempotency-Key"
    ]
    assert optional["required"] is False and optional["schema"] == parameter["schema"]


def test_documented_webhook_secret_and_threshold_limits(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    secret = _validator(document, schemas["ScheduleWebhook"]["properties"]["secret"])
    assert [secret.is_valid(s) for s in ("s" * 7, "s" * 8, "s" * 256, "s" * 257, None)] == [
        False,
        True,
        True,
        False,
        True,
    ]
    threshold = _validator(document, {"$ref": "#/components/schemas/ThresholdIn"})
    assert not threshold.is_valid({"type": "pct_of_limit", "value": 500})
    assert not threshold.is_valid({"type": "pct_of_limit", "value": 50.5})
    assert threshold.is_valid({"type": "pct_of_limit", "value": 100})
    assert threshold.is_valid({"type": "spend_above", "value": 500})


def test_a_webhook_with_an_unknown_field_is_refused_everywhere(client: TestClient, org: TestOrg) -> None:
    typo = {"url": HOOK, "secret": "s" * 16, "secert": "s" * 16}
    # A batch's: a preflight issue in the webhook category, at the field's path
    batch = _create(client, org, "typo-key-0001", {"items": [item(0)], "webhook": typo})
    assert batch.status_code == 400, batch.text
    error = batch.json()["error"]
    assert error["code"] == "batch_preflight_failed"
    (issue,) = error["details"]["preflight"]["errors"]
    assert (issue["category"], issue["code"], issue["path"]) == ("webhook", "unknown_field", "webhook.secert")
    # A queued chat job's
    chat = client.post(
        "/v1/chat/completions",
        json={"model": LLAMA, "messages": [{"role": "user", "content": "hi"}], "batch": {"webhook": typo}},
        headers=org.key_headers(),
    )
    assert chat.status_code == 400, chat.text
    # The org default's, as before
    default = client.put("/v1/auth/account/delivery-webhook", json=typo, headers=org.key_headers())
    assert default.status_code == 400
    # And a well-formed one is taken on each
    good = {"url": HOOK, "secret": "s" * 16}
    assert _create(client, org, "good-key-0001", {"items": [item(0)], "webhook": good}).status_code == 202
