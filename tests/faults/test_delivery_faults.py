"""Faults where the batch leaves the service: the customer's bucket refusing writes, and the
webhook receiver down for an hour of the injectable clock. The retry schedule (the sweeper)
delivers in the end; the batch's items and money are untouched by either."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import boto3
import pytest

from batchroute.adapters.dynamo.webhook_deliveries import WebhookDeliveries
from batchroute.config import get_settings
from batchroute.domain.delivery.webhooks import delivery_id_for, event_type_for
from batchroute.wiring import Wiring
from functions.api.schemas.delivery.targets import DeliveryTargetCreate
from tests.faults.harness import (
    AwsFault,
    Pipeline,
    follow_schedule,
    mixed_items,
    run_and_check,
    s3_path,
)
from tests.faults.test_aws_faults import S3_WRITES
from tests.integration.batch_pipeline_support import CreatedBatch
from tests.integration.customer_bucket import BUCKET, CustomerS3


@pytest.fixture
def customer() -> Iterator[CustomerS3]:
    with CustomerS3.start() as server:
        yield server


def test_the_customers_bucket_refusing_writes_is_retried_until_delivered(
    pipeline: Pipeline, customer: CustomerS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a delivery target whose bucket refuses the first two attempts' writes
    wiring = Wiring(get_settings(), pipeline.clock)
    prefix = f"deliveries/{pipeline.org_id}"
    body = DeliveryTargetCreate.model_validate(customer.target_body(prefix=prefix))
    wiring.delivery_targets.create(pipeline.org_id, body.command())
    in_customer_bucket = f"/{BUCKET}/{prefix}/"
    pipeline.aws.add(
        AwsFault(
            "s3",
            S3_WRITES,
            "InternalError",
            500,
            times=2,
            match=lambda r: s3_path(r).startswith(in_customer_bucket),
        )
    )

    # When the batch runs (the Deliver step's attempt fails), then the sweeper runs whenever
    # the next attempt is due by the injectable clock (the deliver worker makes it)
    def owed(batch_id: str) -> str | None:
        delivery = wiring.bucket_deliveries.get(batch_id)
        assert delivery is not None
        return None if delivery.state == "delivered" else delivery.next_attempt_at

    def retried(created: CreatedBatch) -> None:
        assert follow_schedule(pipeline, monkeypatch, lambda: owed(created.batch_id)) == 2

    batch_id = run_and_check(pipeline, mixed_items(), then=retried).batch.batch_id
    # Then the third attempt delivered every artifact, byte for byte ours
    assert pipeline.faults.counts["s3:InternalError"] == 2
    delivery = wiring.bucket_deliveries.get(batch_id)
    assert delivery is not None and (delivery.state, delivery.attempts) == ("delivered", 3)
    ours = boto3.client("s3")
    landed = {k.rsplit("/", 1)[-1]: v for k, v in customer.objects().items() if batch_id in k}
    assert set(landed) == {"results.jsonl", "errors.jsonl", "receipt.json"}
    for name, body in landed.items():
        key = f"batches/{batch_id}/{name}"
        assert body == ours.get_object(Bucket=get_settings().buckets["artifacts"], Key=key)["Body"].read()


def test_the_webhook_receiver_down_for_an_hour_gets_the_event_once_it_is_back(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the org's webhook receiver answering 503 for the next hour of the injectable clock
    pipeline.webhooks.down_until = pipeline.clock.now() + timedelta(hours=1)
    deliveries = WebhookDeliveries(get_settings().table_name("batches"))

    def owed(batch_id: str) -> str | None:
        delivery = deliveries.get(batch_id, delivery_id_for(batch_id, str(event_type_for("completed"))))
        assert delivery is not None
        return None if delivery.status == "succeeded" else str(delivery.next_attempt_at)

    def retried(created: CreatedBatch) -> None:
        follow_schedule(pipeline, monkeypatch, lambda: owed(created.batch_id))

    # When the batch runs (the Deliver step's attempt is refused) and the sweeper retries on
    # the schedule as the clock moves on
    outcome = run_and_check(pipeline, mixed_items(), then=retried)
    # Then every attempt inside the hour was refused, the first one after it accepted: the
    # same event (one id) each time
    events = pipeline.webhooks.events(outcome.batch.batch_id)
    assert pipeline.faults.counts["webhook:503"] == len(events) - 1 >= 3
    assert len({event["id"] for event in events}) == 1
