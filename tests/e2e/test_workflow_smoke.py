"""The batch workflow runs on the local stack: moto executes the ASL, the runner's pollers
hand each task to the very handlers CDK deploys, and they answer the task tokens."""

from __future__ import annotations

import json
import time
from typing import Any

import boto3
import pytest

from tests.e2e.local_stack import RunningStack

pytestmark = pytest.mark.e2e

WORKFLOW_TIMEOUT_SECONDS = 60.0


def _client(stack: dict[str, Any], service: str) -> Any:
    make_client: Any = boto3.client
    return make_client(
        service,
        endpoint_url=stack["endpoint_url"],
        region_name=stack["region"],
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def test_a_batch_without_lanes_runs_the_workflow_to_success(local_stack: RunningStack) -> None:
    # Given a batch with no lanes in the local batches table
    stack = local_stack.describe()
    batch_id = "batch_e2e_smoke"
    _client(stack, "dynamodb").put_item(
        TableName=stack["tables"]["batches"],
        Item={
            "pk": {"S": f"BATCH#{batch_id}"},
            "sk": {"S": "META"},
            "batch_id": {"S": batch_id},
            # the least a batch record holds (domain/batches/record.py)
            "org_id": {"S": "org_e2e_smoke"},
            "state": {"S": "priced"},
            "created_at": {"S": "2026-11-25T00:00:00.000Z"},
        },
    )
    sfn = _client(stack, "stepfunctions")
    # When its workflow starts (named after the batch, as the service starts it)
    execution_arn = sfn.start_execution(
        stateMachineArn=stack["state_machine_arn"], name=batch_id, input=json.dumps({"batch_id": batch_id})
    )["executionArn"]
    # Then it reaches SUCCEEDED: route, finalize, settle and deliver each ran through SQS
    deadline = time.monotonic() + WORKFLOW_TIMEOUT_SECONDS
    while (status := sfn.describe_execution(executionArn=execution_arn)["status"]) == "RUNNING":
        assert time.monotonic() < deadline, f"workflow still running:\n{local_stack.log_tail()}"
        time.sleep(0.2)
    assert status == "SUCCEEDED", local_stack.log_tail()
    output = json.loads(sfn.describe_execution(executionArn=execution_arn)["output"])
    assert output["route"] == {"lanes": []}
    assert output["lanes"] == []
