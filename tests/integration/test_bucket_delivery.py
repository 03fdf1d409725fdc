"""Bucket delivery on moto, into a customer's bucket on a second S3 endpoint (another moto
server, its own process and credentials; tests/integration/customer_bucket.py):

- a batch run through the whole workflow with the real handlers lands its result, error and
  receipt artifacts in the customer's bucket, and its detailed view says `delivered`;
- a failing delivery is retried on its schedule (an injected clock, no sleeping) through the
  deliver queue, stops when the schedule is spent, and recovers an attempt whose worker died;
- redeliver: 202 and a new round after a failure, 409 when delivered, delivering, queued,
  not finished or without a target; large artifacts go up in multipart parts.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from batchroute_client import BucketDelivery as BucketDeliveryModel
from batchroute_client import Client, ConflictError
from fastapi.testclient import TestClient

from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.adapters.dynamo.codec import to_item
from batchroute.clock import FixedClock, isoformat
from batchroute.config import Settings, get_settings
from batchroute.domain.batches.record import BatchRecord
from batchroute.domain.chat.objects import DIRECT_SOURCE
from batchroute.domain.delivery.buckets import (
    MAX_ATTEMPTS,
    RETRY_DELAYS_SECONDS,
    DeliveryRecord,
    TargetDelivery,
)
from batchroute.errors import Conflict
from batchroute.services.delivery.buckets import STEP, BucketDelivery
from batchroute.services.delivery.targets import DeliveryTargets
from batchroute.wiring import Wiring
from batchroute.workflow.tasks import WorkflowTask
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from functions.api.deps import get_clock
from functions.api.schemas.delivery.targets import DeliveryTargetCreate, DeliveryTargetUpdate
from tests.integration.batch_pipeline_support import (
    create_batch,
    heartbeat_all_lanes,
    item,
    pollers,
    run_workflow,
)
from tests.integration.customer_bucket import BUCKET, CustomerS3
from tests.integration.principals import TestOrg, new_org

START = datetime(2026, 5, 4, 8, 0, tzinfo=UTC)
RESULTS = b'{"seq":0,"customer_item_id":"a","status":"completed"}\n'
ERRORS = b'{"seq":1,"customer_item_id":"b","error":"boom"}\n'
RECEIPT = b'{"object":"billing_receipt","credit_charged":{"currency":"usd","amount":"0.01"}}'
WORKFLOW_STEPS = ("intake", "route", "run_lane", "finalize", "settle", "deliver")


@pytest.fixture(scope="module")
def customer() -> Iterator[CustomerS3]:
    with CustomerS3.start() as server:
        yield server


@pytest.fixture
def settings(local_aws: LocalStack, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    for name, value in {
        "ALLOW_LOOPBACK_WEBHOOKS": "1",  # the customer's endpoint is http://127.0.0.1:<port>
        "SIMULATED_LATENCY_MS": "0",
        "SIMULATED_BATCH_POLL_SECONDS": "0",
        "PROVIDER_RETRY_BASE_SECONDS": "0",
    }.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    identity_store.cache_clear()
    yield get_settings()
    get_settings.cache_clear()


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(START)


@pytest.fixture
def wiring(settings: Settings, clock: FixedClock) -> Wiring:
    return Wiring(settings, clock)


@pytest.fixture
def org(settings: Settings) -> TestOrg:
    return new_org(credit_usd="10")


def register(targets: DeliveryTargets, org: TestOrg, customer: CustomerS3, **changes: Any) -> str:
    body = customer.target_body(**{"prefix": f"deliveries/{org.org_id}", **changes})
    return targets.create(org.org_id, DeliveryTargetCreate.model_validate(body).command()).target_id


def finished_batch(
    org_id: str,
    batch_id: str,
    *,
    results: bytes = RESULTS,
    state: str = "completed",
    steps: tuple[str, ...] = WORKFLOW_STEPS,
    source: str = "api",
) -> BatchRecord:
    """A batch as Finalize and Settle leave it, its workflow at `steps` (by default at its
    Deliver step): its three artifacts in our bucket."""
    settings = get_settings()
    s3 = boto3.client("s3")
    keys = {
        "results_key": f"batches/{batch_id}/results.jsonl",
        "errors_key": f"batches/{batch_id}/errors.jsonl",
        "receipt_key": f"batches/{batch_id}/receipt.json",
    }
    for key, body in zip(keys.values(), (results, ERRORS, RECEIPT), strict=True):
        s3.put_object(Bucket=settings.buckets["artifacts"], Key=key, Body=body)
    record = {
        "pk": f"BATCH#{batch_id}",
        "sk": "META",
        "batch_id": batch_id,
        "org_id": org_id,
        "state": state,
        "source": source,
        "created_at": "2026-05-04T07:00:00.000Z",
        "deadline_at": "2026-05-05T07:00:00.000Z",
        "counts": {"total": 2, "pending": 0, "running": 0, "completed": 1, "failed": 1, "canceled": 0},
        "artifacts": {**keys, "result_count": 1, "error_count": 1},
        "workflow_steps": dict.fromkeys(steps, "2026-05-04T07:30:00.000Z"),
        "gsi1pk": f"ORG#{org_id}",
        "gsi1sk": f"BATCH#{batch_id}",
    }
    boto3.client("dynamodb").put_item(TableName=settings.table_name("batches"), Item=to_item(record))
    batch = BatchRecords(settings.table_name("batches")).get(batch_id)
    assert batch is not None
    return batch


def delivered_objects(customer: CustomerS3, org: TestOrg, batch_id: str) -> dict[str, bytes]:
    prefix = f"deliveries/{org.org_id}/{batch_id}/"
    return {k.removeprefix(prefix): v for k, v in customer.objects().items() if k.startswith(prefix)}


def queued_messages(stack: LocalStack) -> list[dict[str, Any]]:
    sqs = boto3.client("sqs", region_name=stack.region)
    received = sqs.receive_message(QueueUrl=stack.queue_urls["deliver"], MaxNumberOfMessages=10)
    messages = received.get("Messages", [])
    for message in messages:
        sqs.delete_message(QueueUrl=stack.queue_urls["deliver"], ReceiptHandle=message["ReceiptHandle"])
    return [json.loads(m["Body"]) for m in messages]


def _at(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", "+00:00"))


# -- the whole workflow ---------------------------------------------------------------------
def test_a_finished_batch_lands_in_the_customers_bucket(
    settings: Settings, local_aws: LocalStack, org: TestOrg, customer: CustomerS3
) -> None:
    # Given an org with a delivery target registered through the API
    client = TestClient(create_app(), raise_server_exceptions=False)
    body = customer.target_body(prefix=f"deliveries/{org.org_id}")
    target = client.post("/v1/delivery-targets", json=body, headers=org.key_headers())
    assert target.status_code == 201, target.text
    heartbeat_all_lanes()
    batch = create_batch(org.org_id, [item(0), item(1, text="[simulate:fail] please"), item(2)])
    # Before it ends, its detailed view says the delivery is pending to that target
    view = client.get(f"/v1/batches/{batch.batch_id}?include_details=true", headers=org.key_headers()).json()
    pending = view["batch"]["details"]["delivery"]
    assert pending["state"] == "pending" and [t["target_id"] for t in pending["targets"]] == [
        target.json()["id"]
    ]
    # When the workflow runs to its end with the real handlers
    assert run_workflow(local_aws, batch.batch_id)["status"] == "SUCCEEDED"
    # Then the three artifacts are in the customer's bucket, byte for byte ours
    ours = boto3.client("s3")
    artifacts = settings.buckets["artifacts"]

    def our(name: str) -> bytes:
        return bytes(ours.get_object(Bucket=artifacts, Key=f"batches/{batch.batch_id}/{name}")["Body"].read())

    landed = delivered_objects(customer, org, batch.batch_id)
    assert set(landed) == {"results.jsonl", "errors.jsonl", "receipt.json"}
    for name in landed:
        assert landed[name] == our(name), name
    results = [json.loads(line) for line in landed["results.jsonl"].splitlines()]
    assert [r["customer_item_id"] for r in results] == ["item-0", "item-1", "item-2"]
    assert json.loads(landed["receipt.json"])["credit_charged"]["amount"]
    assert (
        customer.content_type(f"deliveries/{org.org_id}/{batch.batch_id}/results.jsonl")
        == "application/jsonl"
    )
    # And the detailed view says delivered, with the keys written
    view = client.get(f"/v1/batches/{batch.batch_id}?include_details=true", headers=org.key_headers()).json()
    delivery = view["batch"]["details"]["delivery"]
    assert (delivery["state"], delivery["attempts"], delivery["last_error"]) == ("delivered", 1, None)
    assert delivery["delivered_at"] and delivery["next_attempt_at"] is None
    (share,) = delivery["targets"]
    assert share["state"] == "delivered" and share["bucket"] == BUCKET
    assert share["objects"] == [
        f"deliveries/{org.org_id}/{batch.batch_id}/results.jsonl",
        f"deliveries/{org.org_id}/{batch.batch_id}/errors.jsonl",
        f"deliveries/{org.org_id}/{batch.batch_id}/receipt.json",
    ]
    assert share["bytes_delivered"] == sum(len(v) for v in landed.values())
    # And redelivering a delivered batch is a 409
    again = client.post(f"/v1/batches/{batch.batch_id}/redeliver", headers=org.key_headers())
    assert again.status_code == 409 and again.json()["error"]["code"] == "already_delivered"


def test_a_failed_delivery_is_redelivered_through_the_deliver_queue(
    settings: Settings, local_aws: LocalStack, org: TestOrg, customer: CustomerS3
) -> None:
    client = TestClient(create_app(), raise_server_exceptions=False)
    headers = org.key_headers()
    # Given a target whose bucket does not exist
    body = customer.target_body(prefix=f"deliveries/{org.org_id}", bucket="missing-bucket")
    target_id = client.post("/v1/delivery-targets", json=body, headers=headers).json()["id"]
    heartbeat_all_lanes()
    batch = create_batch(org.org_id, [item(0)])
    assert run_workflow(local_aws, batch.batch_id)["status"] == "SUCCEEDED"
    # Then the delivery failed with the bucket's error, and a retry is scheduled
    detail = client.get(f"/v1/batches/{batch.batch_id}?include_details=true", headers=headers).json()
    delivery = detail["batch"]["details"]["delivery"]
    assert delivery["state"] == "failed" and delivery["attempts"] == 1
    assert (
        delivery["last_error"]["code"] == "NoSuchBucket" and delivery["last_error"]["target_id"] == target_id
    )
    assert delivery["next_attempt_at"] is not None and delivery["targets"][0]["state"] == "failed"
    assert delivered_objects(customer, org, batch.batch_id) == {}
    # When the customer fixes the bucket and asks for a redelivery
    fixed = client.patch(f"/v1/delivery-targets/{target_id}", json={"bucket": BUCKET}, headers=headers)
    assert fixed.status_code == 200
    response = client.post(f"/v1/batches/{batch.batch_id}/redeliver", headers=headers)
    # Then 202: queued, a new round
    assert response.status_code == 202, response.text
    queued = response.json()
    assert queued["batch_id"] == batch.batch_id and queued["delivery"]["state"] == "pending"
    assert queued["delivery"]["redeliveries"] == 1 and queued["delivery"]["max_attempts"] == 1 + MAX_ATTEMPTS
    # And a second request while it is queued is a 409
    twice = client.post(f"/v1/batches/{batch.batch_id}/redeliver", headers=headers)
    assert twice.status_code == 409
    assert twice.json()["error"]["code"] == "delivery_in_progress"
    assert twice.json()["error"]["details"] == {"delivery_state": "pending"}
    # When the deliver worker takes the message (the real handler, as the event source would)
    (deliver,) = [p for p in pollers(local_aws) if p.queue.key == "deliver"]
    assert deliver.poll_once().received == 1
    # Then the artifacts are in the bucket and the delivery says so
    assert set(delivered_objects(customer, org, batch.batch_id)) == {
        "results.jsonl",
        "errors.jsonl",
        "receipt.json",
    }
    detail = client.get(f"/v1/batches/{batch.batch_id}?include_details=true", headers=headers).json()
    delivery = detail["batch"]["details"]["delivery"]
    assert (delivery["state"], delivery["attempts"], delivery["last_error"]) == ("delivered", 2, None)
    assert client.post(f"/v1/batches/{batch.batch_id}/redeliver", headers=headers).status_code == 409


# -- retries with an injected clock ------------------------------------------------------
def test_a_failed_delivery_is_retried_on_its_schedule_via_the_deliver_queue(
    wiring: Wiring, clock: FixedClock, local_aws: LocalStack, org: TestOrg, customer: CustomerS3
) -> None:
    service = wiring.bucket_delivery
    target_id = register(wiring.delivery_targets, org, customer, secret_access_key="wrong-secret-0123456789")
    batch = finished_batch(org.org_id, "batch_retry")
    # The Deliver step's attempt fails with the bucket's refusal
    first = service.deliver_batch(batch)
    assert first is not None and (first.state, first.attempts) == ("failed", 1)
    assert first.last_error is not None and first.last_error.code == "SignatureDoesNotMatch"
    assert first.next_attempt_at == isoformat(START + timedelta(seconds=RETRY_DELAYS_SECONDS[0]))
    # A moment before it is due, the sweeper queues nothing
    clock._now = _at(first.next_attempt_at) - timedelta(milliseconds=1)
    assert service.enqueue_due().queued == [] and queued_messages(local_aws) == []
    # When it is due, the sweeper queues one deliver_bucket message, once
    clock._now = _at(first.next_attempt_at)
    assert service.enqueue_due().queued == ["batch_retry"]
    assert service.enqueue_due().queued == []
    assert queued_messages(local_aws) == [{"step": STEP, "batch_id": "batch_retry", "task_token": ""}]
    # The customer rotates the key; the worker's attempt (the message) now delivers
    wiring.delivery_targets.update(
        org.org_id,
        target_id,
        DeliveryTargetUpdate.model_validate(
            {"access_key_id": customer.access_key_id, "secret_access_key": customer.secret_access_key}
        ).command(),
    )
    workflow = wiring.workflow
    step = getattr(workflow, STEP)  # as the deliver worker resolves it (wiring.workflow_steps)
    assert step(_task("batch_retry")) is None  # no task token: no answer
    done = wiring.bucket_deliveries.get("batch_retry")
    assert done is not None and (done.state, done.attempts, done.next_attempt_at) == ("delivered", 2, None)
    assert delivered_objects(customer, org, "batch_retry") == {
        "results.jsonl": RESULTS,
        "errors.jsonl": ERRORS,
        "receipt.json": RECEIPT,
    }
    # Delivered deliveries leave the due index
    clock.advance(days=2)
    assert service.enqueue_due().queued == []


def _task(batch_id: str) -> WorkflowTask:
    return WorkflowTask(step=STEP, batch_id=batch_id, task_token="")


def test_the_schedule_ends_and_redeliver_starts_a_new_round(
    wiring: Wiring, clock: FixedClock, local_aws: LocalStack, org: TestOrg, customer: CustomerS3
) -> None:
    service = _inline(wiring)  # no queue: the sweeper makes due attempts itself
    target_id = register(wiring.delivery_targets, org, customer, bucket="missing-bucket")
    batch = finished_batch(org.org_id, "batch_spent")
    record = service.deliver_batch(batch)
    attempts_at = [clock.now()]
    # Each retry at its scheduled time: 1 min, 5 min, 30 min, 2 h, 6 h, 12 h
    while record is not None and record.next_attempt_at is not None:
        clock._now = _at(record.next_attempt_at)
        attempts_at.append(clock.now())
        assert service.enqueue_due().attempted == ["batch_spent"]
        record = wiring.bucket_deliveries.get("batch_spent")
    assert record is not None
    gaps = [int((b - a).total_seconds()) for a, b in itertools.pairwise(attempts_at)]
    assert gaps == list(RETRY_DELAYS_SECONDS)
    assert (record.state, record.attempts, record.next_attempt_at) == ("failed", MAX_ATTEMPTS, None)
    # Spent: nothing more is owed
    clock.advance(days=3)
    assert service.enqueue_due().attempted == []
    # A redeliver starts a new round with a full schedule; the fixed target is delivered
    wiring.delivery_targets.update(
        org.org_id, target_id, DeliveryTargetUpdate.model_validate({"bucket": BUCKET}).command()
    )
    fresh = service.redeliver(batch)
    assert (fresh.state, fresh.round_start, fresh.redeliveries) == ("pending", MAX_ATTEMPTS, 1)
    assert fresh.to_api()["max_attempts"] == 2 * MAX_ATTEMPTS
    assert service.enqueue_due().attempted == ["batch_spent"]
    done = wiring.bucket_deliveries.get("batch_spent")
    assert done is not None and (done.state, done.attempts) == ("delivered", MAX_ATTEMPTS + 1)


def _inline(wiring: Wiring) -> BucketDelivery:
    return BucketDelivery(
        wiring.bucket_deliveries,
        wiring.delivery_targets,
        wiring.batch_records,
        wiring.bucket_delivery.artifacts,
        wiring.clock,
    )


def pending_delivery(
    wiring: Wiring, org: TestOrg, customer: CustomerS3, batch_id: str, at: str
) -> DeliveryRecord:
    """A finished batch of `org` whose delivery to the customer's bucket is pending, due `at`."""
    register(wiring.delivery_targets, org, customer)
    finished_batch(org.org_id, batch_id)
    target = wiring.delivery_targets.enabled(org.org_id)[0]
    pending = DeliveryRecord(
        batch_id=batch_id,
        org_id=org.org_id,
        state="pending",
        targets=(TargetDelivery(target.target_id, target.name, target.bucket, target.prefix),),
        created_at=at,
        updated_at=at,
        next_attempt_at=at,
    )
    assert wiring.bucket_deliveries.start_round(pending, replacing=None)
    return pending


