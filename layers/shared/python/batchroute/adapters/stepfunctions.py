"""Step Functions: start executions and answer task tokens."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from batchroute.adapters.aws import client, shared_client
from batchroute.observability import logger
from batchroute.workflow.tasks import StepOutput

# A token that was already answered (a repeated message) or whose task timed out.
_SETTLED_TOKEN_ERRORS = frozenset({"TaskTimedOut", "InvalidToken", "TaskDoesNotExist"})


@dataclass(eq=False, repr=False)
class StepFunctionsCallbacks:
    sfn: Any = shared_client("stepfunctions")

    def succeed(self, task_token: str, output: StepOutput) -> None:
        self._answer(self.sfn.send_task_success, taskToken=task_token, output=json.dumps(output))

    def fail(self, task_token: str, *, error: str, cause: str) -> None:
        self._answer(self.sfn.send_task_failure, taskToken=task_token, error=error[:256], cause=cause)

    @staticmethod
    def _answer(call: Any, **kwargs: Any) -> None:
        try:
            call(**kwargs)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code not in _SETTLED_TOKEN_ERRORS:
                raise
            logger.info("task token already settled", extra={"error_code": code})


def start_execution(*, state_machine_arn: str, name: str, payload: dict[str, Any]) -> str:
    """Start the workflow; the execution name makes a repeated start a no-op."""
    sfn = client("stepfunctions")
    try:
        response = sfn.start_execution(
            stateMachineArn=state_machine_arn, name=name, input=json.dumps(payload)
        )
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ExecutionAlreadyExists":
            raise
        return f"{state_machine_arn.replace(':stateMachine:', ':execution:')}:{name}"
    return str(response["executionArn"])


@dataclass(frozen=True)
class BatchExecutions:
    """Starts a batch's workflow on the state machine, the execution named after the batch
    (services/batches/launch.py WorkflowStarter)."""

    state_machine_arn: str

    def __call__(self, *, batch_id: str) -> str:
        return start_execution(
            state_machine_arn=self.state_machine_arn, name=batch_id, payload={"batch_id": batch_id}
        )
