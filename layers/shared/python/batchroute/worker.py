"""The shape every SQS-triggered workflow worker shares: a Lambda handler that runs one
workflow step per record and reports partial batch failures, so only failed records are
redelivered (and dead-lettered after maxReceiveCount)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from batchroute.adapters.stepfunctions import StepFunctionsCallbacks
from batchroute.observability import invocation_keys, lambda_logging, metrics, tracer
from batchroute.services.workflow import time_budget
from batchroute.workflow.tasks import Step, TaskCallbacks, WorkflowTask, run_task

LambdaHandler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]


def workflow_task_handler(steps: Mapping[str, Step], callbacks: TaskCallbacks | None = None) -> LambdaHandler:
    processor = BatchProcessor(event_type=EventType.SQS)
    answer = callbacks or StepFunctionsCallbacks()

    def record_handler(record: SQSRecord, lambda_context: LambdaContext | None = None) -> None:
        task = WorkflowTask.model_validate_json(record.body)
        with (
            invocation_keys(batch_id=task.batch_id, step=task.step),
            time_budget.invocation(lambda_context),  # steps that budget their time read it
        ):
            run_task(task, steps, answer)
        metrics.add_metric(name="WorkflowStepsRun", unit=MetricUnit.Count, value=1)

    @lambda_logging()
    @metrics.log_metrics
    @tracer.capture_lambda_handler(capture_response=False)
    def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        return dict(
            process_partial_response(
                event=event, record_handler=record_handler, processor=processor, context=context
            )
        )

    return handler
