"""The workflow's Deliver step hands terminal batches to webhook delivery, and only those."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from batchroute.clock import FixedClock
from batchroute.domain.batches.record import BatchRecord
from batchroute.domain.batches.states import BatchState
from batchroute.domain.delivery.webhooks import WebhookDeliveryRecord
from batchroute.services.workflow.steps import BatchWorkflow
from batchroute.workflow.tasks import WorkflowTask


class Records:
    def __init__(self, batch: BatchRecord | None) -> None:
        self.batch = batch
        self.steps: list[str] = []

    def record_step(self, batch_id: str, step: str, at: str) -> bool:
        self.steps.append(step)
        return self.batch is not None

    def get(self, batch_id: str) -> BatchRecord | None:
        return self.batch

    def transition(
        self, batch_id: str, target: BatchState, *, at: str, extra: dict[str, object] | None = None
    ) -> bool:
        return False


class Webhooks:
    def __init__(self, answer: WebhookDeliveryRecord | None) -> None:
        self.answer = answer
        self.calls: list[tuple[BatchRecord, datetime | None]] = []

    def deliver_batch_event(
        self, batch: BatchRecord, *, now: datetime | None = None
    ) -> WebhookDeliveryRecord | None:
        self.calls.append((batch, now))
        return self.answer


TASK = WorkflowTask(step="deliver", batch_id="batch_1", task_token="tok")
DELIVERY = WebhookDeliveryRecord(
    delivery_id="whd_1",
    org_id="org_1",
    event_id="evt_1",
    event_type="batch.completed",
    url="https://hooks.example.com",
    status="failed",
    attempt_count=1,
    created_at="2026-01-01T00:00:00Z",
    updated_at="2026-01-01T00:00:00Z",
    payload="{}",
    secret_source="org",
    secret_sealed="c2VhbGVk",
)


def _batch(state: Any) -> BatchRecord:
    return BatchRecord(batch_id="batch_1", org_id="org_1", state=state, created_at="2026-01-01T00:00:00Z")


@pytest.mark.parametrize("state", ["completed", "failed", "canceled", "expired"])
def test_a_terminal_batch_is_delivered_and_the_step_reports_it(state: str) -> None:
    clock = FixedClock()
    webhooks = Webhooks(DELIVERY)
    workflow = BatchWorkflow(Records(_batch(state)), clock, webhooks=webhooks)
    output = workflow.deliver(TASK)
    assert output == {
        "step": "deliver",
        "batch_id": "batch_1",
        "webhook": {"delivery_id": "whd_1", "status": "failed", "attempt_count": 1},
    }
    assert webhooks.calls == [(_batch(state), clock.now())]


@pytest.mark.parametrize("state", ["priced", "running", "finalizing"])
def test_a_non_terminal_batch_only_journals(state: str) -> None:
    webhooks = Webhooks(DELIVERY)
    records = Records(_batch(state))
    output = BatchWorkflow(records, FixedClock(), webhooks=webhooks).deliver(TASK)
    assert output == {"step": "deliver", "batch_id": "batch_1"}
    assert webhooks.calls == [] and records.steps == ["deliver"]


def test_no_webhook_configured_or_no_batch_still_succeeds() -> None:
    polled = BatchWorkflow(Records(_batch("completed")), FixedClock(), Webhooks(None))
    assert polled.deliver(TASK) == {"step": "deliver", "batch_id": "batch_1"}
    missing = BatchWorkflow(Records(None), FixedClock(), Webhooks(DELIVERY))
    assert missing.deliver(TASK) == {"step": "deliver", "batch_id": "batch_1"}
    unwired = BatchWorkflow(Records(_batch("completed")), FixedClock())
    assert unwired.deliver(TASK) == {"step": "deliver", "batch_id": "batch_1"}
