"""GET /v1/batches/{batch_id}/webhooks on moto: shape, every attempt, roles, 403 and 404,
and never the secret."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.adapters.dynamo.codec import to_item
from batchroute.adapters.dynamo.webhook_deliveries import WebhookDeliveries
from batchroute.adapters.kms import KmsSealer
from batchroute.clock import FixedClock, isoformat
from batchroute.config import get_settings
from batchroute.domain.batches.record import BatchRecord
from batchroute.domain.delivery.webhooks import AttemptOutcome
from batchroute.services.delivery.webhooks import WebhookDelivery, seal_batch_webhook
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from tests.integration.principals import TestOrg, new_org

SECRET = "view-test-secret-789"
START = datetime(2026, 4, 1, tzinfo=UTC)
URL = "https://hooks.example.com/batches"


class ScriptedSender:
    """Answers each attempt with the next outcome (no network)."""

    def __init__(self, *outcomes: AttemptOutcome) -> None:
        self.outcomes = list(outcomes)
        self.sent: list[tuple[str, bytes, dict[str, str]]] = []

    def send(self, url: str, raw_body: bytes, headers: Mapping[str, str]) -> AttemptOutcome:
        self.sent.append((url, raw_body, dict(headers)))
        return self.outcomes.pop(0)


@pytest.fixture
def client(local_aws: LocalStack) -> TestClient:
    identity_store.cache_clear()
    return TestClient(create_app(), raise_server_exceptions=False)


@pytest.fixture
def org(local_aws: LocalStack) -> TestOrg:
    identity_store.cache_clear()
    return new_org()


def path(batch_id: str) -> str:
    return f"/v1/batches/{batch_id}/webhooks"


def put_batch(org_id: str, batch_id: str) -> BatchRecord:
    sealer = KmsSealer(get_settings().kms_key_id)
    record = {
        "pk": f"BATCH#{batch_id}",
        "sk": "META",
        "batch_id": batch_id,
        "org_id": org_id,
        "state": "completed",
        "created_at": isoformat(START),
        "webhook": seal_batch_webhook(
            sealer, org_id=org_id, batch_id=batch_id, url=URL, secret=SECRET
        ).to_mapping(),
    }
    table = get_settings().table_name("batches")
    boto3.client("dynamodb").put_item(TableName=table, Item=to_item(record))
    batch = BatchRecords(table).get(batch_id)
    assert batch is not None
    return batch


def deliver(batch: BatchRecord, *outcomes: AttemptOutcome) -> WebhookDelivery:
    """Run the first attempt and as many retries as outcomes were given."""
    clock = FixedClock(START)
    service = WebhookDelivery(
        WebhookDeliveries(get_settings().table_name("batches")),
        identity_store(),
        KmsSealer(get_settings().kms_key_id),
        ScriptedSender(*outcomes),
        clock,
    )
    service.deliver_batch_event(batch)
    for _ in outcomes[1:]:
        clock.advance(hours=9)  # past any single step of the schedule
        service.retry_due()
    return service


def test_the_view_shows_the_delivery_and_every_attempt(client: TestClient, org: TestOrg) -> None:
    # Given a delivery that failed twice (a time-out, then a 503) and then landed
    batch = put_batch(org.org_id, "batch_view")
    deliver(
        batch,
        AttemptOutcome(None, "timed out after 10 s", 10_000),
        AttemptOutcome(503, None, 40),
        AttemptOutcome(200, None, 25),
    )
    # When a member reads the batch's webhooks
    response = client.get(path("batch_view"), headers=org.key_headers("member"))
    # Then the delivery and its three attempts are shown
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["batch_id"] == "batch_view"
    (delivery,) = body["data"]
    assert set(delivery) == {
        "id",
        "event_id",
        "event_type",
        "url",
        "status",
        "attempt_count",
        "last_attempt_at",
        "next_attempt_at",
        "last_response_status",
        "last_error",
        "created_at",
    }
    assert delivery["id"].startswith("whd_") and delivery["event_id"].startswith("evt_")
    assert delivery["event_type"] == "batch.completed" and delivery["url"] == URL
    assert (delivery["status"], delivery["attempt_count"], delivery["last_response_status"]) == (
        "succeeded",
        3,
        200,
    )
    assert delivery["last_error"] is None and delivery["next_attempt_at"] is None
    assert delivery["last_attempt_at"] == isoformat(START + timedelta(hours=18))
    assert body["events"] == [
        {
            "delivery_id": delivery["id"],
            "attempt": 1,
            "at": isoformat(START),
            "status_code": None,
            "error": "timed out after 10 s",
            "duration_ms": 10_000,
        },
        {
            "delivery_id": delivery["id"],
            "attempt": 2,
            "at": isoformat(START + timedelta(hours=9)),
            "status_code": 503,
            "error": "receiver answered 503",
            "duration_ms": 40,
        },
        {
            "delivery_id": delivery["id"],
            "attempt": 3,
            "at": isoformat(START + timedelta(hours=18)),
            "status_code": 200,
            "error": None,
            "duration_ms": 25,
        },
    ]
    # And never the secret, sealed or not, nor the payload
    assert SECRET not in response.text and "secret" not in response.text and "payload" not in response.text


def test_a_scheduled_retry_shows_its_next_attempt(client: TestClient, org: TestOrg) -> None:
    deliver(put_batch(org.org_id, "batch_pending"), AttemptOutcome(500, None, 7))
    (delivery,) = client.get(path("batch_pending"), headers=org.key_headers("billing")).json()["data"]
    assert delivery["status"] == "failed" and delivery["attempt_count"] == 1
    assert delivery["next_attempt_at"] == isoformat(START + timedelta(seconds=5))
    assert delivery["last_error"] == "receiver answered 500"


def test_a_batch_without_deliveries_has_an_empty_view(client: TestClient, org: TestOrg) -> None:
    put_batch(org.org_id, "batch_quiet")
    response = client.get(path("batch_quiet"), headers=org.session_headers("owner"))
    assert response.status_code == 200
    assert response.json() == {"batch_id": "batch_quiet", "data": [], "events": []}


def test_unknown_batch_is_404(client: TestClient, org: TestOrg) -> None:
    response = client.get(path("batch_nope"), headers=org.key_headers())
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "batch_not_found"


def test_another_orgs_batch_is_403(client: TestClient, org: TestOrg) -> None:
    put_batch(org.org_id, "batch_private")
    other = new_org()
    response = client.get(path("batch_private"), headers=other.key_headers("owner"))
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"


def test_credentials_are_required(client: TestClient, org: TestOrg) -> None:
    put_batch(org.org_id, "batch_anon")
    assert client.get(path("batch_anon")).status_code == 401


def test_the_endpoint_is_in_the_openapi_document(client: TestClient) -> None:
    document = client.get("/openapi.json").json()
    operation = document["paths"]["/v1/batches/{batch_id}/webhooks"]["get"]
    assert {"200", "403", "404"} <= set(operation["responses"])
