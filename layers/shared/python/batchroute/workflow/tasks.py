"""The message a workflow task hands to a worker over SQS, and how the worker answers it.

Each Step Functions task sends `{step, batch_id, task_token, ...}` with
`sqs:sendMessage.waitForTaskToken`; the worker runs the step and reports success or
failure with the task token. Messages may repeat, so every step is idempotent, and a
token that was already answered counts as done.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Literal, NotRequired, Protocol, TypedDict

from pydantic import BaseModel, ConfigDict

from batchroute.errors import PermanentError
from batchroute.money import MoneyView

# `deliver_bucket` and `check_file` are messages no workflow task waits on (their task_token is
# empty: `unwaited_task`): a bucket delivery's retry or redeliver (services/delivery/buckets.py),
# and the checks of a confirmed large upload (`file_id`; services/batches/files.py); so is the
# `fail` the sweep sends for a batch whose workflow ended unsettled (services/workflow/stranded.py).
# They never answer.
StepName = Literal[
    "intake", "route", "run_lane", "finalize", "settle", "fail", "deliver", "deliver_bucket", "check_file"
]


class LaneRef(BaseModel):
    """The lane a RunLane task runs: the Map's item, one of the lanes Route answered."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    lane_key: str = ""


class TaskError(BaseModel):
    """What a `Catch` put on the failure path (`ResultPath: $.error`): Step Functions' own
    `{Error, Cause}`; any other key is kept, so a re-enqueued message carries it on."""

    model_config = ConfigDict(extra="allow", frozen=True)

    Error: str | None = None
    Cause: str | None = None

    def describe(self) -> str:
        """One line for the batch's `execution_summary.latest_error`."""
        if not self.model_fields_set and not self.model_extra:
            return "workflow failed"
        name = self.Error or "WorkflowError"
        cause = (self.Cause or "").strip()
        return f"{name}: {cause}"[:1000] if cause else name


class WorkflowTask(BaseModel):
    """The task message, parsed once at the handler's edge (batchroute/worker.py)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    step: StepName
    batch_id: str
    task_token: str
    lane: LaneRef | None = None  # run_lane only
    error: TaskError | None = None  # fail only
    file_id: str | None = None  # check_file only

    def lane_key(self) -> str:
        return self.lane.lane_key if self.lane is not None else ""

    def failure(self) -> str:
        """The error that ended the workflow, as `latest_error` says it."""
        return self.error.describe() if self.error is not None else "workflow failed"


def unwaited_task(
    step: StepName, batch_id: str = "", *, error: TaskError | None = None, file_id: str | None = None
) -> str:
    """The message body of a task no workflow waits on (an empty task token): sent by the
    service itself, answered to no one (`run_task`)."""
    task = WorkflowTask(step=step, batch_id=batch_id, task_token="", error=error, file_id=file_id)
    return task.model_dump_json(exclude_none=True)


# -- what a step answers: the JSON the next state reads (the ASL's ResultPath) -------------------
class LaneKey(TypedDict):
    lane_key: str


class RouteOutput(TypedDict):
    """Route: the lanes the Map runs, one RunLane each."""

    lanes: list[LaneKey]


class LaneOutput(TypedDict):
    """RunLane: the lane's item counts, the lanes it failed over to included."""

    lane_key: str
    completed: int
    failed: int
    canceled: int


class IntakeOutput(TypedDict):
    step: str
    batch_id: str
    item_count: int
    chunk_count: int


class FinalizeOutput(TypedDict):
    step: str
    batch_id: str
    result_count: int
    error_count: int


class SettleOutput(TypedDict):
    step: str
    batch_id: str
    charged: MoneyView
    released: MoneyView
    replayed: bool


class FailOutput(TypedDict):
    """HandleFailure: what finalizing and settling the failed batch came to."""

    step: str
    batch_id: str
    finalize_error: NotRequired[str]
    settle_error: NotRequired[str]
    charged: NotRequired[MoneyView]
    released: NotRequired[MoneyView]


class WebhookSent(TypedDict):
    delivery_id: str
    status: str
    attempt_count: int


class BucketsPushed(TypedDict):
    state: str
    attempts: int


class DeliverOutput(TypedDict):
    step: str
    batch_id: str
    webhook: NotRequired[WebhookSent]
    bucket_delivery: NotRequired[BucketsPushed]


StepOutput = (
    RouteOutput | LaneOutput | IntakeOutput | FinalizeOutput | SettleOutput | FailOutput | DeliverOutput
)


# A step that returns None handed its work on (RunLane re-enqueued itself): no answer yet.
Step = Callable[[WorkflowTask], StepOutput | None]


class TaskCallbacks(Protocol):
    def succeed(self, task_token: str, output: StepOutput) -> None: ...

    def fail(self, task_token: str, *, error: str, cause: str) -> None: ...


class UnknownStep(PermanentError):
    pass


def run_task(task: WorkflowTask, steps: Mapping[str, Step], callbacks: TaskCallbacks) -> StepOutput | None:
    """Run one step. A permanent failure fails the workflow task; anything else propagates
    so SQS redelivers the message (and, after maxReceiveCount, dead-letters it). A task no
    workflow waits on (empty token: the sweeper's) is answered to no one."""
    step = steps.get(task.step)
    try:
        if step is None:
            raise UnknownStep(f"this worker does not run step {task.step!r}")
        output = step(task)
    except PermanentError as exc:
        if not task.task_token:
            raise
        callbacks.fail(task.task_token, error=type(exc).__name__, cause=str(exc)[:32000])
        return None
    if output is None:
        return None
    if task.task_token:
        callbacks.succeed(task.task_token, output)
    return output
