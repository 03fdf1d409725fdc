"""`batchroute_client.webhooks.verify` against deliveries the service really signed: the
webhook delivery service (moto) POSTs to a loopback receiver, and the client verifies what
arrived; tampering, a wrong secret, and stale or future timestamps are rejected. And
`client.batches.webhooks` reads the delivery back."""

from __future__ import annotations

import json

import pytest
from batchroute_client import Client
from batchroute_client import WebhookDelivery as WebhookDeliveryModel
from batchroute_client.webhooks import (
    InvalidSignatureError,
    MalformedWebhookError,
    StaleTimestampError,
    WebhookVerificationError,
    verify,
)
from fastapi.testclient import TestClient

from batchroute.clock import FixedClock
from batchroute.services.delivery.webhooks import WebhookDelivery
from functions.api.app import create_app
from tests.integration import test_webhook_delivery as delivery
from tests.integration.principals import TestOrg
from tests.integration.test_webhook_delivery import (
    ORG_SECRET,
    START,
    Received,
    Receiver,
    put_batch,
    set_org_webhook,
)

# The delivery tests' fixtures: the service wired on moto, a loopback receiver, a fixed clock
clock, org, receiver, service = delivery.clock, delivery.org, delivery.receiver, delivery.service

NOW = START.timestamp()


@pytest.fixture
def delivered(service: WebhookDelivery, org: TestOrg, receiver: Receiver, clock: FixedClock) -> Received:
    set_org_webhook(org.org_id, receiver.url("/hooks"))
    service.deliver_batch_event(put_batch(org.org_id, "batch_client_verify"))
    assert len(receiver.received) == 1
    return receiver.received[0]


def test_a_real_delivery_verifies_and_returns_the_event(delivered: Received) -> None:
    event = verify(delivered.body, delivered.headers, ORG_SECRET, now=NOW)
    assert event == json.loads(delivered.body)
    assert event["type"] == "batch.completed" and event["id"].startswith("evt_")
    assert event["batch"]["id"] == "batch_client_verify"
    # Header names are matched in any case (frameworks differ)
    upper = {key.title(): value for key, value in delivered.headers.items()}
    assert verify(delivered.body, upper, ORG_SECRET, now=NOW + 299) == event


def test_a_tampered_body_or_a_wrong_secret_is_rejected(delivered: Received) -> None:
    tampered = delivered.body.replace(b"batch_client_verify", b"batch_client_verifx")
    with pytest.raises(InvalidSignatureError):
        verify(tampered, delivered.headers, ORG_SECRET, now=NOW)
    reserialized = json.dumps(json.loads(delivered.body), indent=1).encode()
    with pytest.raises(InvalidSignatureError):
        verify(reserialized, delivered.headers, ORG_SECRET, now=NOW)
    with pytest.raises(InvalidSignatureError):
        verify(delivered.body, delivered.headers, "some-other-secret", now=NOW)
    # A signature replayed under a different timestamp does not verify either
    moved = {**delivered.headers, "x-service-timestamp": str(int(NOW) + 1)}
    with pytest.raises(InvalidSignatureError):
        verify(delivered.body, moved, ORG_SECRET, now=NOW)


def test_stale_and_future_timestamps_are_rejected(delivered: Received) -> None:
    with pytest.raises(StaleTimestampError):
        verify(delivered.body, delivered.headers, ORG_SECRET, now=NOW + 301)
    with pytest.raises(StaleTimestampError):
        verify(delivered.body, delivered.headers, ORG_SECRET, now=NOW - 301)
    with pytest.raises(StaleTimestampError):
        verify(delivered.body, delivered.headers, ORG_SECRET, tolerance=60, now=NOW + 61)
    assert verify(delivered.body, delivered.headers, ORG_SECRET, tolerance=60, now=NOW + 60)


def test_missing_or_unreadable_headers_are_malformed(delivered: Received) -> None:
    for name in ("x-service-signature", "x-service-timestamp"):
        headers = {k: v for k, v in delivered.headers.items() if k != name}
        with pytest.raises(MalformedWebhookError):
            verify(delivered.body, headers, ORG_SECRET, now=NOW)
    for odd in ("soon", "9" * 400):  # a number no clock reads (it overflowed a float: not a 400)
        with pytest.raises(MalformedWebhookError):
            verify(delivered.body, {**delivered.headers, "x-service-timestamp": odd}, ORG_SECRET, now=NOW)
    assert issubclass(StaleTimestampError, WebhookVerificationError)


def test_the_documented_test_vector_verifies() -> None:
    body = b'{"id":"evt_1","type":"batch.completed"}'
    headers = {
        "X-Service-Timestamp": "1767225600",
        "X-Service-Signature": "37eUByXk4DKdSKGhE6lQ18y8vLf_CfDdN5hu3z9kvCc",
    }
    assert verify(body, headers, "whsec-test-secret", now=1767225600) == {
        "id": "evt_1",
        "type": "batch.completed",
    }


def test_the_client_reads_a_batchs_webhook_deliveries(delivered: Received, org: TestOrg) -> None:
    # Given the delivery above, made by the service (batch_client_verify, answered 2xx)
    sdk = Client(
        api_key=org.api_key(),
        http_client=TestClient(create_app(), raise_server_exceptions=False),
        sleep=lambda _: None,
    )
    # When the client reads the batch's webhook deliveries
    (first,) = sdk.batches.webhooks("batch_client_verify")
    # Then it is the one the receiver got, succeeded after one attempt, typed
    event = json.loads(delivered.body)
    assert isinstance(first, WebhookDeliveryModel)
    assert (first.status, first.attempt_count, first.event_id) == ("succeeded", 1, event["id"])
    assert first.event_type == "batch.completed" and str(first.url).endswith("/hooks")
    assert first.last_response_status is not None and 200 <= first.last_response_status < 300
