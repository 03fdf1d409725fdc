"""Which batch holds the sweeper hands to the settle worker (services/workflow/stranded.py):
those no workflow can still settle, each at most once an hour."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from batchroute.clock import FixedClock, isoformat
from batchroute.domain.batches.record import BatchRecord
from batchroute.domain.billing.ledger import Purpose, Reservation
from batchroute.money import Money
from batchroute.services.workflow.retention_gc import WORKFLOW_SETTLE
from batchroute.services.workflow.stranded import StrandedHolds, unsettled_until
from batchroute.workflow.tasks import WorkflowTask

T0 = datetime(2026, 3, 1, tzinfo=UTC)  # the batches' creation
DEADLINE = T0 + timedelta(hours=24)


def batch(batch_id: str, state: str = "running", changed: datetime = T0) -> BatchRecord:
    return BatchRecord.from_mapping(
        {
            "batch_id": batch_id,
            "org_id": "org_a",
            "state": state,
            "created_at": isoformat(T0),
            "deadline_at": isoformat(DEADLINE),
            "state_changed_at": isoformat(changed),
        }
    )


class FakeLedger:
    def __init__(self, refs: list[str]) -> None:
        self.refs = refs
        self.asked: list[tuple[str, Purpose | None, int]] = []

    def open_holds(
        self, older_than_iso: str, *, purpose: Purpose | None = None, limit: int = 100
    ) -> list[Reservation]:
        self.asked.append((older_than_iso, purpose, limit))
        return [
            Reservation(f"res_{ref}", "org_a", "batch", ref, Money.usd("1"), "pending", isoformat(T0))
            for ref in self.refs
        ]


class FakeBatches:
    def __init__(self, *batches: BatchRecord) -> None:
        self.batches = {b.batch_id: b for b in batches}
        self.claims: dict[str, str] = {}

    def get(self, batch_id: str) -> BatchRecord | None:
        return self.batches.get(batch_id)

    def claim_settle_resend(self, batch_id: str, *, at: str, not_since: str) -> bool:
        if batch_id in self.claims and self.claims[batch_id] >= not_since:
            return False
        self.claims[batch_id] = at
        return True


class FakeQueue:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def send(self, body: str, *, delay_seconds: int = 0) -> None:
        self.sent.append(body)


def test_no_workflow_can_settle_a_batch_once_settle_time_passed_its_deadline_or_its_end() -> None:
    assert unsettled_until(batch("b")) == DEADLINE + WORKFLOW_SETTLE
    late = DEADLINE + timedelta(hours=5)
    assert unsettled_until(batch("b", state="expired", changed=late)) == late + WORKFLOW_SETTLE
    assert unsettled_until(batch("b", state="canceled", changed=T0)) == DEADLINE + WORKFLOW_SETTLE


def test_only_holds_of_batches_no_workflow_can_settle_are_sent_each_once_an_hour() -> None:
    # Given four open batch holds: a batch past its settle time, one ended late whose settle
    # time is still ahead, one whose record is gone, and a second one past its settle time
    ended_late = DEADLINE + timedelta(days=2)
    batches = FakeBatches(batch("old"), batch("late", state="failed", changed=ended_late), batch("old2"))
    ledger, queue = FakeLedger(["old", "late", "gone", "old2"]), FakeQueue()
    clock = FixedClock(DEADLINE + WORKFLOW_SETTLE + timedelta(seconds=1))
    stranded = StrandedHolds(ledger, batches, queue, clock)
    # When the sweeper looks
    sent = stranded.resend_due()
    # Then it asked for batch holds older than the SLA and the settle time, and sent the
    # `fail` step (no task token, the cause said) of the two past their settle time
    assert ledger.asked == [(isoformat(clock.now() - timedelta(hours=24) - WORKFLOW_SETTLE), "batch", 100)]
    assert sent == ["old", "old2"]
    tasks = [WorkflowTask.model_validate(json.loads(body)) for body in queue.sent]
    assert [(t.step, t.batch_id, t.task_token) for t in tasks] == [("fail", "old", ""), ("fail", "old2", "")]
    assert "sweeper" in tasks[0].failure()
    # And within the hour nothing is sent again; an hour later, again (not settled yet)
    clock.advance(minutes=59)
    assert stranded.resend_due() == []
    clock.advance(minutes=2)
    assert stranded.resend_due() == ["old", "old2"]
