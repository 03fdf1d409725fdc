"""The documented answers are the real ones: a quoted batch, a workflow quote, a queued and a
direct chat request run on moto, and every 2xx answer on the way is checked against the schema
the OpenAPI document gives for its operation, closed (an undocumented key fails, not only a
missing or mistyped one). The answers of these routes are encoded as services build them
(functions/api/openapi.py `documented_as`), so this is what keeps the document honest."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from jsonschema import Draft202012Validator, ValidationError

from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.config import get_settings
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from tests.integration.batch_pipeline_support import GPT, LLAMA, item, run_until_done
from tests.integration.principals import TestOrg, new_org

JSON = "application/json"


def _closed(node: Any) -> Any:
    """The schema with every object that lists its properties closed to any other key."""
    if isinstance(node, list):
        return [_closed(value) for value in node]
    if not isinstance(node, dict):
        return node
    closed = {key: _closed(value) for key, value in node.items()}
    if "properties" in closed and "additionalProperties" not in closed:
        closed["additionalProperties"] = False
    return closed


class Contract:
    """Checks answers against the document, and counts the operations it checked."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.paths = document["paths"]
        self.components = {"schemas": _closed(document["components"]["schemas"])}
        self.checked: set[tuple[str, str, int]] = set()

    def _validator(self, schema: dict[str, Any]) -> Draft202012Validator:
        return Draft202012Validator({**_closed(schema), "components": self.components})

    def check(self, response: httpx.Response, method: str, path: str) -> Any:
        assert 200 <= response.status_code < 300, response.text
        answer = self.paths[path][method]["responses"][str(response.status_code)]
        body = response.json()
        self._validator(answer["content"][JSON]["schema"]).validate(body)
        self.checked.add((method, path, response.status_code))
        return body

    def check_events(self, response: httpx.Response, method: str, path: str) -> list[Any]:
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["x-content-type-options"] == "nosniff"  # streams too
        described = self.paths[path][method]["responses"]["200"]["content"]["text/event-stream"]
        validator = self._validator(described["x-event-data"])
        lines = [line.removeprefix("data: ") for line in response.text.split("\n\n") if line]
        assert lines[-1] == "[DONE]"
        events = [json.loads(line) for line in lines[:-1]]
        for event in events:
            validator.validate(event)
        self.checked.add((method, path, 200))
        return events


