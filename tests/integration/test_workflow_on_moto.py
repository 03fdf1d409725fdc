"""The batch workflow (one ASL file) runs end to end on moto: Step Functions hands each task
to SQS, the very handlers CDK deploys consume Lambda-shaped SQS events and answer the task
tokens, and the DynamoDB integration records the execution on the batch."""

from __future__ import annotations

import json

import boto3

from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute_tools.local.provision import LocalStack
from functions.api.auth import identity_store
from tests.integration.batch_pipeline_support import (
    GPT,
    create_batch,
    heartbeat_all_lanes,
    item,
    run_until_done,
)
from tests.integration.principals import new_org


def test_trivial_execution_runs_end_to_end(local_aws: LocalStack) -> None:
    # Given a batch with two planned lanes (two models), made as batch create makes it
    identity_store.cache_clear()
    heartbeat_all_lanes()
    batch_id = create_batch(new_org(credit_usd="1").org_id, [item(0), item(1, GPT)]).batch_id
    sfn = boto3.client("stepfunctions", region_name=local_aws.region)
    # When the workflow runs
    execution = sfn.start_execution(
        stateMachineArn=local_aws.state_machine_arn,
        name=batch_id,
        input=json.dumps({"batch_id": batch_id}),
    )
    result = run_until_done(local_aws, execution["executionArn"])
    # Then it succeeds through every step, each lane ran once, and the batch journaled each step
    assert result["status"] == "SUCCEEDED"
    output = json.loads(result["output"])
    assert len(output["lanes"]) == 2
    batch = BatchRecords(local_aws.tables["batches"]).get(batch_id)
    assert batch is not None
    assert set(batch.workflow_steps) == {"intake", "route", "run_lane", "finalize", "settle", "deliver"}
    assert batch.execution_arn.startswith("arn:aws:states:")


def test_missing_batch_takes_the_failure_path(local_aws: LocalStack) -> None:
    # Given no batch record / When the workflow starts / Then it ends FAILED via HandleFailure
    sfn = boto3.client("stepfunctions", region_name=local_aws.region)
    execution = sfn.start_execution(
        stateMachineArn=local_aws.state_machine_arn,
        name="ghost",
        input=json.dumps({"batch_id": "batch_ghost"}),
    )
    result = run_until_done(local_aws, execution["executionArn"])
    assert result["status"] == "FAILED"
    history = sfn.get_execution_history(executionArn=execution["executionArn"])["events"]
    entered = [e["stateEnteredEventDetails"]["name"] for e in history if "stateEnteredEventDetails" in e]
    assert "HandleFailure" in entered and "WorkflowFailed" in entered
