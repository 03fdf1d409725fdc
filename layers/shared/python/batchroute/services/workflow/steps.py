"""The batch workflow's steps, grouped by the worker that runs them.

Each step journals itself on the batch (idempotent: a repeated message rewrites the same
entry), runs its part of the pipeline and returns what the next state needs:

- intake (router): a batch created from an input file reads, checks and chunks it here
  (`services/workflow/intake.py`); a no-op for a batch whose items create already wrote;
- route (router): lane records from the quote's plan; the Map gets `{lanes: [{lane_key}]}`
  (`services/workflow/planning.py`);
- run_lane (router): one lane's chunks through its provider, with failover; None (no
  answer yet) when the lane continues in a re-enqueued message (`services/workflow/execution.py`);
- finalize (settle): results.jsonl / errors.jsonl in input order, in slices over as many
  invocations as the batch needs (`services/workflow/finalize.py`);
- settle (settle): charge actual usage, release the rest, receipt (`services/workflow/settlement.py`);
- fail (settle, HandleFailure): the batch `failed`, then finalize and settle as far as they
  go, so finished items get artifacts and are charged and the rest is released;
- deliver (webhook): the terminal-state webhook, then the push of the artifacts to the org's
  delivery targets (services/delivery/buckets.py);
- deliver_bucket (webhook): a bucket delivery's retry or redeliver; no workflow task waits
  on it (empty task token), so it never answers;
- check_file (router): the checks of a confirmed large signed upload (docs/files.md), on the
  route queue; no workflow task waits on it either.

Every step is idempotent: messages repeat (docs/batches.md, Lifecycle).
"""

from __future__ import annotations

import json
from dataclasses import KW_ONLY, dataclass
from datetime import datetime, timedelta
from typing import Protocol

from batchroute.clock import Clock, isoformat
from batchroute.domain.batches.record import BatchRecord
from batchroute.domain.batches.states import TERMINAL
from batchroute.domain.delivery.webhooks import WebhookDeliveryRecord
from batchroute.errors import PermanentError
from batchroute.observability import logger
from batchroute.services.batches.ports import BatchStore
from batchroute.services.workflow.execution import LaneExecutor
from batchroute.services.workflow.finalize import Finalizer
from batchroute.services.workflow.planning import LanePlanner
from batchroute.services.workflow.settlement import Settlement
from batchroute.workflow.queues import TaskSender
from batchroute.workflow.tasks import (
    DeliverOutput,
    FailOutput,
    FinalizeOutput,
    IntakeOutput,
    LaneOutput,
    RouteOutput,
    SettleOutput,
    WorkflowTask,
)


class InputIntake(Protocol):
    """services/workflow/intake.py:Intake"""

    def run(self, batch: BatchRecord) -> IntakeOutput: ...


@dataclass(frozen=True)
class Pipeline:
    """The services the batch steps run (built in batchroute/wiring/workflow.py)."""

    planner: LanePlanner
    lanes: LaneExecutor
    finalizer: Finalizer
    settlement: Settlement
    intake: InputIntake
    continuations: TaskSender | None = None


class BatchNotFound(PermanentError):
    pass


class WorkflowRecords(BatchStore, Protocol):
    def record_step(self, batch_id: str, step: str, at: str) -> bool: ...


class BatchEventDelivery(Protocol):
    """services/delivery/webhooks.py:WebhookDelivery"""

    def deliver_batch_event(
        self, batch: BatchRecord, *, now: datetime | None = None
    ) -> WebhookDeliveryRecord | None: ...


class BucketEventDelivery(Protocol):
    """services/delivery/buckets.py:BucketDelivery"""

    def deliver_batch(
        self, batch: BatchRecord, *, now: datetime | None = None
    ) -> BucketDeliveryState | None: ...

    def run_due(self, batch_id: str, *, now: datetime | None = None) -> BucketDeliveryState | None: ...


class BucketDeliveryState(Protocol):
    @property
    def state(self) -> str: ...

    @property
    def attempts(self) -> int: ...


class PipelineNotWired(PermanentError):
    pass


class QueuedFileChecks(Protocol):
    def check_queued(self, file_id: str) -> object: ...


