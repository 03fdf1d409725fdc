"""The failure path outlasting an outage of its own worker: HandleFailure runs on the settle
queue, like the Finalize and Settle it takes over from, so a settle worker that cannot answer
(a bad deploy, an S3 outage dead-lettering its messages) times out HandleFailure too. Its
Retry sends the `fail` step again until the worker answers; the batch then ends failed,
finalized and settled, its reservation resolved once (moto runs the state machine as
deployed, with the task timeouts cut to 2 s and the retries' waits to 1 s)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import boto3

from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.clock import FixedClock
from batchroute.config import get_settings
from batchroute.services.workflow.sweeper import expire_overdue_batches
from batchroute_tools.local.poller import QueuePoller
from tests.faults.harness import (
    AwsFault,
    Handler,
    Pipeline,
    mixed_items,
    run_and_check,
    s3_path,
    shorten_task_timeout,
)


def retry_sooner(pipeline: Pipeline, state: str, seconds: int = 1) -> None:
    """The state machine as deployed, with the waits of `state`'s retriers cut to `seconds`
    (their errors and attempts as they are)."""
    sfn = boto3.client("stepfunctions", region_name=pipeline.stack.region)
    arn = pipeline.stack.state_machine_arn
    definition = json.loads(sfn.describe_state_machine(stateMachineArn=arn)["definition"])
    for retrier in definition["States"][state].get("Retry", []):
        retrier.update(IntervalSeconds=seconds, MaxDelaySeconds=seconds)
    sfn.update_state_machine(stateMachineArn=arn, definition=json.dumps(definition))


def worker_down(pipeline: Pipeline, seconds: float) -> Callable[[Handler, QueuePoller], Handler]:
    """A consumer wrapper: the worker answers nothing for `seconds` after its first message
    (every message is handed back to the queue, so each dead-letters after 5 receives, as
    under a bad deploy); then it runs what it receives."""
    first_seen: list[float] = []

    def wrap(handler: Handler, poller: QueuePoller) -> Handler:
        def down(event: dict[str, Any], context: Any) -> Any:
            if not first_seen:
                first_seen.append(time.monotonic())
            if time.monotonic() - first_seen[0] >= seconds:
                return handler(event, context)
            pipeline.faults.add(f"worker_down:{poller.queue.key}", len(event["Records"]))
            return {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in event["Records"]]}

        return down

    return wrap


def handle_failure_attempts(pipeline: Pipeline, execution_arn: str | None) -> list[str]:
    """How each HandleFailure task of the execution ended, in order."""
    sfn = boto3.client("stepfunctions", region_name=pipeline.stack.region)
    events = sfn.get_execution_history(executionArn=str(execution_arn), maxResults=1000)["events"]
    ended, inside = [], False
    for event in events:
        entered = event.get("stateEnteredEventDetails", {}).get("name")
        if entered is not None:
            inside = entered == "HandleFailure"
        elif inside and event["type"] in ("TaskTimedOut", "TaskSucceeded", "TaskFailed"):
            ended.append(event["type"])
    return ended


def test_a_settle_worker_down_longer_than_handle_failure_s_timeout_still_settles_the_batch(
    pipeline: Pipeline,
) -> None:
    # Given the settle worker answering nothing for 6 s from its first message, Finalize and
    # HandleFailure timing out after 2 s: Finalize times out, then HandleFailure, more than once
    shorten_task_timeout(pipeline, "Finalize", 2)
    shorten_task_timeout(pipeline, "HandleFailure", 2)
    retry_sooner(pipeline, "HandleFailure")
    pipeline.wrappers["settle"] = worker_down(pipeline, 6)
    # When the batch runs
    outcome = run_and_check(pipeline, mixed_items())
    # Then HandleFailure's task is sent again until the worker, back, answers it: the batch
    # failed, every item completed and was charged once, the rest of the reservation released
    # (the checker: reservation resolved, reserved = charged + released, one charge entry)
    assert pipeline.faults.counts["worker_down:settle"] >= 2
    attempts = handle_failure_attempts(pipeline, outcome.batch.execution_arn)
    assert attempts[-1] == "TaskSucceeded" and attempts.count("TaskTimedOut") >= 1, attempts
    assert outcome.batch.state == "failed" and outcome.batch.settled_at is not None
    summary = outcome.batch.execution_summary
    assert summary is not None and "Timeout" in str(summary.latest_error)
    assert {r["status"] for r in outcome.rows} == {"completed"}


def test_a_receipt_outage_past_handle_failure_s_timeout_charges_the_settled_batch_once(
    pipeline: Pipeline,
) -> None:
    # Given S3 refusing the receipt for 6 s from the first attempt: Settle charges the
    # reservation, then cannot write the receipt until its message dead-letters and its task
    # times out; HandleFailure's `fail` gets as far (the charge replayed, no receipt) and
    # times out too, more than once
    shorten_task_timeout(pipeline, "Settle", 2)
    shorten_task_timeout(pipeline, "HandleFailure", 2)
    retry_sooner(pipeline, "HandleFailure")
    pipeline.aws.add(
        AwsFault(
            service="s3",
            operations=frozenset({"PutObject"}),
            code="InternalError",
            status=500,
            times=10_000,
            window_seconds=6,
            match=lambda request: s3_path(request).endswith("/receipt.json"),
        )
    )
    # When the batch runs
    outcome = run_and_check(pipeline, mixed_items())
    # Then a later HandleFailure attempt, once S3 is back, writes the receipt of the one
    # charge (the ledger replays it): nothing charged twice, the batch failed and settled
    assert pipeline.faults.counts["s3:InternalError"] >= 5
    attempts = handle_failure_attempts(pipeline, outcome.batch.execution_arn)
    assert attempts[-1] == "TaskSucceeded" and attempts.count("TaskTimedOut") >= 1, attempts
    assert outcome.batch.state == "failed" and outcome.batch.settled_at is not None
    assert outcome.double_charges == 0


def expired_while_down(pipeline: Pipeline, seconds: float) -> Callable[[Handler, QueuePoller], Handler]:
    """`worker_down`, and before the worker answers again the SLA sweeper expires every batch
    past its deadline (its clock an hour past the batch's), as it does during a long outage."""
    swept: list[bool] = []

    def wrap(handler: Handler, poller: QueuePoller) -> Handler:
        def sweep_then_run(event: dict[str, Any], context: Any) -> Any:
            if not swept:
                records = BatchRecords(get_settings().table_name("batches"))
                body = json.loads(event["Records"][0]["body"])
                batch = records.get(body["batch_id"])
                assert batch is not None and batch.deadline_at is not None
                late = FixedClock(datetime.fromisoformat(batch.deadline_at) + timedelta(hours=1))
                assert expire_overdue_batches(records, late).expired == [batch.batch_id]
                swept.append(True)
            return handler(event, context)

        return worker_down(pipeline, seconds)(sweep_then_run, poller)

    return wrap


def test_a_batch_expired_while_the_settle_worker_is_down_is_settled_once_it_is_back(
    pipeline: Pipeline,
) -> None:
    # Given the settle worker down for 6 s, HandleFailure timing out meanwhile, and the SLA
    # sweeper expiring the batch before the worker answers again
    shorten_task_timeout(pipeline, "Finalize", 2)
    shorten_task_timeout(pipeline, "HandleFailure", 2)
    retry_sooner(pipeline, "HandleFailure")
    pipeline.wrappers["settle"] = expired_while_down(pipeline, 6)
    # When the batch runs
    outcome = run_and_check(pipeline, mixed_items())
    # Then the retried HandleFailure finalizes and settles the expired batch (its move to
    # `failed` refused): every item has its result, charged once, the rest released
    attempts = handle_failure_attempts(pipeline, outcome.batch.execution_arn)
    assert attempts[-1] == "TaskSucceeded" and attempts.count("TaskTimedOut") >= 1, attempts
    assert outcome.batch.state == "expired" and outcome.batch.settled_at is not None
    assert {r["status"] for r in outcome.rows} == {"completed"}
