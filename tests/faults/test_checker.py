"""The fault suite's checker is not vacuous: on a batch run without a fault it passes, and
each way of losing an item or charging one twice that it guards against makes it fail."""

from __future__ import annotations

import boto3
import pytest

from batchroute.adapters.batch_artifacts import lane_result_key, results_key
from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.config import get_settings
from batchroute.domain.routing.lane_plan import lane_done_chunks
from tests.faults.harness import Pipeline, check_end_conditions, mixed_items
from tests.integration.batch_pipeline_support import CreatedBatch, create_batch


def _artifacts_bucket() -> str:
    return get_settings().buckets["artifacts"]


def _read(key: str) -> list[str]:
    body = boto3.client("s3").get_object(Bucket=_artifacts_bucket(), Key=key)["Body"].read()
    return str(body.decode()).splitlines()


def _write(key: str, lines: list[str]) -> None:
    boto3.client("s3").put_object(Bucket=_artifacts_bucket(), Key=key, Body="\n".join(lines) + "\n")


def drop_a_result_row(created: CreatedBatch) -> None:
    rows = _read(results_key(created.batch_id))
    _write(results_key(created.batch_id), rows[:-1])


def answer_an_item_twice(created: CreatedBatch) -> None:
    """A second completed lane line for an item (the same answer written by two runners)."""
    lane = BatchRecords(get_settings().table_name("batches")).lanes(created.batch_id)[0]
    key = lane_result_key(created.batch_id, lane, int(min(lane_done_chunks(lane))))
    lines = _read(key)
    _write(key, [*lines, lines[0]])


def count_usage_twice(created: CreatedBatch) -> None:
    """A lane's usage moved twice for one chunk (a repeated finish that was not refused)."""
    lane = BatchRecords(get_settings().table_name("batches")).lanes(created.batch_id)[0]
    boto3.client("dynamodb").update_item(
        TableName=get_settings().table_name("batches"),
        Key={"pk": {"S": f"BATCH#{created.batch_id}"}, "sk": {"S": f"LANE#{lane.lane_key}"}},
        UpdateExpression="SET #u.prompt_tokens = #u.prompt_tokens + :n",
        ExpressionAttributeNames={"#u": "usage"},
        ExpressionAttributeValues={":n": {"N": "7"}},
    )


def test_the_checker_fails_on_a_lost_item_or_a_double_count(pipeline: Pipeline) -> None:
    # Given a batch run without a fault: the checker passes
    created = create_batch(pipeline.org_id, mixed_items(8), chunk_size=4)
    pipeline.run(created)
    assert check_end_conditions(pipeline, created, tally=None).lost == 0
    # When its outcome is made wrong, one way after another
    for tamper, says in (
        (drop_a_result_row, "items without a result row"),
        (count_usage_twice, "counted"),
        (answer_an_item_twice, "items completed twice"),
    ):
        tamper(created)
        # Then the checker fails, naming each
        with pytest.raises(AssertionError, match=says):
            check_end_conditions(pipeline, created, tally=None)
