"""The sweeper's webhook retries have a time budget (services/delivery/webhooks.py,
RETRY_BUDGET_SECONDS): once it is spent, `retry_due` starts no new attempt and leaves the
remaining deliveries due, unclaimed, for the next sweep, so the sweeper's other duties
(billing webhooks, bucket deliveries, retention, schedules, auto top-ups) always run.

On moto, with receivers that each hold an attempt to the sender's 10 s deadline: a fake
sender moves an injected monotonic clock instead of taking the time (no sleeping)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from batchroute.clock import FixedClock, isoformat
from batchroute.domain.delivery.webhooks import AttemptOutcome, delivery_id_for
from batchroute.services.delivery.webhooks import RETRY_BUDGET_SECONDS, WebhookDelivery
from batchroute.services.workflow.retention_gc import ReclaimReport
from tests.integration.principals import TestOrg
from tests.integration.test_webhook_delivery import clock as clock  # the fixtures
from tests.integration.test_webhook_delivery import deliveries, put_batch, set_org_webhook
from tests.integration.test_webhook_delivery import org as org
from tests.integration.test_webhook_delivery import service as service
from tests.unit.test_delivery_targets import idle_sweeper

ATTEMPT_SECONDS = 10.0  # the sender's deadline: the longest an attempt can take
BATCHES = [f"batch_slow_{n}" for n in range(5)]


class Monotonic:
    """Seconds that move only when a fake receiver takes its time."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.lock = threading.Lock()

    def __call__(self) -> float:
        with self.lock:
            return self.now

    def advance(self, seconds: float) -> None:
        with self.lock:
            self.now += seconds


class SlowReceivers:
    """Every receiver holds its attempt for the whole deadline, then answers `status`."""

    def __init__(self, monotonic: Monotonic, status: int = 200) -> None:
        self.monotonic, self.status = monotonic, status
        self.sent: list[str] = []

    def send(self, url: str, raw_body: bytes, headers: Mapping[str, str]) -> AttemptOutcome:
        self.sent.append(url)
        self.monotonic.advance(ATTEMPT_SECONDS)
        return AttemptOutcome(self.status, None, int(ATTEMPT_SECONDS * 1000))


def _due_deliveries(service: WebhookDelivery, org: TestOrg, clock: FixedClock) -> list[str]:
    """Five deliveries whose first attempt failed (503), their retry now due."""
    set_org_webhook(org.org_id, "https://hooks.example.com/slow")
    failing = replace(service, sender=SlowReceivers(Monotonic(), status=503))
    for batch_id in BATCHES:
        first = failing.deliver_batch_event(put_batch(org.org_id, batch_id))
        assert first is not None and first.status == "failed"
    clock.advance(seconds=5)
    return [delivery_id_for(batch_id, "batch.completed") for batch_id in BATCHES]


def test_retry_due_starts_no_attempt_once_its_budget_is_spent(
    service: WebhookDelivery, org: TestOrg, clock: FixedClock
) -> None:
    # Given five due retries, each receiver holding its attempt to the 10 s deadline
    ids = _due_deliveries(service, org, clock)
    monotonic = Monotonic()
    slow = SlowReceivers(monotonic)
    budgeted = replace(service, sender=slow, monotonic=monotonic, workers=1)
    assert budgeted.retry_budget_seconds == RETRY_BUDGET_SECONDS == 20
    # When the sweeper retries
    started = monotonic()
    report = budgeted.retry_due()
    # Then it made attempts only while its budget lasted (two of 10 s), and stopped
    assert len(slow.sent) == 2 and monotonic() - started == 2 * ATTEMPT_SECONDS
    assert len(report.attempted) == 2 and report.succeeded == report.attempted
    assert sorted(report.attempted + report.deferred) == sorted(ids) and report.skipped == []
    assert report.as_dict()["deferred"] == report.deferred
    # And the three it did not reach are untouched: unclaimed, one attempt made, still due
    store = deliveries()
    due_now = {delivery_id for _, delivery_id in store.due(isoformat(clock.now()), 100)}
    assert set(report.deferred) <= due_now and not set(report.attempted) & due_now
    for batch_id in BATCHES:
        delivery = store.get(batch_id, delivery_id_for(batch_id, "batch.completed"))
        assert delivery is not None
        if delivery.delivery_id in report.deferred:
            assert (delivery.status, delivery.attempt_count, delivery.lease_until) == ("failed", 1, None)
    # And the next sweep (a fresh budget) makes them
    again = budgeted.retry_due()
    assert len(again.attempted) == 2 and len(again.deferred) == 1
    last = budgeted.retry_due()
    assert len(last.attempted) == 1 and last.deferred == []
    assert sorted(report.attempted + again.attempted + last.attempted) == sorted(ids)


def test_a_sweep_with_slow_receivers_still_runs_its_other_duties(
    service: WebhookDelivery, org: TestOrg, clock: FixedClock
) -> None:
    # Given five due retries to receivers that hold every attempt to its deadline
    _due_deliveries(service, org, clock)
    monotonic = Monotonic()
    webhooks = replace(service, sender=SlowReceivers(monotonic), monotonic=monotonic, workers=1)
    ran: list[str] = []

    class Duty:
        """Billing webhooks, bucket deliveries and retention, recording that they ran."""

        def retry_due(self) -> Any:
            ran.append("billing_webhooks")
            return SimpleNamespace(attempted=[], as_dict=dict)

        def enqueue_due(self) -> Any:
            ran.append("bucket_deliveries")
            return SimpleNamespace(queued=[], as_dict=dict)

        def collect(self) -> ReclaimReport:
            ran.append("retention")
            return ReclaimReport()

    sweeper = idle_sweeper(
        webhooks=webhooks, clock=clock, billing_webhooks=Duty(), bucket_deliveries=Duty(), retention=Duty()
    )
    # When the sweep runs
    started = monotonic()
    outcome = sweeper.sweep()
    # Then its webhook retries took at most the budget and one attempt, left the rest due,
    # and every later duty ran
    assert monotonic() - started <= RETRY_BUDGET_SECONDS + ATTEMPT_SECONDS
    assert len(outcome["webhooks"]["attempted"]) == 2 and len(outcome["webhooks"]["deferred"]) == 3
    assert ran == ["billing_webhooks", "bucket_deliveries", "retention"]
