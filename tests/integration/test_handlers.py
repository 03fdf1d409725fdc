"""Handlers fed Lambda-shaped events: the API through Mangum, the sweeper on a schedule,
and conditional state writes on DynamoDB."""

from __future__ import annotations

import json
from typing import Any

import boto3

from batchroute.adapters.dynamo.batch_records import DEADLINE_PARTITION, BatchRecords, batch_key
from batchroute.adapters.dynamo.codec import from_item
from batchroute_tools.local.lambda_runtime import context_for, load_handler
from batchroute_tools.local.provision import LocalStack


def _api_gateway_event(method: str, path: str) -> dict[str, object]:
    return {
        "resource": "/{proxy+}",
        "path": path,
        "httpMethod": method,
        "headers": {"accept": "application/json", "host": "api.example.com"},
        "multiValueHeaders": {"accept": ["application/json"], "host": ["api.example.com"]},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": {"proxy": path.lstrip("/")},
        "stageVariables": None,
        "requestContext": {
            "resourcePath": "/{proxy+}",
            "httpMethod": method,
            "path": f"/test{path}",
            "stage": "test",
            "requestId": "gw-request-0001",
            "identity": {"sourceIp": "203.0.113.7"},
            "accountId": "123456789012",
            "apiId": "abc123",
        },
        "body": None,
        "isBase64Encoded": False,
    }


def _put_batch(stack: LocalStack, batch_id: str, state: str, deadline: str | None = None) -> None:
    item = {
        "pk": {"S": f"BATCH#{batch_id}"},
        "sk": {"S": "META"},
        "batch_id": {"S": batch_id},
        "state": {"S": state},
    }
    if deadline:
        item["gsi2pk"] = {"S": DEADLINE_PARTITION}
        item["gsi2sk"] = {"S": f"{deadline}#{batch_id}"}
    boto3.client("dynamodb", region_name=stack.region).put_item(TableName=stack.tables["batches"], Item=item)


def _stored(stack: LocalStack, batch_id: str) -> dict[str, Any] | None:
    """The batch's META item as stored, index keys included."""
    item = boto3.client("dynamodb", region_name=stack.region).get_item(
        TableName=stack.tables["batches"], Key=batch_key(batch_id), ConsistentRead=True
    )
    return from_item(item["Item"]) if "Item" in item else None


def test_api_handler_answers_an_api_gateway_event(local_aws: LocalStack) -> None:
    # Given the deployed API handler / When API Gateway invokes it
    handler = load_handler("api")
    context = context_for("api", prefix=local_aws.prefix, region=local_aws.region, account=local_aws.account)
    response = handler(_api_gateway_event("GET", "/v1/health"), context)
    # Then the FastAPI app answers through Mangum, correlated with the gateway's request id
    assert response["statusCode"] == 200
    assert json.loads(response["body"])["ok"] is True
    assert response["headers"]["x-request-id"] == "gw-request-0001"


def test_api_handler_unknown_route_is_enveloped(local_aws: LocalStack) -> None:
    handler = load_handler("api")
    context = context_for("api", prefix=local_aws.prefix, region=local_aws.region, account=local_aws.account)
    response = handler(_api_gateway_event("GET", "/v1/nope"), context)
    assert response["statusCode"] == 404
    assert json.loads(response["body"])["error"]["code"] == "not_found"


def test_sweeper_expires_overdue_batches_on_schedule(local_aws: LocalStack) -> None:
    # Given an overdue running batch, an overdue completed one and a future one
    _put_batch(local_aws, "batch_late", "running", deadline="2000-01-01T00:00:00.000Z")
    _put_batch(local_aws, "batch_future", "queued", deadline="2999-01-01T00:00:00.000Z")
    _put_batch(local_aws, "batch_done", "completed")
    scheduled_event = {
        "version": "0",
        "id": "e1",
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": local_aws.account,
        "time": "2026-01-01T00:00:00Z",
        "region": local_aws.region,
        "resources": ["arn:aws:events:us-east-1:123456789012:rule/sweeper"],
        "detail": {},
    }
    # When EventBridge fires the sweeper
    handler = load_handler("sweeper")
    result = handler(
        scheduled_event,
        context_for("sweeper", prefix=local_aws.prefix, region=local_aws.region, account=local_aws.account),
    )
    # Then only the overdue batch expired, and it left the deadline index
    assert result["expired"] == ["batch_late"]
    assert result["retention"] == {"reclaimed": [], "deferred": 0, "objects_deleted": 0}  # docs/retention.md
    records = BatchRecords(local_aws.tables["batches"])
    late = _stored(local_aws, "batch_late")
    assert late is not None and late["state"] == "expired" and "gsi2pk" not in late
    assert late["execution_summary"]["latest_error"] == "SLA deadline passed"
    assert records.state("batch_future") == "queued"


def test_state_writes_never_go_backward_or_leave_terminal(local_aws: LocalStack) -> None:
    records = BatchRecords(local_aws.tables["batches"])
    _put_batch(local_aws, "batch_s", "priced")
    at = "2026-01-01T00:00:00.000Z"
    assert records.transition("batch_s", "running", at=at)
    assert not records.transition("batch_s", "queued", at=at)  # backward: refused
    assert records.transition("batch_s", "finalizing", at=at)
    assert records.transition("batch_s", "completed", at=at)
    assert not records.transition("batch_s", "failed", at=at)  # terminal: stays
    assert not records.transition("batch_missing", "queued", at=at)
    assert records.state("batch_s") == "completed"
