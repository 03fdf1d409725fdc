"""Webhook delivery on moto, to a real HTTP receiver on 127.0.0.1 (ALLOW_LOOPBACK_WEBHOOKS):
signed over the raw bytes, retried on the schedule by the sweeper's `retry_due` with a
clock that jumps (no sleeping), dead-lettered after 8 attempts, idempotent throughout."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import pytest

from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.adapters.dynamo.codec import to_item
from batchroute.adapters.dynamo.webhook_deliveries import DUE_PARTITION, WebhookDeliveries
from batchroute.adapters.kms import KmsSealer
from batchroute.clock import FixedClock, isoformat
from batchroute.config import get_settings
from batchroute.domain.batches.record import BatchRecord
from batchroute.domain.delivery.webhooks import RETRY_DELAYS_SECONDS, delivery_id_for, verify
from batchroute.services.accounts.settings import webhook_secret_context
from batchroute.services.delivery.webhooks import (
    INTERRUPTED,
    WebhookDelivery,
    batch_webhook_secret_context,
    seal_batch_webhook,
)
from batchroute.services.workflow.steps import BatchWorkflow
from batchroute.wiring import Wiring
from batchroute.workflow.tasks import WorkflowTask
from batchroute_tools.local.provision import LocalStack
from functions.api.auth import identity_store
from tests.integration.principals import TestOrg, new_org

ORG_SECRET = "org-webhook-secret-123"
BATCH_SECRET = "batch-webhook-secret-456"
START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


# -- a real receiver ---------------------------------------------------------------------
@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    port: int = 0
    answers: list[int] = field(default_factory=lambda: [200])
    extra_headers: dict[str, str] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str = "/hooks") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def answer(self, *statuses: int) -> None:
        with self.lock:
            self.answers = list(statuses)

    def next_status(self) -> int:
        with self.lock:
            return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with state.lock:
                state.received.append(
                    Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                )
            status = state.next_status()
            self.send_response(status)
            if 300 <= status < 400:
                self.send_header("Location", state.url("/redirected"))
            for name, value in state.extra_headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# -- the service, wired as the handlers wire it ------------------------------------------
@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(START)


@pytest.fixture
def service(
    local_aws: LocalStack, monkeypatch: pytest.MonkeyPatch, clock: FixedClock
) -> Iterator[WebhookDelivery]:
    monkeypatch.setenv("ALLOW_LOOPBACK_WEBHOOKS", "1")
    get_settings.cache_clear()
    identity_store.cache_clear()
    try:
        settings = get_settings()
        assert settings.allow_loopback_webhooks and settings.environment == "local"
        yield Wiring(settings, clock).webhook_delivery
    finally:
        monkeypatch.delenv("ALLOW_LOOPBACK_WEBHOOKS")
        get_settings.cache_clear()


@pytest.fixture
def org(service: WebhookDelivery) -> TestOrg:
    return new_org()


def sealer() -> KmsSealer:
    return KmsSealer(get_settings().kms_key_id)


def set_org_webhook(org_id: str, url: str, secret: str = ORG_SECRET) -> None:
    sealed = sealer().seal(secret, context=webhook_secret_context(org_id))
    identity_store().update_org(
        org_id, delivery_webhook={"url": url, "secret_ciphertext": sealed, "updated_at": isoformat(START)}
    )


def put_batch(
    org_id: str, batch_id: str, state: str = "completed", webhook: dict[str, str] | None = None
) -> BatchRecord:
    record: dict[str, Any] = {
        "pk": f"BATCH#{batch_id}",
        "sk": "META",
        "batch_id": batch_id,
        "org_id": org_id,
        "state": state,
        "created_at": "2026-03-01T10:00:00.000Z",
        "deadline_at": "2026-03-02T10:00:00.000Z",
        "completed_at": "2026-03-01T11:59:00.000Z",
        "counts": {"total": 3, "pending": 0, "running": 0, "completed": 2, "failed": 1, "canceled": 0},
        "routing_mode": "cheapest",
        "sla_tier": "standard",
        "webhook": webhook,
        "gsi1pk": f"ORG#{org_id}",
        "gsi1sk": f"BATCH#{batch_id}",
    }
    boto3.client("dynamodb").put_item(TableName=get_settings().table_name("batches"), Item=to_item(record))
    batch = BatchRecords(get_settings().table_name("batches")).get(batch_id)
    assert batch is not None
    return batch


def deliveries() -> WebhookDeliveries:
    return WebhookDeliveries(get_settings().table_name("batches"))


def stdlib_signature(secret: str, timestamp: str, body: bytes) -> str:
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def drive_retries(service: WebhookDelivery, clock: FixedClock, batch_id: str, delivery_id: str) -> list[str]:
    """Jump the clock to each scheduled attempt and run the sweeper until nothing is owed."""
    statuses = []
    for _ in range(20):
        delivery = deliveries().get(batch_id, delivery_id)
        assert delivery is not None
        if delivery.status in ("succeeded", "dead_lettered"):
            break
        due = datetime.fromisoformat(delivery.next_attempt_at.replace("Z", "+00:00"))
        # A moment early, nothing is due
        clock._now = due - timedelta(milliseconds=1)
        assert service.retry_due().attempted == []
        clock._now = due
        report = service.retry_due()
        assert report.attempted == [delivery_id]
        statuses.append(deliveries().get(batch_id, delivery_id).status)  # type: ignore[union-attr]
    return statuses


# -- tests -------------------------------------------------------------------------------
def test_a_completed_batch_is_posted_signed_to_the_org_webhook(
    service: WebhookDelivery, org: TestOrg, receiver: Receiver, clock: FixedClock
) -> None:
    # Given an org default webhook at a loopback receiver, and a completed batch
    set_org_webhook(org.org_id, receiver.url("/hooks/org"))
    batch = put_batch(org.org_id, "batch_signed")
    # When the Deliver step runs
    delivery = service.deliver_batch_event(batch)
    # Then exactly one POST arrived, signed over its raw bytes with the org secret
    assert len(receiver.received) == 1
    hit = receiver.received[0]
    assert hit.path == "/hooks/org"
    timestamp, signature = hit.headers["x-service-timestamp"], hit.headers["x-service-signature"]
    assert timestamp == str(int(START.timestamp()))
    assert signature == stdlib_signature(ORG_SECRET, timestamp, hit.body)
    assert verify(ORG_SECRET.encode(), timestamp, hit.body, signature, now=clock.now())
    assert not verify(b"some-other-secret", timestamp, hit.body, signature, now=clock.now())
    assert hit.headers["x-service-event"] == "batch.completed"
    assert hit.headers["content-type"] == "application/json"
    # And the body carries the event id, type and the batch summary, nothing secret
    body = json.loads(hit.body)
    assert body["id"].startswith("evt_") and body["type"] == "batch.completed"
    assert body["created_at"] == isoformat(START)
    assert body["batch"]["id"] == "batch_signed" and body["batch"]["state"] == "completed"
    assert body["batch"]["counts"]["failed"] == 1
    assert ORG_SECRET not in hit.body.decode() and "webhook" not in body["batch"]
    # And the delivery succeeded on its first attempt
    assert delivery is not None
    assert (delivery.status, delivery.attempt_count, delivery.last_response_status) == (
        "succeeded",
        1,
        200,
    )
    assert delivery.event_id == body["id"] and delivery.secret_source == "org"
    assert delivery.next_attempt_at is None and ORG_SECRET not in json.dumps(asdict(delivery))
    # And a repeated Deliver step (SQS redelivery) sends nothing more
    clock.advance(minutes=5)
    again = service.deliver_batch_event(batch)
    assert again is not None and again.attempt_count == 1
    assert len(receiver.received) == 1
    assert service.retry_due().attempted == []


def test_per_batch_webhook_overrides_the_org_default(
    service: WebhookDelivery, org: TestOrg, receiver: Receiver, clock: FixedClock
) -> None:
    # Given an org default and a batch with its own webhook (sealed as batch creation does)
    set_org_webhook(org.org_id, receiver.url("/hooks/org"))
    own = seal_batch_webhook(
        sealer(),
        org_id=org.org_id,
        batch_id="batch_own",
        url=receiver.url("/hooks/batch"),
        secret=BATCH_SECRET,
    )
    assert BATCH_SECRET not in json.dumps(own.to_mapping())
    opened = service.sealer.unseal(
        own.secret_sealed, context=batch_webhook_secret_context(org.org_id, "batch_own")
    )
    assert opened == BATCH_SECRET
    batch = put_batch(org.org_id, "batch_own", state="failed", webhook=own.to_mapping())
    # When it is delivered
    delivery = service.deliver_batch_event(batch)
    # Then only the batch's webhook got it, signed with the batch's secret
    assert [r.path for r in receiver.received] == ["/hooks/batch"]
    hit = receiver.received[0]
    assert hit.headers["x-service-event"] == "batch.failed"
    assert json.loads(hit.body)["type"] == "batch.failed"
    ts, sig = hit.headers["x-service-timestamp"], hit.headers["x-service-signature"]
    assert verify(BATCH_SECRET.encode(), ts, hit.body, sig, now=clock.now())
    assert not verify(ORG_SECRET.encode(), ts, hit.body, sig, now=clock.now())
    assert delivery is not None and delivery.secret_source == "batch"
    assert delivery.url == receiver.url("/hooks/batch")


def test_a_batch_secret_sealed_for_another_batch_does_not_sign(
    service: WebhookDelivery, org: TestOrg, receiver: Receiver
) -> None:
    # A ciphertext copied from another batch fails to unseal (KMS context): the attempt fails
    copied = seal_batch_webhook(
        sealer(), org_id=org.org_id, batch_id="batch_src", url=receiver.url(), secret=BATCH_SECRET
    )
    delivery = service.deliver_batch_event(put_batch(org.org_id, "batch_dst", webhook=copied.to_mapping()))
    assert delivery is not None and delivery.status == "failed"
    assert delivery.last_error == "signing secret unavailable"
    assert receiver.received == []


def test_a_failing_receiver_is_retried_on_schedule_until_dead_lettered(
    service: WebhookDelivery, org: TestOrg, receiver: Receiver, clock: FixedClock
) -> None:
    # Given a receiver that always answers 500
    receiver.answer(500)
    set_org_webhook(org.org_id, receiver.url())
    batch = put_batch(org.org_id, "batch_dead", state="expired")
    # When the Deliver step runs, the first attempt fails and the next is scheduled 5 s later
    first = service.deliver_batch_event(batch)
    assert first is not None
    assert (first.status, first.attempt_count, first.last_response_status) == ("failed", 1, 500)
    assert first.next_attempt_at == isoformat(START + timedelta(seconds=5))
    assert first.last_error == "receiver answered 500"
    # And the sweeper, run at each due time, makes attempts 2..8, then dead-letters
    statuses = drive_retries(service, clock, "batch_dead", first.delivery_id)
    assert statuses == ["failed"] * 6 + ["dead_lettered"]
    assert clock.now() - START == timedelta(seconds=sum(RETRY_DELAYS_SECONDS))
    final = deliveries().get("batch_dead", first.delivery_id)
    assert final is not None
    assert (final.status, final.attempt_count) == ("dead_lettered", 8)
    assert final.next_attempt_at is None and "gsi1pk" not in asdict(final)
    # And the receiver saw 8 POSTs of identical bytes with the same event id, each signed afresh
    assert len(receiver.received) == 8
    assert len({r.body for r in receiver.received}) == 1
    assert {json.loads(r.body)["id"] for r in receiver.received} == {first.event_id}
    assert all(r.headers["x-service-event"] == "batch.expired" for r in receiver.received)
    timestamps = [int(r.headers["x-service-timestamp"]) for r in receiver.received]
    assert timestamps == sorted(timestamps) and len(set(timestamps)) == 8
    for r in receiver.received:
        assert r.headers["x-service-signature"] == stdlib_signature(
            ORG_SECRET, r.headers["x-service-timestamp"], r.body
        )
    # And the view shows every attempt
    view = service.view("batch_dead")
    assert [e["attempt"] for e in view["events"]] == list(range(1, 9))
    assert {e["status_code"] for e in view["events"]} == {500}
    assert view["data"][0]["status"] == "dead_lettered" and view["data"][0]["next_attempt_at"] is None
    # And nothing is owed any more
    clock.advance(days=3)
    assert service.retry_due().attempted == []


def test_a_receiver_that_recovers_succeeds_on_a_retry(
    service: WebhookDelivery, org: TestOrg, receiver: Receiver, clock: FixedClock
) -> None:
    receiver.answer(503, 429, 200)
    receiver.extra_headers["Retry-After"] = "600"  # honoured on the 429 as the minimum wait
    set_org_webhook(org.org_id, receiver.url())
    first = service.deliver_batch_event(put_batch(org.org_id, "batch_later", state="canceled"))
    assert first is not None and first.status == "failed"
    # attempt 2 (after 5 s) gets 429 Retry-After: 600 -> attempt 3 waits 600 s, not 300 s
    clock._now = START + timedelta(seconds=5)
    service.retry_due()
    second = deliveries().get("batch_later", first.delivery_id)
    assert second is not None and second.last_response_status == 429
    assert second.next_attempt_at == isoformat(clock.now() + timedelta(seconds=600))
    statuses = drive_retries(service, clock, "batch_later", first.delivery_id)
    assert statuses == ["succeeded"]
    done = deliveries().get("batch_later", first.delivery_id)
    assert done is not None
    assert (done.status, done.attempt_count, done.last_response_status) == ("succeeded", 3, 200)
    assert done.last_error is None and "gsi1pk" not in asdict(done)
    assert len(receiver.received) == 3


def test_a_redirect_is_a_failure_and_is_not_followed(
    service: WebhookDelivery, org: TestOrg, receiver: Receiver
) -> None:
    receiver.answer(302, 200)
    set_org_webhook(org.org_id, receiver.url("/moved"))
    delivery = service.deliver_batch_event(put_batch(org.org_id, "batch_redirect"))
    assert delivery is not None
    assert (delivery.status, delivery.last_response_status) == ("failed", 302)
    assert "redirect" in delivery.last_error
    assert [r.path for r in receiver.received] == ["/moved"]  # never /redirected


def test_an_unreachable_receiver_is_a_connection_failure(service: WebhookDelivery, org: TestOrg) -> None:
    set_org_webhook(org.org_id, "http://127.0.0.1:9/closed")  # discard port: nothing listens
    delivery = service.deliver_batch_event(put_batch(org.org_id, "batch_unreachable"))
    assert delivery is not None and delivery.status == "failed"
    assert delivery.last_error.startswith("could not connect to 127.0.0.1")
    assert delivery.last_response_status is None


def test_no_webhook_means_polling_and_non_terminal_batches_send_nothing(
    service: WebhookDelivery, org: TestOrg, receiver: Receiver
) -> None:
    assert service.deliver_batch_event(put_batch(org.org_id, "batch_polled")) is None
    assert service.view("batch_polled") == {"batch_id": "batch_polled", "data": [], "events": []}
    set_org_webhook(org.org_id, receiver.url())
    assert service.deliver_batch_event(put_batch(org.org_id, "batch_running", state="running")) is None
    assert receiver.received == []


def test_a_claimed_attempt_is_sent_once_and_an_abandoned_one_is_recovered(
    service: WebhookDelivery, org: TestOrg, receiver: Receiver, clock: FixedClock
) -> None:
    # Given a delivery whose first attempt a worker claimed and then died before recording
    set_org_webhook(org.org_id, receiver.url())
    batch = put_batch(org.org_id, "batch_crash")
    delivery_id = delivery_id_for("batch_crash", "batch.completed")
    receiver.answer(500)
    service.deliver_batch_event(batch)  # attempt 1 fails: attempt 2 due at +5 s
    clock.advance(seconds=5)
    now = isoformat(clock.now())
    store = deliveries()
    lease = isoformat(clock.now() + timedelta(seconds=120))
    assert store.claim("batch_crash", delivery_id, attempt=2, now_iso=now, lease_until_iso=lease)
    # Then nobody else can claim attempt 2 (a repeated message or a second sweeper)
    assert not store.claim("batch_crash", delivery_id, attempt=2, now_iso=now, lease_until_iso=lease)
    assert service.retry_due().attempted == []
    assert service.deliver_batch_event(batch).attempt_count == 2  # type: ignore[union-attr]
    assert len(receiver.received) == 1
    # When the lease runs out, the sweeper records attempt 2 as interrupted and reschedules
    clock.advance(seconds=121)
    report = service.retry_due()
    assert report.recovered == [delivery_id]
    recovered = store.get("batch_crash", delivery_id)
    assert recovered is not None
    assert (recovered.status, recovered.attempt_count, recovered.last_error) == (
        "failed",
        2,
        INTERRUPTED,
    )
    # And attempt 3 goes out on schedule
    receiver.answer(200)
    assert drive_retries(service, clock, "batch_crash", delivery_id) == ["succeeded"]
    events = service.view("batch_crash")["events"]
    assert [(e["attempt"], e["status_code"]) for e in events] == [(1, 500), (2, None), (3, 200)]
    assert len(receiver.received) == 2


def test_the_due_index_holds_only_owed_deliveries(
    service: WebhookDelivery, org: TestOrg, receiver: Receiver
) -> None:
    set_org_webhook(org.org_id, receiver.url())
    receiver.answer(200)
    service.deliver_batch_event(put_batch(org.org_id, "batch_ok"))
    receiver.answer(500)
    service.deliver_batch_event(put_batch(org.org_id, "batch_owed"))
    due = boto3.client("dynamodb").query(
        TableName=get_settings().table_name("batches"),
        IndexName="gsi1",
        KeyConditionExpression="gsi1pk = :p",
        ExpressionAttributeValues={":p": {"S": DUE_PARTITION}},
    )["Items"]
    assert [item["batch_id"]["S"] for item in due] == ["batch_owed"]
    assert due[0]["gsi1sk"]["S"].startswith(isoformat(START + timedelta(seconds=5)))


def test_the_workflow_deliver_step_succeeds_whatever_the_receiver_answers(
    service: WebhookDelivery, org: TestOrg, receiver: Receiver, clock: FixedClock
) -> None:
    # Given a completed batch whose receiver fails
    receiver.answer(500)
    set_org_webhook(org.org_id, receiver.url())
    put_batch(org.org_id, "batch_step")
    records = BatchRecords(get_settings().table_name("batches"))
    workflow = BatchWorkflow(records, clock, webhooks=service)
    task = WorkflowTask(step="deliver", batch_id="batch_step", task_token="t1")
    # When the Deliver step runs (twice: SQS may repeat it)
    first = workflow.deliver(task)
    second = workflow.deliver(task)
    # Then it returns at once with the delivery scheduled for retry, and sent once
    assert first["webhook"]["status"] == "failed" and first["webhook"]["attempt_count"] == 1
    assert second["webhook"] == first["webhook"]
    assert len(receiver.received) == 1
    assert "deliver" in records.get("batch_step").workflow_steps  # type: ignore[union-attr]
    # And a non-terminal batch only journals
    put_batch(org.org_id, "batch_busy", state="running")
    output = workflow.deliver(WorkflowTask(step="deliver", batch_id="batch_busy", task_token="t2"))
    assert "webhook" not in output
