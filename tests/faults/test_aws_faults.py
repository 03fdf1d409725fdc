"""AWS faults injected at the botocore layer (a `before-call` hook on every client, answering
as AWS answers): DynamoDB throttling and transaction conflicts, S3 refusing writes of the
batch's artifacts."""

from __future__ import annotations

from typing import Any

from tests.faults.harness import AwsFault, Pipeline, json_body, mixed_items, run_and_check, s3_path

DYNAMO_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"})


def conflict_reasons(request: dict[str, Any]) -> dict[str, Any]:
    """TransactionCanceledException's reasons, one per item: the first item in conflict."""
    count = len(json_body(request).get("TransactItems", [])) or 1
    reasons = [{"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}]
    return {"CancellationReasons": reasons + [{"Code": "None"}] * (count - 1)}


def test_dynamodb_throttling_loses_nothing(pipeline: Pipeline) -> None:
    # Given DynamoDB throttling past the SDK's own retries, in two windows of 1.5 s: every
    # read (`ThrottlingException`) from the 8th on, every write over its provisioned
    # throughput from the 30th on. A step that meets one fails; SQS delivers its message
    # again a second later (locally), so no message fails its five receives.
    reads, writes = frozenset({"GetItem", "Query"}), DYNAMO_WRITES
    pipeline.aws.add(AwsFault("dynamodb", reads, "ThrottlingException", 400, 50, after=8, window_seconds=1.5))
    throughput = "ProvisionedThroughputExceededException"
    pipeline.aws.add(AwsFault("dynamodb", writes, throughput, 400, 50, after=30, window_seconds=1.5))
    # When the batch runs
    outcome = run_and_check(pipeline, mixed_items())
    # Then both windows were met, and the batch still ran to its end exactly
    assert pipeline.faults.counts["dynamodb:ThrottlingException"] >= 1
    assert pipeline.faults.counts[f"dynamodb:{throughput}"] >= 1
    assert {r["status"] for r in outcome.rows} == {"completed"}


def test_dynamodb_transaction_conflicts_lose_nothing(pipeline: Pipeline) -> None:
    # Given every second DynamoDB transaction cancelled for a conflict, for 2 s from the 3rd
    pipeline.aws.add(
        AwsFault(
            "dynamodb",
            frozenset({"TransactWriteItems"}),
            "TransactionCanceledException",
            400,
            times=50,
            every=2,
            after=2,
            window_seconds=2,
            extra=conflict_reasons,
        )
    )
    # When the batch runs
    outcome = run_and_check(pipeline, mixed_items())
    # Then conflicts were met, and still nothing was lost or charged twice
    assert pipeline.faults.counts["dynamodb:TransactionCanceledException"] >= 1
    assert {r["status"] for r in outcome.rows} == {"completed"}


S3_WRITES = frozenset({"PutObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload"})


def writes_to(*names: str) -> Any:
    return lambda request: s3_path(request).endswith(names)


def test_s3_refusing_artifact_writes_loses_nothing(pipeline: Pipeline) -> None:
    # Given S3 refusing the first three writes of results.jsonl (SlowDown) and the first two of
    # the receipt (InternalError), and of every lane result file once
    pipeline.aws.add(AwsFault("s3", S3_WRITES, "SlowDown", 503, times=3, match=writes_to("/results.jsonl")))
    pipeline.aws.add(
        AwsFault("s3", S3_WRITES, "InternalError", 500, times=2, match=writes_to("/receipt.json"))
    )
    pipeline.aws.add(
        AwsFault("s3", S3_WRITES, "InternalError", 500, times=2, every=2, match=writes_to(".jsonl"))
    )
    # When the batch runs
    outcome = run_and_check(pipeline, mixed_items())
    # Then every refusal was met; the artifacts were written in the end, complete
    assert pipeline.faults.counts["s3:SlowDown"] == 3
    assert pipeline.faults.counts["s3:InternalError"] == 4
    assert {r["status"] for r in outcome.rows} == {"completed"}
