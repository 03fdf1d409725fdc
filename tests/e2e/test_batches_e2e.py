"""Batches as `make run` serves them: quote, create (idempotent), run through the real workflow
with simulated providers, results, receipt, artifact, a signed webhook to a loopback receiver,
cancel, listing and another org's refusal, all over HTTP."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.e2e

TERMINAL = {"completed", "failed", "canceled", "expired"}
BATCH_TIMEOUT_SECONDS = 60.0
WEBHOOK_TIMEOUT_SECONDS = 30.0
POLL_SECONDS = 0.25
SECRET = "whsec-e2e-local-secret"
LLAMA = "meta-llama/Llama-3.3-70B-Instruct"
MINI = "gpt-4o-mini"


# -- a loopback webhook receiver ---------------------------------------------------------------
@dataclass
class Delivery:
    path: str
    headers: dict[str, str]  # lower-case names
    body: bytes  # the raw bytes, as received


@dataclass
class Receiver:
    url: str
    deliveries: list[Delivery] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def wait_for(self, predicate: Callable[[Delivery], bool], timeout: float) -> Delivery:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                found = [d for d in self.deliveries if predicate(d)]
            if found:
                return found[0]
            time.sleep(POLL_SECONDS)
        raise AssertionError(f"no matching webhook within {timeout}s; got {self.deliveries}")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A real HTTP server on 127.0.0.1 (ALLOW_LOOPBACK_WEBHOOKS=1 admits it) answering 204."""
    holder: dict[str, Receiver] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            headers = {name.lower(): value for name, value in self.headers.items()}
            with holder["receiver"].lock:
                holder["receiver"].deliveries.append(Delivery(self.path, headers, raw))
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    holder["receiver"] = Receiver(f"http://127.0.0.1:{server.server_address[1]}/hook")
    thread = threading.Thread(target=server.serve_forever, name="webhook-receiver", daemon=True)
    thread.start()
    try:
        yield holder["receiver"]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _verify(secret: str, delivery: Delivery, tolerance: int = 300) -> bool:
    """docs/webhooks.md: HMAC-SHA256 over `{timestamp}.{raw body}`, base64url without padding."""
    timestamp = delivery.headers["x-service-timestamp"]
    if abs(time.time() - int(timestamp)) > tolerance:
        return False
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + delivery.body, hashlib.sha256).digest()
    expected = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    return hmac.compare_digest(expected, delivery.headers["x-service-signature"])


# -- helpers -----------------------------------------------------------------------------------
def _agent_key(api: httpx.Client, prefix: str) -> dict[str, str]:
    address = f"{prefix}-{uuid.uuid4().hex[:10]}@example.com"
    created = api.post(
        "/v1/auth/agent-register", json={"email": address, "password": "correct horse battery"}
    )
    assert created.status_code == 200, created.text
    return {"Authorization": f"Bearer {created.json()['api_key']}"}


def _item(n: int, model: str, text: str) -> dict[str, Any]:
    return {
        "customer_item_id": f"item-{n}",
        "operation": "responses",
        "model": model,
        "input": {"messages": [{"role": "user", "content": text}]},
    }


def _quote(api: httpx.Client, key: dict[str, str], items: list[dict[str, Any]]) -> str:
    quote = api.post("/v1/quotes/model", json={"items": items}, headers=key)
    assert quote.status_code == 200, quote.text
    assert quote.json()["item_count"] == len(items)
    return str(quote.json()["quote_id"])


def _batch(api: httpx.Client, key: dict[str, str], batch_id: str) -> dict[str, Any]:
    response = api.get(f"/v1/batches/{batch_id}", headers=key)
    assert response.status_code == 200, response.text
    return dict(response.json()["batch"])


