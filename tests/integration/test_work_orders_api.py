"""Work orders (beta) over HTTP on moto (docs/work-orders.md): batches and a queued chat job
join by `work_order_id`, the workflow runs them to their end on the local Step Functions, and
the work order's status and totals follow from the counters Settle moves; attach, close,
listing filters, validation with field paths, another org, roles."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.aws import client as aws_client
from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.adapters.dynamo.work_orders import WorkOrderStore
from batchroute.clock import FixedClock, SystemClock
from batchroute.config import get_settings
from batchroute.domain.accounts.access import Principal
from batchroute.money import Money
from batchroute.services.work_orders.commands import CreateWorkOrder
from batchroute.services.work_orders.service import WorkOrders
from batchroute.wiring import Wiring
from batchroute_tools.local.provision import LocalStack
from tests.integration.batch_pipeline_support import (
    LLAMA,
    item,
    run_until_done,
)
from tests.integration.principals import TestOrg, new_org
from tests.integration.principals import org as org  # the fixtures
from tests.integration.principals import pipeline_client as pipeline_client
from tests.integration.principals import pipeline_stack as pipeline_stack

PATH = "/v1/work-orders"


def _create(
    client: TestClient, org: TestOrg, body: dict[str, Any], role: str = "member", **headers: str
) -> Any:
    return client.post(PATH, json=body, headers={**org.key_headers(role), **headers})  # type: ignore[arg-type]


def _batch(client: TestClient, org: TestOrg, items: list[dict[str, Any]], key: str, **extra: Any) -> Any:
    return client.post(
        "/v1/batches",
        json={"items": items, **extra},
        headers={**org.key_headers("member"), "Idempotency-Key": key},
    )


def _run(stack: LocalStack, batch_id: str) -> None:
    record = BatchRecords(get_settings().table_name("batches")).get(batch_id)
    assert record is not None and record.execution_arn
    run_until_done(stack, record.execution_arn, budget_seconds=60)


def _charged(client: TestClient, org: TestOrg, batch_id: str) -> Money:
    receipt = client.get(f"/v1/batches/{batch_id}/billing-receipt", headers=org.key_headers()).json()
    return Money.usd(receipt["credit_charged"]["amount"])


def _error(response: Any) -> tuple[int, str, Any]:
    error = response.json()["error"]
    return response.status_code, error["code"], (error.get("details") or {}).get("field")


# -- the whole job ------------------------------------------------------------------------
def test_batches_and_a_chat_job_run_to_the_end_and_the_work_order_derives_its_totals(
    client: TestClient, org: TestOrg, stack: LocalStack
) -> None:
    # Given a work order
    created = _create(
        client, org, {"name": "Q3 invoices", "client_reference": "PO-1", "metadata": {"team": "ap"}}
    )
    assert created.status_code == 201, created.text
    order = created.json()
    wo = order["id"]
    assert wo.startswith("wo_") and order["status"] == "empty" and order["closed"] is False
    assert order["members"]["total"] == 0 and Money.usd(order["cost"]["charged"]["amount"]) == Money.zero()
    # When two batches (one with an item that fails) and a queued chat job join it
    ok = _batch(client, org, [item(0), item(1)], "wo-batch-0001", work_order_id=wo)
    mixed = _batch(
        client, org, [item(2), item(3, text="[simulate:fail] please")], "wo-batch-0002", work_order_id=wo
    )
    assert ok.status_code == 202 and mixed.status_code == 202, (ok.text, mixed.text)
    job = client.post(
        "/v1/chat/completions",
        json={
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "messages": [{"role": "user", "content": "Say hello."}],
            "max_tokens": 16,
            "batch": {"work_order_id": wo},
        },
        headers=org.key_headers("member"),
    )
    assert job.status_code == 202, job.text
    batch_ids = [ok.json()["batch"]["id"], mixed.json()["batch"]["id"], job.json()["batch_id"]]
    # Then while they run the work order is in progress, with their items and reservations
    running = client.get(f"{PATH}/{wo}", headers=org.key_headers("billing")).json()
    assert running["status"] == "in_progress"
    assert running["members"]["total"] == 3 and running["members"]["in_progress"] == 3
    assert running["items"] == {"total": 5, "pending": 5, "completed": 0, "failed": 0, "canceled": 0}
    assert Money.usd(running["cost"]["reserved"]["amount"]).micros > 0
    # And each batch's detailed view points at it
    detail = client.get(f"/v1/batches/{batch_ids[0]}?include_details=true", headers=org.key_headers()).json()
    assert detail["batch"]["details"]["work_order"] == {"id": wo, "client_reference": "PO-1"}
    assert detail["batch"]["details"]["plan"]["groups"]
    # When the workflow runs every member to its end
    for batch_id in batch_ids:
        _run(stack, batch_id)
    # Then the status and totals follow from the members, nothing left reserved
    done = client.get(f"{PATH}/{wo}", headers=org.key_headers()).json()
    assert done["status"] == "completed_with_failures", done
    assert done["members"] | {"limit": 0} == {
        "total": 3,
        "in_progress": 0,
        "completed": 3,
        "failed": 0,
        "canceled": 0,
        "expired": 0,
        "limit": 0,
    }
    assert done["items"] == {"total": 5, "pending": 0, "completed": 4, "failed": 1, "canceled": 0}
    assert Money.usd(done["cost"]["reserved"]["amount"]) == Money.zero()
    charged = sum((_charged(client, org, b) for b in batch_ids), Money.zero())
    assert Money.usd(done["cost"]["charged"]["amount"]) == charged and charged.micros > 0
    # And the members are listed with their outcomes, the chat job as one
    members = client.get(f"{PATH}/{wo}/members", headers=org.key_headers()).json()
    assert sorted(m["batch_id"] for m in members["data"]) == sorted(batch_ids)
    assert {m["kind"] for m in members["data"]} == {"batch", "chat_job"}
    assert {m["outcome"] for m in members["data"]} == {"completed"}
    count = len(batch_ids)
    exact = client.get(f"{PATH}/{wo}/members?limit={count}", headers=org.key_headers()).json()
    assert len(exact["data"]) == count and exact["next_cursor"] is None
    first = client.get(f"{PATH}/{wo}/members?limit={count - 1}", headers=org.key_headers()).json()
    assert first["next_cursor"] is not None


def test_a_vendor_compatible_batch_joins_by_its_metadata(
    client: TestClient, org: TestOrg, stack: LocalStack
) -> None:
    wo = _create(client, org, {"client_reference": "C-1"}).json()["id"]
    auth = org.key_headers("member")
    line = {
        "custom_id": "req-0",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": LLAMA, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 16},
    }
    uploaded = client.post(
        "/v1/compat/v1/files",
        files={"file": ("input.jsonl", json.dumps(line).encode() + b"\n", "application/jsonl")},
        data={"purpose": "batch"},
        headers=auth,
    )
    assert uploaded.status_code == 200, uploaded.text
    body = {
        "input_file_id": uploaded.json()["id"],
        "endpoint": "/v1/chat/completions",
        "completion_window": "24h",
    }
    # When a vendor-compatible batch names the work order in its metadata
    created = client.post(
        "/v1/compat/v1/batches", json={**body, "metadata": {"work_order_id": wo}}, headers=auth
    )
    assert created.status_code == 200, created.text
    # Then it is a member, and an unknown work order is refused in the vendor's shape
    _run(stack, created.json()["id"])
    done = client.get(f"{PATH}/{wo}", headers=auth).json()
    assert done["status"] == "completed" and done["members"]["total"] == 1 and done["items"]["completed"] == 1
    refused = client.post(
        "/v1/compat/v1/batches", json={**body, "metadata": {"work_order_id": "wo_nope"}}, headers=auth
    )
    assert refused.status_code == 404 and refused.json()["error"]["code"] == "work_order_not_found"


def test_a_repeated_settle_counts_a_member_once(client: TestClient, org: TestOrg, stack: LocalStack) -> None:
    from batchroute.clock import SystemClock
    from batchroute.wiring import Wiring

    wo = _create(client, org, {}).json()["id"]
    batch_id = _batch(client, org, [item(0)], "wo-once-0001", work_order_id=wo).json()["batch"]["id"]
    _run(stack, batch_id)
    first = client.get(f"{PATH}/{wo}", headers=org.key_headers()).json()
    # When Settle runs again for the member (a redelivered message)
    record = BatchRecords(get_settings().table_name("batches")).get(batch_id)
    assert record is not None
    Wiring(get_settings(), SystemClock()).pipeline.settlement.settle(record)
    # Then the work order's totals do not move
    again = client.get(f"{PATH}/{wo}", headers=org.key_headers()).json()
    assert again["members"] == first["members"] and again["items"] == first["items"]
    assert again["cost"] == first["cost"] and again["status"] == "completed"


@contextmanager
def _counting_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """What is read meanwhile: the batch record (`BatchRecords.get`) and work-order items
    (GetItem or Query naming `WORKORDER#`/`WOMEMBER#`, counted with botocore's event hook)."""
    reads: list[str] = []
    real_get = BatchRecords.get

    def counting_get(self: BatchRecords, batch_id: str) -> Any:
        reads.append(f"batch {batch_id}")
        return real_get(self, batch_id)

    def count(params: dict[str, Any], event_name: str, **_: Any) -> None:
        named = json.dumps([params.get("Key"), params.get("ExpressionAttributeValues")])
        if "WORKORDER#" in named or "WOMEMBER#" in named:
            reads.append(f"{event_name.split('.')[-1]} {named}")

    monkeypatch.setattr(BatchRecords, "get", counting_get)
    events = aws_client("dynamodb").meta.events
    names = [f"before-parameter-build.dynamodb.{call}" for call in ("GetItem", "Query")]
    for name in names:
        events.register(name, count)
    try:
        yield reads
    finally:
        for name in names:
            events.unregister(name, count)
        monkeypatch.setattr(BatchRecords, "get", real_get)


def test_settling_a_batch_in_no_work_order_reads_nothing_back(
    client: TestClient, org: TestOrg, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a batch in no work order, read as the Settle step is given it
    batch_id = _batch(client, org, [item(0)], "wo-none-0001").json()["batch"]["id"]
    record = BatchRecords(get_settings().table_name("batches")).get(batch_id)
    assert record is not None and record.work_order is None
    settlement = Wiring(get_settings(), SystemClock()).pipeline.settlement
    # When it settles
    with _counting_reads(monkeypatch) as reads:
        settlement.settle(record)
    # Then Settle read neither the batch back nor any work-order item
    assert reads == []
    settled = BatchRecords(get_settings().table_name("batches")).get(batch_id)
    assert settled is not None and settled.settled_at is not None


def test_a_batch_attached_while_it_settles_is_counted_once(
    client: TestClient, org: TestOrg, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a batch read by Settle before it joined any work order
    wo = _create(client, org, {}).json()["id"]
    batch_id = _batch(client, org, [item(0)], "wo-race-settle-1").json()["batch"]["id"]
    stale = BatchRecords(get_settings().table_name("batches")).get(batch_id)
    assert stale is not None and stale.work_order is None
    # And attached to the work order before Settle writes `settled_at`
    added = client.post(f"{PATH}/{wo}/members", json={"batch_id": batch_id}, headers=org.key_headers())
    assert added.status_code == 200, added.text
    assert added.json()["work_order"]["members"]["in_progress"] == 1
    # When Settle finishes on the record it read, and again (a redelivered message)
    settlement = Wiring(get_settings(), SystemClock()).pipeline.settlement
    settlement.settle(stale)
    once = client.get(f"{PATH}/{wo}", headers=org.key_headers()).json()
    settled = BatchRecords(get_settings().table_name("batches")).get(batch_id)
    assert settled is not None
    settlement.settle(settled)
    # Then the member is counted settled exactly once
    again = client.get(f"{PATH}/{wo}", headers=org.key_headers()).json()
    assert once["members"]["total"] == 1 and once["members"]["in_progress"] == 0
    settled_members = sum(once["members"][k] for k in ("completed", "failed", "canceled", "expired"))
    assert settled_members == 1 and Money.usd(once["cost"]["reserved"]["amount"]) == Money.zero()
    assert once["status"] != "in_progress"
    assert again == once


def test_a_queued_chat_job_joins_by_its_batch_id_as_by_its_job_id(client: TestClient, org: TestOrg) -> None:
    # Given two queued chat jobs, each showing its job id and its batch id
    body = {"model": LLAMA, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8, "batch": True}
    jobs = [
        client.post("/v1/chat/completions", json=body, headers=org.key_headers()).json() for _ in range(2)
    ]
    wo = _create(client, org, {}).json()["id"]
    # When one is attached by its batch id and the other by its job id
    for job, given in zip(
        jobs, ({"batch_id": jobs[0]["batch_id"]}, {"chat_job_id": jobs[1]["id"]}), strict=True
    ):
        added = client.post(f"{PATH}/{wo}/members", json=given, headers=org.key_headers())
        # Then each joins as the chat job it is
        assert added.status_code == 200, added.text
        member = added.json()["member"]
        assert member["kind"] == "chat_job" and member["chat_job_id"] == job["id"]
    # And a job id still names only a chat job
    batch_id = _batch(client, org, [item(0)], "wo-job-ids-1").json()["batch"]["id"]
    job_id = "chatjob_" + batch_id.removeprefix("batch_")
    missing = client.post(f"{PATH}/{wo}/members", json={"chat_job_id": job_id}, headers=org.key_headers())
    assert _error(missing) == (404, "chat_job_not_found", "chat_job_id")


def test_attach_an_existing_batch_running_or_settled_and_close(
    client: TestClient, org: TestOrg, stack: LocalStack
) -> None:
    settled = _batch(client, org, [item(0)], "wo-att-0001").json()["batch"]["id"]
    _run(stack, settled)
    running = _batch(client, org, [item(1), item(2)], "wo-att-0002").json()["batch"]["id"]
    wo = _create(client, org, {"client_reference": "T-9"}).json()["id"]
    # When a settled batch and a running one are attached
    added = client.post(f"{PATH}/{wo}/members", json={"batch_id": settled}, headers=org.key_headers("member"))
    assert added.status_code == 200, added.text
    assert (
        added.json()["member"]["outcome"] == "completed"
        and added.json()["work_order"]["status"] == "completed"
    )
    added = client.post(f"{PATH}/{wo}/members", json={"batch_id": running}, headers=org.key_headers("member"))
    assert added.json()["work_order"]["status"] == "in_progress"
    # Then a batch joins once only
    again = client.post(f"{PATH}/{wo}/members", json={"batch_id": running}, headers=org.key_headers())
    assert _error(again) == (409, "already_in_work_order", "batch_id")
    # And once the running one settles, the work order is completed with both counted
    _run(stack, running)
    done = client.get(f"{PATH}/{wo}", headers=org.key_headers()).json()
    assert done["status"] == "completed" and done["items"]["completed"] == 3
    assert Money.usd(done["cost"]["charged"]["amount"]) == _charged(client, org, settled) + _charged(
        client, org, running
    )
    # When it is closed, nothing joins any more, by create or by attach
    closed = client.patch(
        f"{PATH}/{wo}", json={"closed": True, "name": "done"}, headers=org.key_headers("member")
    )
    assert closed.status_code == 200 and closed.json()["closed"] and closed.json()["name"] == "done"
    late = _batch(client, org, [item(5)], "wo-att-0003", work_order_id=wo)
    assert _error(late) == (409, "work_order_closed", "work_order_id")
    other = _batch(client, org, [item(6)], "wo-att-0004").json()["batch"]["id"]
    refused = client.post(f"{PATH}/{wo}/members", json={"batch_id": other}, headers=org.key_headers())
    assert _error(refused) == (409, "work_order_closed", "work_order_id")
    assert _error(client.patch(f"{PATH}/{wo}", json={"closed": False}, headers=org.key_headers())) == (
        400,
        "invalid_request",
        "closed",
    )


def test_a_work_order_closed_while_a_batch_is_created_refuses_it_and_reserves_nothing(
    client: TestClient, org: TestOrg, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = get_settings()
    wo = _create(client, org, {}).json()["id"]
    store = WorkOrderStore(settings.table_name("controls"), settings.table_name("batches"))
    seen_open = store.get(org.org_id, wo)
    assert seen_open is not None
    # Given the batch's create read the work order open, and it closed right after
    monkeypatch.setattr(WorkOrders, "joining", lambda self, org_id, work_order_id: seen_open)
    assert client.patch(f"{PATH}/{wo}", json={"closed": True}, headers=org.key_headers()).status_code == 200
    # When the create transaction runs, its join condition refuses it
    refused = _batch(client, org, [item(0)], "wo-race-0001", work_order_id=wo)
    # Then the answer is the work order's state, and nothing was written or reserved
    assert _error(refused) == (409, "work_order_closed", "work_order_id")
    assert LedgerStore(settings.table_name("ledger")).state(org.org_id).reserved == Money.zero()
    assert client.get("/v1/batches", headers=org.key_headers()).json()["data"] == []
    assert client.get(f"{PATH}/{wo}", headers=org.key_headers()).json()["members"]["total"] == 0


def test_create_honours_the_idempotency_key(client: TestClient, org: TestOrg) -> None:
    first = _create(client, org, {"name": "a"}, **{"Idempotency-Key": "wo-key-000001"})
    replay = _create(client, org, {"name": "a"}, **{"Idempotency-Key": "wo-key-000001"})
    assert first.status_code == replay.status_code == 201
    assert replay.json()["id"] == first.json()["id"] and replay.headers["Idempotent-Replayed"] == "true"
    conflict = _create(client, org, {"name": "b"}, **{"Idempotency-Key": "wo-key-000001"})
    assert _error(conflict)[:2] == (409, "idempotency_conflict")
    assert _error(_create(client, org, {}, **{"Idempotency-Key": "short"}))[:2] == (
        400,
        "invalid_idempotency_key",
    )
    # the key is optional: a blank header is none (two such creates make two orders)
    blanks = [_create(client, org, {"name": "c"}, **{"Idempotency-Key": ""}) for _ in range(2)]
    assert [b.status_code for b in blanks] == [201, 201] and blanks[0].json()["id"] != blanks[1].json()["id"]


def test_a_key_whose_24_hours_passed_makes_a_new_work_order(org: TestOrg) -> None:
    # Given a work order created under a key, on a movable clock
    settings = get_settings()
    store = WorkOrderStore(settings.table_name("controls"), settings.table_name("batches"))
    clock = FixedClock(datetime(2026, 3, 1, 12, tzinfo=UTC))
    orders = WorkOrders(store=store, batches=BatchRecords(settings.table_name("batches")), clock=clock)
    owner = Principal(org_id=org.org_id, role="owner", via="api_key", key_id="key_test")
    first = orders.create(owner, CreateWorkOrder(request_hash="a", name="a"), "wo-key-reused")
    # When the key comes again with another body a day and a second later (the record is
    # still there: DynamoDB deletes an expired item up to two days late)
    clock.advance(hours=24, seconds=1)
    later = orders.create(owner, CreateWorkOrder(request_hash="b", name="b"), "wo-key-reused")
    # Then it makes a new work order, not 409 idempotency_conflict; the key now replays it
    assert not later.replayed and json.loads(later.body)["id"] != json.loads(first.body)["id"]
    again = orders.create(owner, CreateWorkOrder(request_hash="b", name="b"), "wo-key-reused")
    assert again.replayed and again.body == later.body


def test_listing_filters_by_status_and_reference_with_a_cursor(client: TestClient, org: TestOrg) -> None:
    ids = [_create(client, org, {"client_reference": f"R-{n % 2}"}).json()["id"] for n in range(5)]
    _batch(client, org, [item(0)], "wo-list-0001", work_order_id=ids[0])
    seen: list[str] = []
    cursor = None
    while True:
        query = f"?limit=2&cursor={cursor}" if cursor else "?limit=2"
        page = client.get(f"{PATH}{query}", headers=org.key_headers("billing")).json()
        seen += [o["id"] for o in page["data"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(ids) and len(seen) == 5
    # a page that ends the list says so: no cursor to an empty page
    whole = client.get(f"{PATH}?limit=5", headers=org.key_headers("billing")).json()
    assert len(whole["data"]) == 5 and whole["next_cursor"] is None
    # A name set, then cleared with null; metadata replaced whole
    named = client.patch(
        f"{PATH}/{ids[1]}", json={"name": "x", "metadata": {"a": "1"}}, headers=org.key_headers()
    )
    assert named.json()["name"] == "x" and named.json()["metadata"] == {"a": "1"}
    cleared = client.patch(f"{PATH}/{ids[1]}", json={"name": None, "metadata": {}}, headers=org.key_headers())
    assert cleared.status_code == 200 and cleared.json()["name"] is None and cleared.json()["metadata"] == {}
    refs = client.get(f"{PATH}?client_reference=R-1", headers=org.key_headers()).json()["data"]
    assert sorted(o["id"] for o in refs) == sorted(ids[1::2])
    running = client.get(f"{PATH}?status=in_progress", headers=org.key_headers()).json()["data"]
    assert [o["id"] for o in running] == [ids[0]]
    empty = client.get(f"{PATH}?status=empty", headers=org.key_headers()).json()["data"]
    assert sorted(o["id"] for o in empty) == sorted(ids[1:])
    assert _error(client.get(f"{PATH}?status=done", headers=org.key_headers())) == (
        400,
        "invalid_request",
        "status",
    )
    assert _error(client.get(f"{PATH}?cursor=x", headers=org.key_headers()))[:2] == (400, "invalid_cursor")


# -- refusals ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": ""}, "name"),
        ({"name": "x" * 201}, "name"),
        ({"client_reference": 7}, "client_reference"),
        ({"metadata": {"k": {"nested": 1}}}, "metadata.k"),
        ({"metadata": "x"}, "metadata"),
        ({"status": "completed"}, "status"),
    ],
)
def test_invalid_bodies_name_the_field(
    client: TestClient, org: TestOrg, body: dict[str, Any], field: str
) -> None:
    assert _error(_create(client, org, body)) == (400, "invalid_request", field)


def test_invalid_members_and_batch_work_order_ids_name_the_field(client: TestClient, org: TestOrg) -> None:
    wo = _create(client, org, {}).json()["id"]
    for body, field in (
        ({}, "batch_id"),
        ({"batch_id": "x"}, "batch_id"),
        ({"chat_job_id": "batch_1"}, "chat_job_id"),
        ({"batch_id": "batch_01", "chat_job_id": "chatjob_01"}, "batch_id"),
    ):
        response = client.post(f"{PATH}/{wo}/members", json=body, headers=org.key_headers())
        assert _error(response) == (400, "invalid_request", field), body
    missing = client.post(f"{PATH}/{wo}/members", json={"batch_id": "batch_nope"}, headers=org.key_headers())
    assert _error(missing) == (404, "batch_not_found", "batch_id")
    assert _error(_batch(client, org, [item(0)], "wo-bad-00001", work_order_id=5)) == (
        400,
        "invalid_request",
        "work_order_id",
    )
    assert _error(_batch(client, org, [item(0)], "wo-bad-00002", work_order_id="wo_nope")) == (
        404,
        "work_order_not_found",
        "work_order_id",
    )
    chat = client.post(
        "/v1/chat/completions",
        json={
            "model": "gpt-4o-mini",
            "messages": [{"role": "user", "content": "x"}],
            "batch": {"work_order_id": 1},
        },
        headers=org.key_headers(),
    )
    assert _error(chat)[0] == 400 and _error(chat)[2] == "batch.work_order_id"
    patch = client.patch(f"{PATH}/{wo}", json={"colour": "red"}, headers=org.key_headers())
    assert _error(patch) == (400, "invalid_request", "colour")


def test_another_orgs_work_order_is_not_found_and_its_batches_are_forbidden(
    client: TestClient, org: TestOrg
) -> None:
    wo = _create(client, org, {}).json()["id"]
    other = new_org(credit_usd="1")
    theirs = _batch(client, other, [item(0)], "wo-x-org-0001").json()["batch"]["id"]
    for response in (
        client.get(f"{PATH}/{wo}", headers=other.key_headers()),
        client.patch(f"{PATH}/{wo}", json={"name": "mine"}, headers=other.key_headers()),
        client.post(f"{PATH}/{wo}/members", json={"batch_id": theirs}, headers=other.key_headers()),
        client.get(f"{PATH}/{wo}/members", headers=other.key_headers()),
        _batch(client, other, [item(1)], "wo-x-org-0002", work_order_id=wo),
    ):
        assert response.status_code == 404 and response.json()["error"]["code"] == "work_order_not_found"
    assert client.get(PATH, headers=other.key_headers()).json()["data"] == []
    attach = client.post(f"{PATH}/{wo}/members", json={"batch_id": theirs}, headers=org.key_headers())
    assert attach.status_code == 403 and attach.json()["error"]["code"] == "forbidden"


def test_roles_billing_reads_and_may_not_write(client: TestClient, org: TestOrg) -> None:
    wo = _create(client, org, {}, role="member").json()["id"]
    assert client.get(f"{PATH}/{wo}", headers=org.key_headers("billing")).status_code == 200
    for response in (
        _create(client, org, {}, role="billing"),
        client.patch(f"{PATH}/{wo}", json={"name": "x"}, headers=org.key_headers("billing")),
        client.post(
            f"{PATH}/{wo}/members", json={"batch_id": "batch_01"}, headers=org.key_headers("billing")
        ),
    ):
        assert response.status_code == 403 and response.json()["error"]["code"] == "permission_denied"
    assert client.get(PATH, headers={"Authorization": "Bearer brk_local_nope"}).status_code == 401
