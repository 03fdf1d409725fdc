from __future__ import annotations

from typing import Any

import pytest

from batchroute.errors import PermanentError, TransientError
from batchroute.workflow.tasks import WorkflowTask, run_task


class RecordingCallbacks:
    def __init__(self) -> None:
        self.succeeded: list[tuple[str, dict[str, Any]]] = []
        self.failed: list[tuple[str, str, str]] = []

    def succeed(self, task_token: str, output: dict[str, Any]) -> None:
        self.succeeded.append((task_token, output))

    def fail(self, task_token: str, *, error: str, cause: str) -> None:
        self.failed.append((task_token, error, cause))


def _task(step: str = "route") -> WorkflowTask:
    return WorkflowTask.model_validate({"step": step, "batch_id": "batch_1", "task_token": "tok"})


def test_success_answers_the_token_with_the_output() -> None:
    callbacks = RecordingCallbacks()
    run_task(_task(), {"route": lambda t: {"lanes": []}}, callbacks)
    assert callbacks.succeeded == [("tok", {"lanes": []})]


def test_permanent_failure_fails_the_task() -> None:
    def broken(_: WorkflowTask) -> dict[str, Any]:
        raise PermanentError("no eligible lane")

    callbacks = RecordingCallbacks()
    run_task(_task(), {"route": broken}, callbacks)
    assert callbacks.failed == [("tok", "PermanentError", "no eligible lane")]
    assert not callbacks.succeeded


def test_transient_failure_propagates_for_redelivery() -> None:
    def flaky(_: WorkflowTask) -> dict[str, Any]:
        raise TransientError("throttled")

    callbacks = RecordingCallbacks()
    with pytest.raises(TransientError):
        run_task(_task(), {"route": flaky}, callbacks)
    assert not callbacks.failed and not callbacks.succeeded


def test_a_step_this_worker_does_not_run_fails_permanently() -> None:
    callbacks = RecordingCallbacks()
    run_task(_task("deliver"), {"route": lambda t: {}}, callbacks)
    assert callbacks.failed[0][1] == "UnknownStep"


def test_a_task_no_workflow_waits_on_is_answered_to_no_one() -> None:
    # Given the sweeper's `fail` task for a batch whose workflow ended (empty task token)
    task = WorkflowTask.model_validate(
        {"step": "fail", "batch_id": "batch_1", "task_token": "", "error": {"Error": "WorkflowEnded"}}
    )
    callbacks = RecordingCallbacks()
    # When it runs to an output
    assert run_task(task, {"fail": lambda t: {"step": "fail", "batch_id": t.batch_id}}, callbacks) is not None
    # Then no token is answered (Step Functions refuses an empty one, and the message would
    # go back to its queue until it dead-lettered)
    assert not callbacks.succeeded and not callbacks.failed


def test_a_permanent_failure_of_a_task_no_workflow_waits_on_goes_back_to_its_queue() -> None:
    def broken(_: WorkflowTask) -> dict[str, Any]:
        raise PermanentError("no pipeline")

    task = WorkflowTask.model_validate(
        {"step": "check_file", "batch_id": "", "task_token": "", "file_id": "f"}
    )
    callbacks = RecordingCallbacks()
    with pytest.raises(PermanentError):
        run_task(task, {"check_file": broken}, callbacks)
    assert not callbacks.failed