def _wait(
    api: httpx.Client, key: dict[str, str], batch_id: str, done: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    deadline = time.monotonic() + BATCH_TIMEOUT_SECONDS
    while not done(batch := _batch(api, key, batch_id)):
        assert time.monotonic() < deadline, f"batch not done within {BATCH_TIMEOUT_SECONDS}s: {batch}"
        time.sleep(POLL_SECONDS)
    return batch


def _amount(money: dict[str, str]) -> Decimal:
    assert money["currency"] == "usd" and isinstance(money["amount"], str)
    return Decimal(money["amount"])


def _listed(api: httpx.Client, key: dict[str, str], state: str) -> set[str]:
    listing = api.get("/v1/batches", params={"state": state, "limit": 100}, headers=key)
    assert listing.status_code == 200, listing.text
    return {b["id"] for b in listing.json()["data"]}


def _balance(api: httpx.Client, key: dict[str, str]) -> Decimal:
    return _amount(api.get("/v1/auth/account", headers=key).json()["credit_balance"])


# -- the tests ---------------------------------------------------------------------------------
def test_a_mixed_batch_completes_with_results_receipt_and_a_signed_webhook(
    api: httpx.Client, receiver: Receiver
) -> None:
    key = _agent_key(api, "batches")
    # Given ten quoted items on two models, one that always fails, one that fails once
    items = [_item(n, MINI if n in (3, 7) else LLAMA, f"Question {n}: what is routing?") for n in range(10)]
    items[2]["input"]["messages"][0]["content"] += " [simulate:fail]"
    items[5]["input"]["messages"][0]["content"] += " [simulate:transient]"
    quote_id = _quote(api, key, items)
    # When the batch is created from the quote, with a webhook on the loopback receiver
    body = {"quote_id": quote_id, "webhook": {"url": receiver.url, "secret": SECRET}}
    headers = {**key, "Idempotency-Key": f"e2e-{uuid.uuid4().hex}"}
    started = time.monotonic()
    created = api.post("/v1/batches", json=body, headers=headers)
    # Then it is accepted, already priced
    assert created.status_code == 202, created.text
    batch = created.json()["batch"]
    batch_id = batch["id"]
    assert batch_id.startswith("batch_") and batch["state"] == "priced"
    assert batch["counts"]["total"] == 10 and batch["quote_id"] == quote_id
    # And a replay answers the same bytes with the same id
    replay = api.post("/v1/batches", json=body, headers=headers)
    assert replay.status_code == 202 and replay.content == created.content
    assert replay.headers.get("idempotent-replayed") == "true"
    # And the same key with another body is a conflict
    other = api.post("/v1/batches", json={**body, "metadata": {"x": "y"}}, headers=headers)
    assert other.status_code == 409, other.text

    # When it runs: polled until terminal
    batch = _wait(api, key, batch_id, lambda b: b["state"] in TERMINAL)
    elapsed = time.monotonic() - started
    print(f"\n10 simulated items: created -> {batch['state']} in {elapsed:.2f}s")
    # Then it completed, one item failed (the transient one was retried and succeeded)
    assert batch["state"] == "completed", batch
    assert batch["counts"] == {
        "total": 10,
        "pending": 0,
        "running": 0,
        "completed": 9,
        "failed": 1,
        "canceled": 0,
    }
    assert batch["completed_at"] and batch["settled_at"]
    assert batch["execution_summary"] == {"latest_error": None}
    assert elapsed < BATCH_TIMEOUT_SECONDS

    # And the results are one row per item, in input order
    results = api.get(f"/v1/batches/{batch_id}/results", headers=key)
    assert results.status_code == 200, results.text
    rows = results.json()["data"]
    assert [r["customer_item_id"] for r in rows] == [f"item-{n}" for n in range(10)]
    assert [r["sequence_number"] for r in rows] == list(range(10))
    assert [r["status"] for r in rows] == ["failed" if n == 2 else "completed" for n in range(10)]
    assert rows[2]["output"] is None and rows[2]["error"]["code"] == "provider_rejected"
    assert "simulated permanent failure" in rows[2]["error"]["message"]  # the vendor's own words
    assert all(
        r["output"]["type"] == "message" and r["error"] is None for r in rows if r["status"] != "failed"
    )
    # answered by each lane's vendor (emulator), which names the model its own way
    assert "gpt-4o-mini" in rows[3]["output"]["content"] and "llama" in rows[0]["output"]["content"].lower()
    assert results.json()["next_cursor"] is None
    # And the items view filters the failed one
    failed = api.get(f"/v1/batches/{batch_id}/items", params={"status": "failed"}, headers=key)
    assert failed.status_code == 200, failed.text
    assert [(i["sequence_number"], i["customer_item_id"]) for i in failed.json()["data"]] == [(2, "item-2")]

    # And the receipt balances: reserved = charged + released
    receipt = api.get(f"/v1/batches/{batch_id}/billing-receipt", headers=key)
    assert receipt.status_code == 200, receipt.text
    bill = receipt.json()
    reserved, charged, released = (
        _amount(bill[k]) for k in ("credit_reserved", "credit_charged", "credit_released")
    )
    assert reserved == charged + released and charged > 0
    assert bill["final_settled_price"] == bill["credit_charged"]
    assert bill["batch_id"] == batch_id and bill["settled_at"] == batch["settled_at"]
    assert bill["item_counts"] == {"total": 10, "completed": 9, "failed": 1, "canceled": 0}
    assert {lane["model"] for lane in bill["provider_lanes"]} == {LLAMA, MINI}
    detail = api.get(f"/v1/batches/{batch_id}", params={"include_billing_receipt": "true"}, headers=key)
    assert detail.json()["billing_receipt"] == bill
    lanes = detail.json()["batch"]["lane_statuses"]
    assert {lane["status"] for lane in lanes} == {"completed"}
    assert sum(lane["usage"]["prompt_tokens"] for lane in lanes) > 0  # numbers, not strings

    # And the artifact URL is a presigned moto URL of the whole JSONL
    artifact = api.get(f"/v1/batches/{batch_id}/artifact-url", headers=key)
    assert artifact.status_code == 200, artifact.text
    download = httpx.get(artifact.json()["url"], timeout=10)
    assert download.status_code == 200, download.text
    lines = [json.loads(line) for line in download.content.splitlines()]
    assert len(lines) == 10
    assert [(line["sequence_number"], line["status"]) for line in lines] == [
        (r["sequence_number"], r["status"]) for r in rows
    ]

    # And the signed webhook arrived: the signature checks over the raw bytes
    delivery = receiver.wait_for(lambda d: batch_id.encode() in d.body, WEBHOOK_TIMEOUT_SECONDS)
    assert delivery.path == "/hook"
    assert delivery.headers["x-service-event"] == "batch.completed"
    assert delivery.headers["content-type"].startswith("application/json")
    assert _verify(SECRET, delivery)
    assert not _verify("another-secret", delivery)
    assert abs(time.time() - int(delivery.headers["x-service-timestamp"])) <= 300
    event = json.loads(delivery.body)
    assert event["id"].startswith("evt_") and event["type"] == "batch.completed"
    assert event["batch"]["id"] == batch_id and event["batch"]["state"] == "completed"
    assert event["batch"]["counts"]["failed"] == 1
    # And the delivery view shows one successful attempt
    view = api.get(f"/v1/batches/{batch_id}/webhooks", headers=key)
    assert view.status_code == 200, view.text
    [record] = view.json()["data"]
    assert record["status"] == "succeeded" and record["attempt_count"] == 1, record
    assert record["event_id"] == event["id"] and record["url"] == receiver.url
    assert record["last_response_status"] == 204
    assert [e["attempt"] for e in view.json()["events"]] == [1]

    # And the listing shows it completed, not active
    assert batch_id in _listed(api, key, "completed")
    assert batch_id not in _listed(api, key, "active")
    # And another org may not read it
    stranger = _agent_key(api, "stranger")
    for path in ("", "/results", "/billing-receipt", "/webhooks"):
        assert api.get(f"/v1/batches/{batch_id}{path}", headers=stranger).status_code == 403, path
    assert api.post(f"/v1/batches/{batch_id}/cancel", headers=stranger).status_code == 403
    assert batch_id not in _listed(api, stranger, "completed")


def test_a_canceled_batch_settles_and_charges_only_what_ran(api: httpx.Client) -> None:
    key = _agent_key(api, "cancel")
    items = [_item(n, LLAMA, f"Long question {n}") for n in range(200)]
    quote_id = _quote(api, key, items)
    before = _balance(api, key)
    # Given a batch of 200 items, just created
    created = api.post(
        "/v1/batches", json={"quote_id": quote_id}, headers={**key, "Idempotency-Key": f"e2e-{uuid.uuid4()}"}
    )
    assert created.status_code == 202, created.text
    batch_id = created.json()["batch"]["id"]
    # Then it is listed as active (unless it already finished)
    if batch_id not in _listed(api, key, "active"):
        assert _batch(api, key, batch_id)["state"] in TERMINAL
    # When it is canceled at once
    cancel = api.post(f"/v1/batches/{batch_id}/cancel", json={"reason": "e2e: changed my mind"}, headers=key)
    if cancel.status_code == 200:
        # Then it is canceled
        assert cancel.json()["batch"]["state"] == "canceled"
        assert cancel.json()["batch"]["cancel_reason"] == "e2e: changed my mind"
        expected = "canceled"
    else:
        # (or it had already finished: a terminal batch is not cancellable)
        assert cancel.status_code == 409, cancel.text
        expected = _batch(api, key, batch_id)["state"]
        assert expected in TERMINAL
    # And a second cancel is refused
    again = api.post(f"/v1/batches/{batch_id}/cancel", headers=key)
    assert again.status_code == 409, again.text

    # And it settles: finalized, charged only for the items that ran, the rest released
    batch = _wait(api, key, batch_id, lambda b: bool(b["settled_at"]))
    assert batch["state"] == expected
    counts = batch["counts"]
    assert counts["total"] == 200 and counts["pending"] == 0 and counts["running"] == 0
    assert counts["completed"] + counts["failed"] + counts["canceled"] == 200
    if expected == "canceled":
        assert batch_id in _listed(api, key, "canceled")
    assert batch_id not in _listed(api, key, "active")
    bill = api.get(f"/v1/batches/{batch_id}/billing-receipt", headers=key).json()
    reserved, charged, released = (
        _amount(bill[k]) for k in ("credit_reserved", "credit_charged", "credit_released")
    )
    assert reserved == charged + released
    assert bill["item_counts"]["canceled"] == counts["canceled"]
    if counts["completed"] == 0:
        assert _amount(bill["provider_subtotal"]) == 0
    after = _balance(api, key)
    assert after == before - charged
    assert after >= before - reserved
    print(
        f"\ncanceled batch: {counts['completed']} completed, {counts['canceled']} canceled, "
        f"charged {charged} of {reserved} reserved"
    )