def test_an_attempt_whose_worker_died_is_recovered_after_its_lease(
    wiring: Wiring, clock: FixedClock, local_aws: LocalStack, org: TestOrg, customer: CustomerS3
) -> None:
    service = _inline(wiring)
    # Given a delivery whose first attempt was claimed by a worker that then died
    records = wiring.bucket_deliveries
    at = isoformat(clock.now())
    pending_delivery(wiring, org, customer, "batch_lease", at)
    lease_until = isoformat(clock.now() + timedelta(seconds=service.lease_seconds))
    assert records.claim("batch_lease", attempt=1, now_iso=at, lease_until_iso=lease_until)
    # While the lease runs, the sweeper leaves it alone and redeliver says it is running
    clock.advance(seconds=service.lease_seconds - 1)
    assert service.enqueue_due().recovered == []
    with pytest.raises(Conflict) as refused:
        service.redeliver(wiring.batch_records.get("batch_lease"))  # type: ignore[arg-type]
    assert refused.value.code == "delivery_in_progress"
    # When the lease has run out, the attempt is recorded as interrupted and rescheduled
    clock.advance(seconds=2)
    report = service.enqueue_due()
    assert report.recovered == ["batch_lease"]
    record = records.get("batch_lease")
    assert record is not None and record.state == "failed" and record.attempts == 1
    assert record.last_error is not None and record.last_error.code == "interrupted"
    # And the retry delivers
    assert record.next_attempt_at is not None
    clock._now = _at(record.next_attempt_at)
    assert service.enqueue_due().attempted == ["batch_lease"]
    done = records.get("batch_lease")
    assert done is not None and (done.state, done.attempts) == ("delivered", 2)