@dataclass(eq=False)
class BatchWorkflow:
    records: WorkflowRecords
    clock: Clock
    webhooks: BatchEventDelivery | None = None
    _: KW_ONLY
    pipeline: Pipeline | None = None
    buckets: BucketEventDelivery | None = None
    files: QueuedFileChecks | None = None
    # a failed batch goes on the retention GC's index due this long after (docs/retention.md)
    retention_grace: timedelta = timedelta(hours=72)

    def _pipeline(self) -> Pipeline:
        if self.pipeline is None:
            raise PipelineNotWired("this worker has no batch pipeline")
        return self.pipeline

    def _batch(self, task: WorkflowTask) -> BatchRecord:
        batch = self.records.get(task.batch_id)
        if batch is None:
            raise BatchNotFound(f"batch {task.batch_id} does not exist")
        return batch

    def _journal(self, task: WorkflowTask, *, required: bool = True) -> bool:
        recorded = self.records.record_step(task.batch_id, task.step, isoformat(self.clock.now()))
        if required and not recorded:
            raise BatchNotFound(f"batch {task.batch_id} does not exist")
        return recorded

    def route(self, task: WorkflowTask) -> RouteOutput:
        self._journal(task)
        return self._pipeline().planner.route(self._batch(task))

    def run_lane(self, task: WorkflowTask) -> LaneOutput | None:
        self._journal(task)
        return self._pipeline().lanes.run(task, self._batch(task))

    def intake(self, task: WorkflowTask) -> IntakeOutput:
        self._journal(task)
        return self._pipeline().intake.run(self._batch(task))

    def _finalized(self, task: WorkflowTask, batch: BatchRecord) -> FinalizeOutput | None:
        """Finalize as far as this invocation's time goes; None after re-enqueueing the task
        (same token) when the work goes on in another invocation."""
        pipeline = self._pipeline()
        output = pipeline.finalizer.finalize(batch)
        if output is None:
            if pipeline.continuations is None:
                raise PipelineNotWired("this worker cannot re-enqueue a step (no settle queue configured)")
            pipeline.continuations.send(json.dumps(task.model_dump(mode="json")))
        return output

    def finalize(self, task: WorkflowTask) -> FinalizeOutput | None:
        self._journal(task)
        return self._finalized(task, self._batch(task))

    def settle(self, task: WorkflowTask) -> SettleOutput | None:
        self._journal(task)
        batch = self._batch(task)
        if batch.lane_tallies is None:  # Finalize did not run (or not to the end): do it now
            if self._finalized(task, batch) is None:
                return None
            batch = self._batch(task)
        return self._pipeline().settlement.settle(batch)

    def fail(self, task: WorkflowTask) -> FailOutput | None:
        """The failure path: mark the batch failed with the error that ended the workflow,
        then finalize and settle it, so the items that finished get their artifacts and are
        charged, and the rest of the reservation is released. Finalize is chunked like the
        Finalize step: the message is re-enqueued until the artifacts are complete.

        The batch goes on the retention GC's index first, due at the end of the grace window
        (docs/retention.md), as Finalize would put it: its bytes must go even when finalize
        never gets through here (an error that outlasts the step, a permanent one).

        Tolerates a missing batch, so a broken start still reaches the end of the failure path."""
        output: FailOutput = {"step": task.step, "batch_id": task.batch_id}
        if not self._journal(task, required=False):
            return output
        moment = self.clock.now()
        now = isoformat(moment)
        self.records.schedule_reclaim(task.batch_id, review_at=isoformat(moment + self.retention_grace))
        self.records.transition(
            task.batch_id,
            "failed",
            at=now,
            extra={"execution_summary": {"latest_error": task.failure()}, "completed_at": now},
        )
        if self.pipeline is None:
            return output
        try:
            if self._finalized(task, self._batch(task)) is None:
                return None
        except PermanentError as exc:
            logger.warning("failed batch could not be finalized", extra={"error": str(exc)[:500]})
            output["finalize_error"] = str(exc)[:1000]
        try:
            settled = self.pipeline.settlement.settle(self._batch(task))
        except PermanentError as exc:
            logger.warning("failed batch could not be settled", extra={"error": str(exc)[:500]})
            output["settle_error"] = str(exc)[:1000]
        else:
            output["charged"] = settled["charged"]
            output["released"] = settled["released"]
        return output

    def deliver(self, task: WorkflowTask) -> DeliverOutput:
        """The terminal-state webhook, then the artifacts to the org's delivery targets: each
        created once, its first attempt made here; failed attempts are retried later (the
        sweeper), so this step never waits on a receiver or a bucket that refuses."""
        self._journal(task, required=False)
        output: DeliverOutput = {"step": task.step, "batch_id": task.batch_id}
        wired = self.webhooks is not None or self.buckets is not None
        batch = self.records.get(task.batch_id) if wired else None
        if batch is None or batch.state not in TERMINAL:
            return output
        if self.webhooks is not None:
            delivery = self.webhooks.deliver_batch_event(batch, now=self.clock.now())
            if delivery is not None:
                output["webhook"] = {
                    "delivery_id": delivery.delivery_id,
                    "status": delivery.status,
                    "attempt_count": delivery.attempt_count,
                }
        if self.buckets is not None:
            pushed = self.buckets.deliver_batch(batch, now=self.clock.now())
            if pushed is not None:
                output["bucket_delivery"] = {"state": pushed.state, "attempts": pushed.attempts}
        return output

    def deliver_bucket(self, task: WorkflowTask) -> None:
        """A bucket delivery's owed attempt (retry or redeliver). Returns None: no workflow
        task waits on this message, so nothing answers it."""
        if self.buckets is not None:
            self.buckets.run_due(task.batch_id, now=self.clock.now())

    def check_file(self, task: WorkflowTask) -> None:
        """A confirmed large upload's checks (FileService.check_queued). Returns None: no
        workflow task waits on this message."""
        if self.files is None or not task.file_id:
            raise PipelineNotWired("this worker does not check files")
        self.files.check_queued(task.file_id)
