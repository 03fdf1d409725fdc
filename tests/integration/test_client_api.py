"""The Python client against the real FastAPI app in-process (moto): `fastapi.testclient.TestClient`
is an `httpx.Client`, passed as the client's transport. And the client's models checked
against the service's `/openapi.json`, so they cannot drift."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, ClassVar

import pytest
from batchroute_client import AuthenticationError, Client, ConflictError, NotFoundError
from batchroute_client.models import ALL_MODELS
from fastapi.testclient import TestClient

from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.config import get_settings
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from tests.integration.batch_pipeline_support import LLAMA, heartbeat_all_lanes, run_until_done
from tests.integration.principals import TestOrg, new_org
from tests.integration.test_quotes import _item


@pytest.fixture
def http(local_aws: LocalStack) -> TestClient:
    identity_store.cache_clear()
    heartbeat_all_lanes()
    return TestClient(create_app(), raise_server_exceptions=False)


@pytest.fixture
def org(http: TestClient) -> TestOrg:
    return new_org(credit_usd="10")


@pytest.fixture
def sdk(http: TestClient, org: TestOrg) -> Client:
    return Client(api_key=org.api_key(), http_client=http, sleep=lambda _: None)


def _run_to_the_end(stack: LocalStack, batch_id: str) -> None:
    record = BatchRecords(get_settings().table_name("batches")).get(batch_id)
    assert record is not None and record.execution_arn
    assert run_until_done(stack, record.execution_arn)["status"] == "SUCCEEDED"


def test_quote_create_read_list_cancel_through_the_client(
    sdk: Client, org: TestOrg, local_aws: LocalStack
) -> None:
    items = [_item(0), _item(1)]
    quote = sdk.quotes.model(items=items)
    assert quote.quote_id.startswith("qlock_") and quote.item_count == 2
    assert quote.pricing_estimate.total.currency == "usd" and quote.pricing_estimate.total.value > 0
    assert quote.selected_lanes

    batch = sdk.batches.create(quote_id=quote.quote_id, items=items, idempotency_key="client-key-0001")
    assert batch.id.startswith("batch_") and batch.state == "priced" and batch.counts.total == 2
    # A replay with the same key and body is the same batch; another body conflicts
    again = sdk.batches.create(quote_id=quote.quote_id, items=items, idempotency_key="client-key-0001")
    assert again.id == batch.id
    with pytest.raises(ConflictError) as conflict:
        sdk.batches.create(items=[_item(2)], idempotency_key="client-key-0001")
    assert conflict.value.status == 409 and conflict.value.code

    read = sdk.batches.get(batch.id)
    assert (read.id, read.quote_id, read.counts.total) == (batch.id, quote.quote_id, 2)
    assert [b.id for b in sdk.batches.list(page_size=1)] == [batch.id]

    canceled = sdk.batches.cancel(batch.id, reason="changed my mind")
    assert canceled.id == batch.id and canceled.state == "canceled" and canceled.is_terminal
    # Canceled at once, but not settled: its results are not written yet
    assert not canceled.is_settled
    with pytest.raises(ConflictError) as not_ready:
        list(sdk.batches.results(batch.id))
    assert not_ready.value.code == "results_not_ready"
    # Once the workflow has ended its work, wait returns the settled batch and its results
    _run_to_the_end(local_aws, batch.id)
    done = sdk.batches.wait(batch.id, poll_interval=1)
    assert done.state == "canceled" and done.is_settled
    # And its receipt comes in the same answer when asked for (None before, or not asked)
    assert read.billing_receipt is None and done.billing_receipt is None
    billed = sdk.batches.get(batch.id, include_billing_receipt=True)
    receipt = billed.billing_receipt
    assert receipt is not None and receipt.batch_id == batch.id
    assert receipt.credit_reserved.value == receipt.credit_charged.value + receipt.credit_released.value
    assert "lane_statuses" in billed.raw
    assert [(r.status, (r.error or {}).get("code")) for r in sdk.batches.results(batch.id)] == [
        ("failed", "canceled")
    ] * 2

    usage = sdk.usage()
    assert usage.org_id == org.org_id and usage.balance.currency == "usd"
    controls = sdk.billing_controls()
    assert controls.org_id == org.org_id and controls.limit_enabled is False


def test_api_errors_are_typed(sdk: Client, http: TestClient) -> None:
    with pytest.raises(NotFoundError) as missing:
        sdk.batches.get("batch_doesnotexist")
    assert missing.value.status == 404 and missing.value.code
    wrong = Client(api_key="sk-not-a-real-key", http_client=http, sleep=lambda _: None)
    with pytest.raises(AuthenticationError) as denied:
        wrong.usage()
    assert denied.value.status == 401 and "sk-not-a-real-key" not in str(denied.value)


def _schemas(http: TestClient) -> dict[str, Any]:
    document = http.get("/openapi.json").json()
    schemas: dict[str, Any] = document["components"]["schemas"]
    return schemas


def drift(model: type, schemas: dict[str, Any]) -> list[str]:
    """What of `model` the service's schema does not back: unknown fields, and fields the
    client requires that the service may omit."""
    name = model.SCHEMA  # type: ignore[attr-defined]
    if name not in schemas:
        return [f"{model.__name__}: no schema {name}"]
    properties = set(schemas[name].get("properties", {}))
    required = set(schemas[name].get("required", []))
    problems = []
    for field in dataclasses.fields(model):
        if field.metadata.get("client_only"):
            continue
        if field.name not in properties:
            problems.append(f"{model.__name__}.{field.name} is not in {name}")
        no_default = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        if no_default and field.name not in required:
            problems.append(f"{model.__name__}.{field.name} is optional in {name}")
    return problems


@dataclasses.dataclass
class Drifted:
    SCHEMA: ClassVar[str] = "BatchOut"
    id: str
    status: str  # the service's field is `state`
    cancel_reason: str  # the service omits it unless canceled with a reason


def test_every_client_model_field_exists_in_the_service_schema(http: TestClient) -> None:
    schemas = _schemas(http)
    assert {model.__name__: drift(model, schemas) for model in ALL_MODELS} == {
        model.__name__: [] for model in ALL_MODELS
    }
    # And the check does catch a drifted model
    assert drift(Drifted, schemas) == [
        "Drifted.status is not in BatchOut",
        "Drifted.status is optional in BatchOut",
        "Drifted.cancel_reason is optional in BatchOut",
    ]


def test_a_schedule_through_the_client(sdk: Client) -> None:
    # Given an input file, a schedule made, read, listed and changed through the client
    source = sdk.files.create((json.dumps(_item(0)) + "\n").encode(), purpose="batch_input")
    schedule = sdk.schedules.create(
        name="nightly",
        expression="30 2 * * *",
        time_zone="America/New_York",
        input_source={"type": "file", "file_id": source.id},
    )
    assert schedule.id.startswith("sched_") and schedule.is_active and schedule.version == 1
    assert sdk.schedules.get(schedule.id) == schedule
    assert [s.id for s in sdk.schedules.list(page_size=1)] == [schedule.id]
    changed = sdk.schedules.update(schedule.id, expression="rate(6 hours)")
    assert (changed.version, changed.expression) == (2, "rate(6 hours)")
    assert [(v.version, v.expression) for v in sdk.schedules.versions(schedule.id, page_size=1)] == [
        (2, "rate(6 hours)"),
        (1, "30 2 * * *"),
    ]
    # When it is paused and resumed / Then it stops and starts firing again
    paused = sdk.schedules.pause(schedule.id)
    assert not paused.is_active and paused.next_fire_at is None
    assert sdk.schedules.resume(schedule.id).next_fire_at is not None
    assert list(sdk.schedules.runs(schedule.id)) == [] and len(sdk.schedules.benchmarks(schedule.id, 1)) == 0
    # When it is deleted / Then it is gone, and a second delete is a 404
    assert sdk.schedules.delete(schedule.id).deleted is True
    with pytest.raises(NotFoundError) as gone:
        sdk.schedules.get(schedule.id)
    assert gone.value.code == "schedule_not_found"
    with pytest.raises(NotFoundError):
        sdk.schedules.delete(schedule.id)


def test_a_work_order_and_the_route_policy_through_the_client(sdk: Client) -> None:
    # Given a work order made through the client (its create replayed by its key), and a batch
    fields = {"name": "Q3 invoices", "client_reference": "PO-4711", "idempotency_key": "work-order-0001"}
    order = sdk.work_orders.create(**fields)
    assert sdk.work_orders.create(**fields) == order
    assert (order.status, order.members.total, order.closed) == ("empty", 0, False)
    batch = sdk.batches.create(items=[_item(0)], idempotency_key="wo-batch-0001")
    # When the batch is attached and the work order closed
    added = sdk.work_orders.add_member(order.id, batch_id=batch.id)
    closed = sdk.work_orders.update(order.id, closed=True)
    # Then both read back through the client
    assert added.member.batch_id == batch.id and added.work_order.members.total == 1
    assert [m.batch_id for m in sdk.work_orders.members(order.id)] == [batch.id]
    assert closed.closed and sdk.work_orders.get(order.id).closed_at == closed.closed_at
    assert [w.id for w in sdk.work_orders.list(client_reference="PO-4711")] == [order.id]
    with pytest.raises(ConflictError) as again:
        sdk.work_orders.add_member(order.id, batch_id=batch.id)
    assert again.value.code in ("already_in_work_order", "work_order_closed")
    # And the route policy is read, saved at its version, refused at a stale one, and logged
    policy = sdk.routing.policy()
    assert policy.version == 0 and not policy.configured
    saved = sdk.routing.update_policy(version=policy.version, provider_deny=["edge-eu"])
    assert saved.configured and saved.version == 1 and saved.provider_deny == ["edge-eu"]
    with pytest.raises(ConflictError) as stale:
        sdk.routing.update_policy(version=0, provider_deny=[])
    assert stale.value.code == "policy_version_mismatch"
    assert [c.version for c in sdk.routing.policy_history()] == [1]


def test_feedback_on_a_finished_item_through_the_client(sdk: Client, local_aws: LocalStack) -> None:
    # Given a batch run to its end
    batch = sdk.batches.create(items=[_item(0)], idempotency_key="feedback-batch-0001")
    _run_to_the_end(local_aws, batch.id)
    (row,) = sdk.batches.results(batch.id)
    # When its item is rated through the client, and rated again
    first = sdk.feedback.send(rating=-1, batch_id=batch.id, customer_item_id=row.customer_item_id)
    again = sdk.feedback.send(
        rating=1, batch_id=batch.id, customer_item_id=row.customer_item_id, labels=["concise"]
    )
    # Then the second replaced the first, and the listing and the month's summary count one
    assert again.id == first.id and (again.rating, again.labels) == (1, ["concise"])
    assert [f.id for f in sdk.feedback.list(batch_id=batch.id)] == [first.id]
    summary = sdk.feedback.summary()
    assert summary.period == "monthly" and summary.total.count == 1 and summary.total.thumbs.up == 1
    assert [(m.model, m.count) for m in summary.by_model_provider] == [(again.model, 1)]
    # And the org's billing events read through the client (none: no alert was armed)
    assert list(sdk.billing.events()) == []


def test_a_preset_through_the_client(sdk: Client) -> None:
    # Given a preset made through the client, then changed twice
    preset = sdk.presets.create(
        name="summarize", model=LLAMA, operation="responses", parameters={"max_output_tokens": 64}
    )
    assert (preset.ref, preset.parameters.max_output_tokens) == ("summarize@1", 64)
    updated = sdk.presets.update("summarize", system_prompt="Answer in one line.")
    replaced = sdk.presets.replace("summarize", model=LLAMA, operation="responses")
    assert (updated.version, replaced.version) == (2, 3) and replaced.system_prompt is None
    # Then each version reads back, and an item may name one
    assert [v.version for v in sdk.presets.versions("summarize", page_size=2)] == [3, 2, 1]
    assert sdk.presets.version("summarize", 2).system_prompt == "Answer in one line."
    quote = sdk.quotes.model(items=[{**_item(0), "preset": "summarize@2"}])
    assert quote.item_count == 1
    # When it is archived / Then it lists only with the archived ones, and a second archive is a 409
    archived = sdk.presets.archive("summarize")
    assert (
        archived.archived_at is not None and sdk.presets.get("summarize").archived_at == archived.archived_at
    )
    assert [p.name for p in sdk.presets.list()] == []
    assert [p.name for p in sdk.presets.list(include_archived=True)] == ["summarize"]
    with pytest.raises(ConflictError) as again:
        sdk.presets.archive("summarize")
    assert again.value.code == "preset_archived"
    assert len(sdk.presets.benchmarks("summarize", 1)) == 0
