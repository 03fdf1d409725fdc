"""A bucket delivery attempt that retention's reclaim overtakes (docs/delivery-targets.md,
docs/retention.md): a redelivery near the end of the window, or the workflow's Deliver step
while a compat client deletes its output files the moment the batch ends. The sweep marks the
batch reclaimed, then deletes every object under its prefix but the receipt; an attempt that
meets either fails with `results_expired`, never `delivered` with the receipt alone.
"""

from __future__ import annotations

from typing import BinaryIO

from batchroute.adapters.customer_buckets import ArtifactSource
from batchroute.services.delivery.buckets import ArtifactStreams, BucketDelivery
from batchroute.wiring import Wiring
from batchroute_tools.local.provision import LocalStack
from tests.integration.customer_bucket import CustomerS3
from tests.integration.principals import TestOrg
from tests.integration.test_bucket_delivery import clock as clock  # the fixtures
from tests.integration.test_bucket_delivery import customer as customer
from tests.integration.test_bucket_delivery import (
    delivered_objects,
    finished_batch,
    register,
)
from tests.integration.test_bucket_delivery import org as org
from tests.integration.test_bucket_delivery import settings as settings
from tests.integration.test_bucket_delivery import wiring as wiring

RECLAIMED_AT = "2026-05-04T08:00:30.000Z"


def _sweep(wiring: Wiring, batch_id: str) -> None:
    """The retention sweep's two steps on the batch: mark it reclaimed, then delete every
    object under its prefix but the receipt."""
    assert wiring.batch_records.mark_reclaimed(batch_id, at=RECLAIMED_AT)
    objects = wiring.artifacts
    objects.delete_many([k for k in objects.keys(f"batches/{batch_id}/") if not k.endswith("receipt.json")])


class SweepBeforeOpen:
    """Our artifacts as the deliver worker opens them; the sweep (another function) runs just
    before the `at`-th open (1: results.jsonl, 2: errors.jsonl)."""

    def __init__(self, wiring: Wiring, batch_id: str, *, at: int) -> None:
        self.wiring, self.batch_id, self.at = wiring, batch_id, at
        self.source: ArtifactStreams = ArtifactSource(wiring.artifacts)
        self.opened: list[str] = []

    def open(self, key: str) -> BinaryIO | None:
        self.opened.append(key)
        if len(self.opened) == self.at:
            _sweep(self.wiring, self.batch_id)
        return self.source.open(key)


def _service(wiring: Wiring, artifacts: ArtifactStreams) -> BucketDelivery:
    return BucketDelivery(
        wiring.bucket_deliveries, wiring.delivery_targets, wiring.batch_records, artifacts, wiring.clock
    )


def test_an_attempt_the_reclaim_overtakes_before_its_first_object_fails_and_writes_nothing(
    wiring: Wiring, local_aws: LocalStack, org: TestOrg, customer: CustomerS3
) -> None:
    # Given a finished batch read by the Deliver step before the sweep reached it
    register(wiring.delivery_targets, org, customer)
    batch = finished_batch(org.org_id, "batch_race")
    sweeping = SweepBeforeOpen(wiring, "batch_race", at=1)
    # When the sweep marks it and deletes its results and errors just before the first open
    record = _service(wiring, sweeping).deliver_batch(batch)
    # Then the attempt fails with results_expired, never `delivered` with the receipt alone
    assert record is not None and record.state == "failed", record
    assert record.last_error is not None and record.last_error.code == "results_expired"
    (share,) = record.targets
    assert share.state == "failed" and share.objects == () and share.delivered_at is None
    # And nothing was written to the customer's bucket
    assert delivered_objects(customer, org, "batch_race") == {}
    stored = wiring.bucket_deliveries.get("batch_race")
    assert stored is not None and stored.state == "failed" and stored.to_api()["delivered_at"] is None


def test_a_reclaim_midway_fails_the_attempt_and_the_share_lists_what_it_wrote(
    wiring: Wiring, local_aws: LocalStack, org: TestOrg, customer: CustomerS3
) -> None:
    # Given a finished batch whose delivery is under way
    register(wiring.delivery_targets, org, customer)
    batch = finished_batch(org.org_id, "batch_midway")
    sweeping = SweepBeforeOpen(wiring, "batch_midway", at=2)
    # When the sweep runs after results.jsonl went up, before errors.jsonl is opened
    record = _service(wiring, sweeping).deliver_batch(batch)
    # Then the attempt fails with results_expired
    assert record is not None and record.state == "failed", record
    assert record.last_error is not None and record.last_error.code == "results_expired"
    # And the whole results.jsonl it wrote stays (the service never deletes there), listed
    landed = delivered_objects(customer, org, "batch_midway")
    assert set(landed) == {"results.jsonl"}
    (share,) = record.targets
    assert share.state == "failed"
    assert share.objects == (f"deliveries/{org.org_id}/batch_midway/results.jsonl",)
    assert share.bytes_delivered == len(landed["results.jsonl"])


def test_an_attempt_given_a_batch_read_before_the_mark_writes_nothing(
    wiring: Wiring, local_aws: LocalStack, org: TestOrg, customer: CustomerS3
) -> None:
    # Given a batch the Deliver step read before the sweep marked it reclaimed (its bytes
    # not deleted yet: the sweep's second step is still to come)
    register(wiring.delivery_targets, org, customer)
    stale = finished_batch(org.org_id, "batch_stale")
    assert wiring.batch_records.mark_reclaimed("batch_stale", at=RECLAIMED_AT)
    assert stale.artifacts_reclaimed_at is None
    # When its delivery is attempted with that record
    record = _service(wiring, ArtifactSource(wiring.artifacts)).deliver_batch(stale)
    # Then the attempt reads the mark afresh: results_expired, and nothing is written
    assert record is not None and record.state == "failed", record
    assert record.last_error is not None and record.last_error.code == "results_expired"
    assert delivered_objects(customer, org, "batch_stale") == {}


def test_a_named_artifact_missing_without_a_reclaim_fails_rather_than_being_skipped(
    wiring: Wiring, local_aws: LocalStack, org: TestOrg, customer: CustomerS3
) -> None:
    # Given a finished batch whose errors object is gone though the batch names it and
    # retention never reclaimed it
    register(wiring.delivery_targets, org, customer)
    batch = finished_batch(org.org_id, "batch_lost")
    assert batch.artifacts is not None and batch.artifacts.errors_key
    wiring.artifacts.delete_many([batch.artifacts.errors_key])
    # When its delivery is attempted
    record = _service(wiring, ArtifactSource(wiring.artifacts)).deliver_batch(batch)
    # Then the target fails with artifacts_missing, never `delivered` without its errors
    assert record is not None and record.state == "failed", record
    assert record.last_error is not None and record.last_error.code == "artifacts_missing"
    assert "errors" in record.last_error.message
    assert set(delivered_objects(customer, org, "batch_lost")) == {"results.jsonl"}
