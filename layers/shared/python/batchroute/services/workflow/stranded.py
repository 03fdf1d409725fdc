"""Batch holds no workflow will settle (docs/batches.md, "A workflow that ends unsettled").

A batch's credit hold is resolved by its workflow: Settle, or HandleFailure's `fail` step. When
that workflow ends without getting there (HandleFailure's retries spent during a settle worker
outage of more than a day, an execution stopped by an operator, a workflow that died after a
cancel), the hold would stay pending, the customer's credit reserved, for good.

The sweeper looks for batch holds still pending once no workflow can still be running on
their batch: `WORKFLOW_SETTLE` after the later of the batch's SLA deadline and its terminal
transition (the longest path the state machine allows after them, services/workflow/
retention_gc.py). For each it puts a `fail` message on the settle queue, with no task token
(no workflow waits on it), which the settle worker runs as HandleFailure would: the batch
`failed` unless it is terminal already, then finalized and settled as far as they go, the
finished items charged once (the ledger settles a hold once), the rest released. A batch's
message is sent at most once an hour (a claim on the batch), so one that cannot be settled
(an error the step logs) is tried again hourly, never once a minute."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from batchroute.clock import Clock, isoformat
from batchroute.domain.batches.record import BatchRecord
from batchroute.domain.batches.states import TERMINAL
from batchroute.observability import logger
from batchroute.services.batches.ports import BatchReader
from batchroute.services.workflow.retention_gc import WORKFLOW_SETTLE
from batchroute.services.workflow.sweeper import OpenHolds
from batchroute.workflow.queues import TaskSender
from batchroute.workflow.tasks import TaskError, unwaited_task

# Every batch has one 24-hour SLA (the spec), so a hold younger than this cannot be stranded yet.
SLA = timedelta(hours=24)
RESEND_EVERY = timedelta(hours=1)
CAUSE = "the batch's workflow ended without settling it; the sweeper settled it"


class StrandedBatches(BatchReader, Protocol):
    """adapters/dynamo/batch_records.py:BatchRecords"""

    def claim_settle_resend(self, batch_id: str, *, at: str, not_since: str) -> bool: ...


def unsettled_until(batch: BatchRecord) -> datetime | None:
    """When no workflow can still settle the batch: `WORKFLOW_SETTLE` after the later of its
    SLA deadline and its terminal transition (None: it has no deadline to count from)."""
    moments = [batch.deadline_at] if batch.deadline_at else []
    if batch.state in TERMINAL and batch.state_changed_at:
        moments.append(batch.state_changed_at)
    if not moments:
        return None
    return max(datetime.fromisoformat(m) for m in moments) + WORKFLOW_SETTLE


def fail_message(batch_id: str) -> str:
    """The settle queue's `fail` task for a batch no workflow waits on (empty task token)."""
    return unwaited_task("fail", batch_id, error=TaskError(Error="WorkflowEnded", Cause=CAUSE))


@dataclass
class StrandedHolds:
    ledger: OpenHolds
    batches: StrandedBatches
    settle_queue: TaskSender
    clock: Clock

    def resend_due(self, *, limit: int = 100) -> list[str]:
        """Send the `fail` step of each batch whose hold no workflow will settle: the ids sent."""
        now = self.clock.now()
        at, not_since = isoformat(now), isoformat(now - RESEND_EVERY)
        sent: list[str] = []
        oldest = isoformat(now - SLA - WORKFLOW_SETTLE)
        for hold in self.ledger.open_holds(oldest, purpose="batch", limit=limit):
            batch = self.batches.get(hold.ref)
            until = unsettled_until(batch) if batch is not None else None
            if batch is None or until is None or until > now:
                continue
            if not self.batches.claim_settle_resend(batch.batch_id, at=at, not_since=not_since):
                continue
            self.settle_queue.send(fail_message(batch.batch_id))
            logger.warning(
                "stranded batch hold: fail step sent",
                extra={"batch_id": batch.batch_id, "org_id": hold.org_id, "state": batch.state},
            )
            sent.append(batch.batch_id)
        return sent