@pytest.fixture
def client(stack: LocalStack) -> Iterator[TestClient]:
    settings = get_settings().model_copy(update={"simulated_ttft_ms": 0, "simulated_inter_token_ms": 0})
    with TestClient(create_app(settings), raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.fixture
def org(client: TestClient) -> TestOrg:
    return new_org(credit_usd="10")


@pytest.fixture
def contract(client: TestClient) -> Contract:
    return Contract(client.get("/openapi.json").json())


def test_the_check_refuses_an_undocumented_or_a_missing_key() -> None:
    contract = Contract(create_app().openapi())
    answer = {"batch_id": "batch_x", "url": "https://example.com/r", "expires_in": 900}
    request = httpx.Request("GET", "http://testserver/v1/batches/batch_x/artifact-url")
    path = "/v1/batches/{batch_id}/artifact-url"
    contract.check(httpx.Response(200, json=answer, request=request), "get", path)
    for wrong in (
        {**answer, "extra": 1},
        {"batch_id": "batch_x", "url": "u"},
        {**answer, "expires_in": "900"},
    ):
        with pytest.raises(ValidationError):
            contract.check(httpx.Response(200, json=wrong, request=request), "get", path)


def _execution(batch_id: str) -> str:
    record = BatchRecords(get_settings().table_name("batches")).get(batch_id)
    assert record is not None and record.execution_arn
    return str(record.execution_arn)


def test_batch_quote_and_receipt_answers_match_the_document(
    client: TestClient, org: TestOrg, stack: LocalStack, contract: Contract
) -> None:
    headers = org.key_headers()
    items = [item(0), item(1, text="[simulate:fail]"), item(2, GPT)]
    quote = contract.check(
        client.post("/v1/quotes/model", json={"items": items}, headers=headers), "post", "/v1/quotes/model"
    )
    assert any(not lane["selected"] for lane in quote["quote_lanes"])  # rejected lanes are checked too
    workflow = {
        "product": "ticket-classification",
        "inputs": [
            {"id": "t-1", "ticket": {"body": "I was charged twice."}, "categories": ["billing", "bug"]}
        ],
    }
    contract.check(
        client.post("/v1/quotes/workflow", json=workflow, headers=headers), "post", "/v1/quotes/workflow"
    )
    created = contract.check(
        client.post(
            "/v1/batches",
            json={"quote_id": quote["quote_id"], "items": items, "metadata": {"team": "support", "n": 3}},
            headers={**headers, "Idempotency-Key": "contract-key-0001"},
        ),
        "post",
        "/v1/batches",
    )
    batch_id = created["batch"]["id"]
    run_until_done(stack, _execution(batch_id), budget_seconds=60)

    read = contract.check(
        client.get(
            f"/v1/batches/{batch_id}?include_details=true&include_billing_receipt=true", headers=headers
        ),
        "get",
        "/v1/batches/{batch_id}",
    )
    assert read["batch"]["details"] and read["batch"]["lane_statuses"] and read["billing_receipt"]
    contract.check(client.get(f"/v1/batches/{batch_id}", headers=headers), "get", "/v1/batches/{batch_id}")
    contract.check(client.get("/v1/batches?limit=5", headers=headers), "get", "/v1/batches")
    items_page = contract.check(
        client.get(f"/v1/batches/{batch_id}/items", headers=headers), "get", "/v1/batches/{batch_id}/items"
    )
    assert {row["status"] for row in items_page["data"]} == {"completed", "failed"}
    for query in ("", "?body_format=raw&limit=1"):
        contract.check(
            client.get(f"/v1/batches/{batch_id}/results{query}", headers=headers),
            "get",
            "/v1/batches/{batch_id}/results",
        )
    contract.check(
        client.get(f"/v1/batches/{batch_id}/artifact-url", headers=headers),
        "get",
        "/v1/batches/{batch_id}/artifact-url",
    )
    receipt = contract.check(
        client.get(f"/v1/batches/{batch_id}/billing-receipt", headers=headers),
        "get",
        "/v1/batches/{batch_id}/billing-receipt",
    )
    assert receipt["provider_lanes"] and receipt["rejected_lanes"]
    retried = contract.check(
        client.post(f"/v1/batches/{batch_id}/retry", headers=headers), "post", "/v1/batches/{batch_id}/retry"
    )
    canceled = contract.check(
        client.post(
            f"/v1/batches/{retried['batch']['id']}/cancel", json={"reason": "enough"}, headers=headers
        ),
        "post",
        "/v1/batches/{batch_id}/cancel",
    )
    assert canceled["batch"]["cancel_reason"] == "enough"
    for runtime_headers in ({}, headers):
        contract.check(client.get("/v1/runtime", headers=runtime_headers), "get", "/v1/runtime")
    assert len(contract.checked) == 12


def test_chat_answers_match_the_document(
    client: TestClient, org: TestOrg, stack: LocalStack, contract: Contract
) -> None:
    headers = org.key_headers()
    messages = [{"role": "user", "content": "Say hello."}]
    path = "/v1/chat/completions"
    contract.check(
        client.post(path, json={"model": LLAMA, "messages": messages, "max_tokens": 16}, headers=headers),
        "post",
        path,
    )
    streamed = {
        "model": LLAMA,
        "messages": messages,
        "max_tokens": 16,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    events = contract.check_events(client.post(path, json=streamed, headers=headers), "post", path)
    assert events[-1]["usage"] and events[0]["usage"] is None
    queued = {"model": LLAMA, "messages": messages, "max_tokens": 16, "batch": {"metadata": {"ticket": "7"}}}
    job = contract.check(client.post(path, json=queued, headers=headers), "post", path)
    contract.check(client.get(f"{path}/{job['id']}", headers=headers), "get", "/v1/chat/completions/{job_id}")
    run_until_done(stack, _execution(job["batch_id"]), budget_seconds=60)
    done = contract.check(
        client.get(f"{path}/{job['id']}", headers=headers), "get", "/v1/chat/completions/{job_id}"
    )
    assert done["status"] == "completed" and done["result"]["object"] == "chat.completion"
    assert len(contract.checked) == 3


def test_work_order_and_feedback_answers_match_the_document(
    client: TestClient, org: TestOrg, stack: LocalStack, contract: Contract
) -> None:
    headers = org.key_headers()
    wo_path = "/v1/work-orders"
    order = contract.check(
        client.post(wo_path, json={"name": "n", "client_reference": "PO-7"}, headers=headers), "post", wo_path
    )
    one = f"{wo_path}/{order['id']}"
    created = client.post(
        "/v1/batches",
        json={"items": [item(0), item(1)], "work_order_id": order["id"]},
        headers={**headers, "Idempotency-Key": "answers-wo-0001"},
    )
    batch_id = created.json()["batch"]["id"]
    run_until_done(stack, _execution(batch_id), budget_seconds=60)
    other = client.post(
        "/v1/batches", json={"items": [item(2)]}, headers={**headers, "Idempotency-Key": "answers-wo-0002"}
    ).json()["batch"]["id"]
    contract.check(
        client.post(f"{one}/members", json={"batch_id": other}, headers=headers),
        "post",
        "/v1/work-orders/{work_order_id}/members",
    )
    contract.check(
        client.get(f"{one}/members", headers=headers), "get", "/v1/work-orders/{work_order_id}/members"
    )
    contract.check(client.get(wo_path, headers=headers), "get", wo_path)
    done = contract.check(client.get(one, headers=headers), "get", "/v1/work-orders/{work_order_id}")
    assert done["items"]["completed"] == 2
    contract.check(
        client.patch(one, json={"closed": True}, headers=headers), "patch", "/v1/work-orders/{work_order_id}"
    )
    detail = contract.check(
        client.get(f"/v1/batches/{batch_id}?include_details=true", headers=headers),
        "get",
        "/v1/batches/{batch_id}",
    )
    assert detail["batch"]["details"]["work_order"] == {"id": order["id"], "client_reference": "PO-7"}
    target = {"type": "batch_item", "batch_id": batch_id, "customer_item_id": "item-0"}
    body = {"target": target, "rating": -1, "comment": "c", "labels": ["wrong_format"]}
    contract.check(client.post("/v1/feedback", json=body, headers=headers), "post", "/v1/feedback")
    contract.check(
        client.post("/v1/feedback", json={**body, "rating": 1}, headers=headers), "post", "/v1/feedback"
    )
    contract.check(client.get("/v1/feedback", headers=headers), "get", "/v1/feedback")
    contract.check(client.get("/v1/feedback/summary", headers=headers), "get", "/v1/feedback/summary")
    items = contract.check(
        client.get(f"/v1/batches/{batch_id}/items", headers=headers), "get", "/v1/batches/{batch_id}/items"
    )
    assert items["data"][0]["feedback"][0]["rating"] == 1


def test_preset_answers_match_the_document(client: TestClient, org: TestOrg, contract: Contract) -> None:
    headers = org.key_headers()
    body = {
        "name": "triage",
        "model": LLAMA,
        "system_prompt": "Be brief.",
        "parameters": {"max_output_tokens": 32, "temperature": 0.2, "stop": "END"},
        "routing": {"privacy_tier": "standard", "max_price": {"output_per_mtok": "2.5"}},
        "metadata": {"team": "support"},
    }
    base = "/v1/presets"
    one = f"{base}/{{name}}"
    contract.check(client.post(base, json=body, headers=headers), "post", base)
    contract.check(client.patch(f"{base}/triage", json={"description": "v2"}, headers=headers), "patch", one)
    contract.check(client.put(f"{base}/triage", json=body | {"name": "triage"}, headers=headers), "put", one)
    contract.check(client.get(base, headers=headers), "get", base)
    contract.check(client.get(f"{base}/triage", headers=headers), "get", one)
    contract.check(client.get(f"{base}/triage/versions?limit=2", headers=headers), "get", f"{one}/versions")
    contract.check(
        client.get(f"{base}/triage/versions/1", headers=headers), "get", f"{one}/versions/{{version}}"
    )
    # A batch, its items and a queued chat job name the preset version they used
    items = [
        {
            "customer_item_id": "t-1",
            "preset": "triage@1",
            "input": {"messages": [{"role": "user", "content": "Hi"}]},
        }
    ]
    created = contract.check(
        client.post(
            "/v1/batches", json={"items": items}, headers={**headers, "Idempotency-Key": "preset-contract"}
        ),
        "post",
        "/v1/batches",
    )
    batch_id = created["batch"]["id"]
    read = contract.check(
        client.get(f"/v1/batches/{batch_id}", headers=headers), "get", "/v1/batches/{batch_id}"
    )
    assert read["batch"]["presets"] == ["triage@1"]
    listed = contract.check(
        client.get(f"/v1/batches/{batch_id}/items", headers=headers), "get", "/v1/batches/{batch_id}/items"
    )
    assert listed["data"][0]["preset"] == "triage@1"
    queued = {"preset": "triage", "messages": [{"role": "user", "content": "Hi"}], "batch": True}
    job = contract.check(
        client.post("/v1/chat/completions", json=queued, headers=headers), "post", "/v1/chat/completions"
    )
    assert job["preset"] == "triage@3"
    contract.check(client.delete(f"{base}/triage", headers=headers), "delete", one)
    assert len(contract.checked) == 12


def test_a_finished_uploads_409_is_in_the_document(
    client: TestClient, org: TestOrg, contract: Contract
) -> None:
    # The gap the issue found: parts and complete on a finished upload answer 409
    # `upload_not_pending`, which the document did not list.
    headers = org.key_headers()
    base = "/v1/compat/v1/uploads"
    body = {"filename": "in.jsonl", "purpose": "batch", "bytes": 10, "mime_type": "text/jsonl"}
    upload = client.post(base, json=body, headers=headers).json()
    assert client.post(f"{base}/{upload['id']}/cancel", headers=headers).status_code == 200
    one = f"{base}/{upload['id']}"
    answers = {
        "parts": client.post(f"{one}/parts", files={"data": b"{}\n"}, headers=headers),
        "complete": client.post(f"{one}/complete", json={"part_ids": ["part_1"]}, headers=headers),
    }
    for action, answer in answers.items():
        assert answer.status_code == 409, answer.text
        assert answer.json()["error"]["code"] == "upload_not_pending"
        assert "409" in contract.paths[f"{base}/{{upload_id}}/{action}"]["post"]["responses"]