def test_a_large_result_goes_up_in_multipart_parts(
    wiring: Wiring, local_aws: LocalStack, org: TestOrg, customer: CustomerS3
) -> None:
    register(wiring.delivery_targets, org, customer)
    line = b'{"seq":0,"customer_item_id":"x","output":"' + b"y" * 1000 + b'"}\n'
    big = line * (9 * 1024 * 1024 // len(line) + 1)  # just over 9 MiB: two 8 MiB parts
    batch = finished_batch(org.org_id, "batch_large", results=big)
    delivered = wiring.bucket_delivery.deliver_batch(batch)
    assert delivered is not None and delivered.state == "delivered"
    key = f"deliveries/{org.org_id}/batch_large/results.jsonl"
    head = customer.client().head_object(Bucket=BUCKET, Key=key)
    assert head["ContentLength"] == len(big) and head["ETag"].strip('"').endswith("-2")
    assert delivered_objects(customer, org, "batch_large")["results.jsonl"] == big


def test_only_enabled_targets_receive_and_each_records_its_own_outcome(
    wiring: Wiring, local_aws: LocalStack, org: TestOrg, customer: CustomerS3
) -> None:
    targets = wiring.delivery_targets
    good = register(targets, org, customer, name="good")
    bad = register(targets, org, customer, name="bad", bucket="missing-bucket")
    paused = register(targets, org, customer, name="paused", prefix="paused", enabled=False)
    batch = finished_batch(org.org_id, "batch_two")
    record = wiring.bucket_delivery.deliver_batch(batch)
    assert record is not None and record.state == "failed"
    shares = {t.target_id: t for t in record.targets}
    assert set(shares) == {good, bad} and paused not in shares
    assert shares[good].state == "delivered" and shares[bad].state == "failed"
    assert not [k for k in customer.objects() if k.startswith("paused/")]
    # The retry pushes only to the target still owed
    clock = wiring.clock
    assert isinstance(clock, FixedClock) and record.next_attempt_at is not None
    second = {"bucket": BUCKET, "prefix": f"deliveries/{org.org_id}/second"}
    targets.update(org.org_id, bad, DeliveryTargetUpdate.model_validate(second).command())
    clock._now = _at(record.next_attempt_at)
    again = wiring.bucket_delivery.run_due("batch_two")
    assert again is not None and again.state == "delivered"
    after = {t.target_id: t for t in again.targets}
    assert after[good].delivered_at == shares[good].delivered_at  # not pushed twice
    assert after[bad].objects[0].startswith(f"deliveries/{org.org_id}/second/batch_two/")


# -- redeliver's refusals -------------------------------------------------------------------
@pytest.fixture
def api(settings: Settings, clock: FixedClock) -> TestClient:
    app = create_app(settings)
    app.dependency_overrides[get_clock] = lambda: clock
    return TestClient(app, raise_server_exceptions=False)


def test_redeliver_refuses_a_batch_that_has_not_finished(
    api: TestClient, wiring: Wiring, org: TestOrg, customer: CustomerS3
) -> None:
    register(wiring.delivery_targets, org, customer)
    finished_batch(org.org_id, "batch_running", state="running")
    response = api.post("/v1/batches/batch_running/redeliver", headers=org.key_headers())
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "batch_not_finished"
    assert response.json()["error"]["details"] == {"state": "running"}


def test_redeliver_waits_for_a_cancelled_batch_s_artifacts_then_delivers_them(
    settings: Settings, local_aws: LocalStack, org: TestOrg, customer: CustomerS3
) -> None:
    # Given a batch cancelled before its workflow ran: terminal at once, no artifacts yet
    client = TestClient(create_app(), raise_server_exceptions=False)
    headers = org.key_headers()
    body = customer.target_body(prefix=f"deliveries/{org.org_id}")
    assert client.post("/v1/delivery-targets", json=body, headers=headers).status_code == 201
    heartbeat_all_lanes()
    batch = create_batch(org.org_id, [item(0), item(1)])
    assert client.post(f"/v1/batches/{batch.batch_id}/cancel", headers=headers).json()["batch"]["state"] == (
        "canceled"
    )
    # When the customer asks for a redelivery before Finalize wrote the artifacts: 409, and
    # nothing is queued (an attempt now would record `delivered` with no objects)
    early = client.post(f"/v1/batches/{batch.batch_id}/redeliver", headers=headers)
    assert early.status_code == 409, early.text
    assert early.json()["error"] == {
        "code": "batch_not_finished",
        "message": early.json()["error"]["message"],
        "details": {"state": "canceled"},
    }
    assert queued_messages(local_aws) == []
    # Then the workflow's own Deliver step lands every artifact in the customer's bucket
    assert run_workflow(local_aws, batch.batch_id)["status"] == "SUCCEEDED"
    assert set(delivered_objects(customer, org, batch.batch_id)) == {
        "results.jsonl",
        "errors.jsonl",
        "receipt.json",
    }
    view = client.get(f"/v1/batches/{batch.batch_id}?include_details=true", headers=headers).json()
    assert view["batch"]["details"]["delivery"]["state"] == "delivered"


def test_an_attempt_without_artifacts_fails_rather_than_delivering_nothing(
    wiring: Wiring, org: TestOrg, customer: CustomerS3
) -> None:
    # Given a failed batch whose Finalize could not write its artifacts (docs: the fail path
    # goes on to Deliver all the same)
    register(wiring.delivery_targets, org, customer)
    batch = replace(finished_batch(org.org_id, "batch_no_artifacts", state="failed"), artifacts=None)
    # When its delivery is attempted: a failure with its reason, never `delivered` with no objects
    record = _inline(wiring).deliver_batch(batch)
    assert record is not None and record.state == "failed" and record.last_error is not None
    assert record.last_error.code == "artifacts_missing"
    assert delivered_objects(customer, org, "batch_no_artifacts") == {}


def test_a_direct_chat_request_has_no_delivery(
    api: TestClient, wiring: Wiring, local_aws: LocalStack, org: TestOrg, customer: CustomerS3
) -> None:
    # Given an org with a target, and a direct chat request's record (its answer was the response)
    register(wiring.delivery_targets, org, customer)
    finished_batch(org.org_id, "batch_direct", steps=(), source=DIRECT_SOURCE)
    # Then its detailed view shows no delivery coming, and a redelivery is refused by name
    view = api.get("/v1/batches/batch_direct?include_details=true", headers=org.key_headers()).json()
    assert view["batch"]["details"]["delivery"] is None
    response = api.post("/v1/batches/batch_direct/redeliver", headers=org.key_headers())
    assert response.status_code == 409 and response.json()["error"]["code"] == "nothing_to_deliver"
    assert queued_messages(local_aws) == []


def test_redeliver_needs_an_enabled_target(
    api: TestClient, wiring: Wiring, org: TestOrg, customer: CustomerS3
) -> None:
    finished_batch(org.org_id, "batch_no_target")
    response = api.post("/v1/batches/batch_no_target/redeliver", headers=org.key_headers())
    assert response.status_code == 409 and response.json()["error"]["code"] == "no_delivery_target"
    # A disabled target does not count
    register(wiring.delivery_targets, org, customer, enabled=False)
    response = api.post("/v1/batches/batch_no_target/redeliver", headers=org.key_headers())
    assert response.status_code == 409 and response.json()["error"]["code"] == "no_delivery_target"
    # Without a target, the detailed view shows no delivery
    view = api.get("/v1/batches/batch_no_target?include_details=true", headers=org.key_headers()).json()
    assert view["batch"]["details"]["delivery"] is None


def test_redeliver_of_a_batch_that_never_had_a_delivery_queues_one(
    api: TestClient, wiring: Wiring, local_aws: LocalStack, org: TestOrg, customer: CustomerS3
) -> None:
    # A batch that finished before the org registered its target
    finished_batch(org.org_id, "batch_before")
    register(wiring.delivery_targets, org, customer)
    response = api.post("/v1/batches/batch_before/redeliver", headers=org.key_headers())
    assert response.status_code == 202, response.text
    assert response.json()["delivery"]["state"] == "pending"
    assert queued_messages(local_aws) == [{"step": STEP, "batch_id": "batch_before", "task_token": ""}]


def test_redeliver_of_an_unknown_or_foreign_batch(api: TestClient, org: TestOrg) -> None:
    missing = api.post("/v1/batches/batch_nope/redeliver", headers=org.key_headers())
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "batch_not_found"
    finished_batch(org.org_id, "batch_theirs")
    stranger = new_org()
    foreign = api.post("/v1/batches/batch_theirs/redeliver", headers=stranger.key_headers())
    assert foreign.status_code == 403  # another org's batch: forbidden, as every batch route answers
    member = api.post("/v1/batches/batch_theirs/redeliver", headers=org.key_headers("billing"))
    assert member.status_code == 403 and member.json()["error"]["code"] == "permission_denied"


def test_a_failing_delivery_logs_the_code_never_the_secret(
    wiring: Wiring,
    local_aws: LocalStack,
    org: TestOrg,
    customer: CustomerS3,
    caplog: pytest.LogCaptureFixture,
) -> None:
    wrong = "wrong-secret-never-logged-42"
    register(wiring.delivery_targets, org, customer, secret_access_key=wrong)
    record = wiring.bucket_delivery.deliver_batch(finished_batch(org.org_id, "batch_logs"))
    assert record is not None and record.last_error is not None
    assert record.last_error.code == "SignatureDoesNotMatch" and wrong not in record.last_error.message
    logged = "\n".join(repr(vars(record)) for record in caplog.records)
    assert "bucket delivery attempt recorded" in logged and "SignatureDoesNotMatch" in logged
    assert wrong not in logged and customer.secret_access_key not in logged


def test_a_batch_whose_bytes_retention_reclaimed_is_not_redelivered(
    api: TestClient, wiring: Wiring, local_aws: LocalStack, org: TestOrg, customer: CustomerS3
) -> None:
    # Given a finished batch whose result bytes retention reclaimed (docs/retention.md)
    finished_batch(org.org_id, "batch_reclaimed")
    register(wiring.delivery_targets, org, customer)
    assert wiring.batch_records.mark_reclaimed("batch_reclaimed", at="2026-05-09T07:00:00.000Z")
    # When it is redelivered: 410, as its results answer, and nothing is queued
    response = api.post("/v1/batches/batch_reclaimed/redeliver", headers=org.key_headers())
    assert response.status_code == 410, response.text
    assert response.json()["error"]["code"] == "results_expired"
    assert queued_messages(local_aws) == []
    # And a delivery attempt that finds the bytes gone fails with that reason, writing nothing
    batch = wiring.batch_records.get("batch_reclaimed")
    assert batch is not None
    record = _inline(wiring).deliver_batch(batch)
    assert record is not None and record.last_error is not None
    assert record.last_error.code == "results_expired"
    assert delivered_objects(customer, org, "batch_reclaimed") == {}


def test_a_redeliver_that_read_an_older_attempt_does_not_write_its_count_back(
    wiring: Wiring, clock: FixedClock, local_aws: LocalStack, org: TestOrg, customer: CustomerS3
) -> None:
    service = _inline(wiring)
    records = wiring.bucket_deliveries
    at = isoformat(clock.now())
    pending = pending_delivery(wiring, org, customer, "batch_stale", at)
    lease_until = isoformat(clock.now() + timedelta(seconds=service.lease_seconds))

    def fail_attempt(attempt: int) -> None:
        assert records.claim("batch_stale", attempt=attempt, now_iso=at, lease_until_iso=lease_until)
        assert records.complete(replace(pending, state="failed", attempts=attempt), attempt=attempt)

    # Given a failed delivery (attempt 1), as a redeliver reads it
    fail_attempt(1)
    seen = records.get("batch_stale")
    assert seen is not None and (seen.state, seen.attempts) == ("failed", 1)
    # And a retry that claims and fails attempt 2 before the redeliver writes
    fail_attempt(2)
    # When the redeliver writes its new round from what it read
    fresh = replace(seen, state="pending", round_start=seen.attempts, redeliveries=1)
    # Then it is refused (the service answers 409 delivery_in_progress), and the count stays 2
    assert not records.start_round(fresh, replacing=seen)
    stored = records.get("batch_stale")
    assert stored is not None and (stored.state, stored.attempts, stored.redeliveries) == ("failed", 2, 0)
    # And a redeliver that reads it afresh starts its round after attempt 2
    again = replace(stored, state="pending", round_start=2, redeliveries=1)
    assert records.start_round(again, replacing=stored)


def test_the_client_redelivers_and_reads_the_delivery_in_the_detailed_view(
    settings: Settings, local_aws: LocalStack, org: TestOrg, customer: CustomerS3
) -> None:
    # Given a finished batch that never had a delivery, and a target registered since
    http = TestClient(create_app(), raise_server_exceptions=False)
    sdk = Client(api_key=org.api_key(), http_client=http, sleep=lambda _: None)
    target = http.post(
        "/v1/delivery-targets",
        json=customer.target_body(prefix=f"deliveries/{org.org_id}"),
        headers=org.key_headers(),
    )
    assert target.status_code == 201, target.text
    finished_batch(org.org_id, "batch_sdk_redeliver")
    # When the client asks for a redelivery
    delivery = sdk.batches.redeliver("batch_sdk_redeliver")
    # Then it answers the new round, typed: pending, to the target, the first redelivery
    assert isinstance(delivery, BucketDeliveryModel)
    assert (delivery.state, delivery.redeliveries) == ("pending", 1)
    assert [t["target_id"] for t in delivery.targets] == [target.json()["id"]]
    # And a second one while it is queued raises the service's 409
    with pytest.raises(ConflictError) as queued:
        sdk.batches.redeliver("batch_sdk_redeliver")
    assert queued.value.code == "delivery_in_progress"
    # And the detailed view, asked for by the client, holds the same delivery
    detailed = sdk.batches.get("batch_sdk_redeliver", include_details=True)
    assert detailed.raw["details"]["delivery"]["state"] == "pending"
    assert "details" not in sdk.batches.get("batch_sdk_redeliver").raw
