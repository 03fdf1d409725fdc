"""The batch workflow's steps, grouped by the worker that runs them.

Each step journals itself on the batch (idempotent: a repeated message rewrites the same
entry) and returns what the next state needs. The route step hands the Map state the
batch's planned lanes.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Protocol

from batchroute.clock import Clock, isoformat
from batchroute.domain.batch_states import TERMINAL, BatchState
from batchroute.errors import PermanentError
from batchroute.workflow.tasks import Step, StepOutput, WorkflowTask


class BatchNotFound(PermanentError):
    pass


class WorkflowRecords(Protocol):
    def record_step(self, batch_id: str, step: str, at: str) -> bool: ...

    def get(self, batch_id: str) -> dict[str, object] | None: ...

    def transition(
        self, batch_id: str, target: BatchState, *, at: str, extra: dict[str, object] | None = None
    ) -> bool: ...


class BatchEventDelivery(Protocol):
    """services/webhook_delivery.py:WebhookDelivery"""

    def deliver_batch_event(
        self, batch: Mapping[str, Any], *, now: datetime | None = None
    ) -> dict[str, Any] | None: ...


class BatchWorkflow:
    def __init__(
        self, records: WorkflowRecords, clock: Clock, webhooks: BatchEventDelivery | None = None
    ) -> None:
        self.records = records
        self.clock = clock
        self.webhooks = webhooks

    def _journal(self, task: WorkflowTask, *, required: bool = True) -> bool:
        recorded = self.records.record_step(task.batch_id, task.step, isoformat(self.clock.now()))
        if required and not recorded:
            raise BatchNotFound(f"batch {task.batch_id} does not exist")
        return recorded

    def route(self, task: WorkflowTask) -> StepOutput:
        self._journal(task)
        batch = self.records.get(task.batch_id) or {}
        lanes = batch.get("lanes") or []
        return {"lanes": lanes}

    def journal_only(self, task: WorkflowTask) -> StepOutput:
        self._journal(task)
        return {"step": task.step, "batch_id": task.batch_id}

    def fail(self, task: WorkflowTask) -> StepOutput:
        """The failure path: mark the batch failed with the error that ended the workflow.

        Tolerates a missing batch, so a broken start still reaches the end of the failure path."""
        if self._journal(task, required=False):
            self.records.transition(
                task.batch_id,
                "failed",
                at=isoformat(self.clock.now()),
                extra={"execution_summary": {"latest_error": describe_error(task.error)}},
            )
        return {"step": task.step, "batch_id": task.batch_id}

    def deliver(self, task: WorkflowTask) -> StepOutput:
        """The terminal-state webhook: created once, first attempt made here; failed attempts
        are retried by the sweeper, so this step never waits on the receiver."""
        self._journal(task, required=False)
        output: StepOutput = {"step": task.step, "batch_id": task.batch_id}
        batch = self.records.get(task.batch_id) if self.webhooks is not None else None
        if self.webhooks is not None and batch is not None and batch.get("state") in TERMINAL:
            delivery = self.webhooks.deliver_batch_event(batch, now=self.clock.now())
            if delivery is not None:
                output["webhook"] = {
                    "delivery_id": delivery["delivery_id"],
                    "status": delivery["status"],
                    "attempt_count": delivery["attempt_count"],
                }
        return output

    def router_steps(self) -> Mapping[str, Step]:
        return {"route": self.route, "run_lane": self.journal_only}

    def settle_steps(self) -> Mapping[str, Step]:
        return {"finalize": self.journal_only, "settle": self.journal_only, "fail": self.fail}

    def deliver_steps(self) -> Mapping[str, Step]:
        return {"deliver": self.deliver}


def describe_error(error: dict[str, object] | None) -> str:
    """A Step Functions catch result ({Error, Cause}) as one line for `latest_error`."""
    if not error:
        return "workflow failed"
    name = str(error.get("Error") or "WorkflowError")
    cause = str(error.get("Cause") or "").strip()
    return f"{name}: {cause}"[:1000] if cause else name
