"""One source of truth: the resources `make run` provisions on moto are the resources the CDK
stack deploys.

Both sides are read back in the same shape and compared by logical key (the physical
name without its environment prefix): the local side from moto's describe APIs after
batchroute_tools.local.provision, the deployed side from the synthesized template of
the `test` environment. The local runner's event source mappings and sweeper timer are
compared with the template's too, since they play those parts locally.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from batchroute import resources
from batchroute_tools.local.provision import LOCAL_ACCOUNT, LOCAL_REGION, LocalStack, provision
from batchroute_tools.local.runner import reconciliation_schedule
from infra.compute import API, API_STREAM, STREAM_SCRIPT

LOCAL_PREFIX = resources.resource_prefix("local")
TEMPLATE_PREFIX = resources.resource_prefix("test")
SQS_DEFAULT_VISIBILITY_TIMEOUT = 30
SQS_DEFAULT_RETENTION = 345_600

Shape = dict[str, Any]


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    from infra import assets
    from infra.synth import synthesize

    # The stack packages .build/ assets; `make test` builds them first, a bare pytest may not have.
    expected = [assets.LAYER_DIR, *(assets.function_asset_dir(f.key) for f in resources.FUNCTIONS)]
    if not all(path.is_dir() for path in expected):
        assets.build(quiet=True)
    return synthesize("test")


@pytest.fixture(scope="module")
def local() -> Iterator[dict[str, Shape]]:
    """Everything provision() created, described back through the AWS APIs."""
    with mock_aws():
        stack = provision(prefix=LOCAL_PREFIX, account=LOCAL_ACCOUNT, region=LOCAL_REGION, endpoint_url=None)
        yield {
            "tables": _local_tables(),
            "queues": _local_queues(),
            "buckets": _local_buckets(),
            "workflow": _local_workflow(stack.state_machine_arn, stack.queue_urls, stack.tables),
        }


# ----------------------------------------------------------------------------- tests


def test_tables_match(local: dict[str, Shape], template: dict[str, Any]) -> None:
    deployed = _template_tables(template)
    assert set(local["tables"]) == set(deployed) == {t.key for t in resources.TABLES}
    for key, shape in deployed.items():
        assert local["tables"][key] == shape, f"table {key}"


def test_queues_and_dead_letter_queues_match(local: dict[str, Shape], template: dict[str, Any]) -> None:
    deployed = _template_queues(template)
    every_queue = {q.key for q in resources.QUEUES} | {f"{q.key}-dlq" for q in resources.QUEUES}
    assert set(local["queues"]) == set(deployed) == every_queue
    for key, shape in deployed.items():
        assert local["queues"][key] == shape, f"queue {key}"
    for queue in resources.QUEUES:
        assert deployed[queue.key]["redrive"] == (f"{queue.key}-dlq", queue.max_receive_count)


def test_buckets_match(local: dict[str, Shape], template: dict[str, Any]) -> None:
    deployed = _template_buckets(template)
    assert set(local["buckets"]) == set(deployed) == {b.key for b in resources.BUCKETS}
    for key, shape in deployed.items():
        assert local["buckets"][key] == shape, f"bucket {key}"


def test_workflow_definitions_match(local: dict[str, Shape], template: dict[str, Any]) -> None:
    deployed = _template_workflow(template)
    assert local["workflow"]["name"] == deployed["name"] == resources.STATE_MACHINE_KEY
    assert local["workflow"]["type"] == deployed["type"]
    # State names first, for a readable failure; then the whole ASL, integrations included.
    assert set(local["workflow"]["asl"]["States"]) == set(deployed["asl"]["States"])
    assert _integrations(local["workflow"]["asl"]) == _integrations(deployed["asl"])
    assert local["workflow"]["asl"] == deployed["asl"]


def test_event_source_mappings_are_what_the_local_poller_plays(template: dict[str, Any]) -> None:
    deployed = {}
    for props in _of_type(template, "AWS::Lambda::EventSourceMapping").values():
        queue = _strip(_referenced(template, props["EventSourceArn"])["QueueName"], TEMPLATE_PREFIX)
        function = _strip(_referenced(template, props["FunctionName"])["FunctionName"], TEMPLATE_PREFIX)
        deployed[queue] = {
            "consumer": function,
            "batch_size": props.get("BatchSize", 10),
            "batching_window": props.get("MaximumBatchingWindowInSeconds", 0),
            "partial_batch_responses": "ReportBatchItemFailures" in props.get("FunctionResponseTypes", []),
        }
    assert deployed == {
        q.key: {
            "consumer": q.consumer,
            "batch_size": q.batch_size,
            "batching_window": q.max_batching_window_seconds,
            "partial_batch_responses": True,
        }
        for q in resources.QUEUES
    }


def test_functions_are_what_the_local_lambda_context_reports(template: dict[str, Any]) -> None:
    deployed = {
        _strip(props["FunctionName"], TEMPLATE_PREFIX): (
            props["Handler"],
            props["Timeout"],
            props["MemorySize"],
        )
        for props in _of_type(template, "AWS::Lambda::Function").values()
        if isinstance(props.get("FunctionName"), str) and props["FunctionName"].startswith(TEMPLATE_PREFIX)
    }
    # and the API's streamed routes: the API's code and memory under the web adapter, with the
    # streamed routes' time-out
    api = next(f for f in resources.FUNCTIONS if f.key == API)
    expected = {f.key: (f.handler, f.timeout_seconds, f.memory_mb) for f in resources.FUNCTIONS}
    assert deployed == {
        **expected,
        API_STREAM: (STREAM_SCRIPT, resources.STREAM_TIMEOUT_SECONDS, api.memory_mb),
    }


def _sweeper_rules(template: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        props
        for props in _of_type(template, "AWS::Events::Rule").values()
        if any(
            _strip(_referenced(template, target["Arn"]).get("FunctionName", ""), TEMPLATE_PREFIX) == "sweeper"
            for target in props.get("Targets", [])
        )
    ]


def test_sweeper_schedule_is_the_local_timer_rate(template: dict[str, Any]) -> None:
    # the minute sweep: the rule without an input (the reconciliation rule has one)
    rules = [r for r in _sweeper_rules(template) if not any("Input" in t for t in r["Targets"])]
    assert len(rules) == 1
    match = re.fullmatch(r"rate\((\d+) minutes?\)", rules[0]["ScheduleExpression"])
    assert match is not None
    assert int(match.group(1)) == resources.SWEEPER_RATE_MINUTES


def test_the_reconciliation_rule_is_the_local_timer_and_its_input(template: dict[str, Any]) -> None:
    local = reconciliation_schedule(
        LocalStack(
            prefix=LOCAL_PREFIX,
            account=LOCAL_ACCOUNT,
            region=LOCAL_REGION,
            endpoint_url=None,
            tables={},
            queue_urls={},
            queue_arns={},
            dlq_urls={},
            buckets={},
            state_machine_arn="",
            kms_key_id="",
            email_sender="",
        )
    )
    (rule,) = [r for r in _sweeper_rules(template) if any("Input" in t for t in r["Targets"])]
    assert rule["ScheduleExpression"] == f"rate({local.interval_seconds // 86400:g} day)"
    assert [json.loads(t["Input"]) for t in rule["Targets"]] == [local.scheduled_event()]


# ----------------------------------------------------------------------------- shapes


def _table_shape(
    *, key_schema: list[Any], attributes: list[Any], indexes: list[Any], ttl: str | None
) -> Shape:
    return {
        "key_schema": _keys(key_schema),
        "attributes": sorted((a["AttributeName"], a["AttributeType"]) for a in attributes),
        "indexes": sorted(
            (i["IndexName"], _keys(i["KeySchema"]), i["Projection"]["ProjectionType"]) for i in indexes
        ),
        "ttl_attribute": ttl,
    }


def _keys(schema: list[Any]) -> tuple[tuple[str, str], ...]:
    return tuple((k["AttributeName"], k["KeyType"]) for k in schema)


def _queue_shape(*, visibility: Any, retention: Any, redrive: tuple[str, int] | None) -> Shape:
    return {"visibility_timeout": int(visibility), "retention": int(retention), "redrive": redrive}


def _lifecycle_shape(
    *, rule_id: str, prefix: str, status: str, expiration: Any, abort_multipart: Any
) -> tuple[Any, ...]:
    return (rule_id, prefix, status, expiration, abort_multipart)


def _cors_shape(rules: list[Any], *, exposed: str, max_age: str) -> list[Shape]:
    return [
        {
            "headers": sorted(r.get("AllowedHeaders", [])),
            "methods": sorted(r["AllowedMethods"]),
            "origins": sorted(r["AllowedOrigins"]),
            "exposed": sorted(r.get(exposed, [])),
            "max_age": r.get(max_age),
        }
        for r in rules
    ]


def _canonical_asl(asl: Any, names: dict[str, str]) -> Any:
    """The ASL with every environment-specific value (queue URL, table name) replaced by its key."""
    if isinstance(asl, dict):
        return {key: _canonical_asl(value, names) for key, value in asl.items()}
    if isinstance(asl, list):
        return [_canonical_asl(value, names) for value in asl]
    if isinstance(asl, str):
        return names.get(asl, asl)
    return asl


def _integrations(asl: Any) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for name, state in asl.get("States", {}).items():
        if "Resource" in state:
            found.append((name, state["Resource"]))
        for nested in (state.get("Iterator"), state.get("ItemProcessor"), *state.get("Branches", [])):
            if nested:
                found += _integrations(nested)
    return sorted(found)


# ----------------------------------------------------------------------------- local side


def _client(service: str) -> Any:
    make_client: Any = boto3.client
    return make_client(service, region_name=LOCAL_REGION)


def _local_tables() -> dict[str, Shape]:
    dynamodb = _client("dynamodb")
    shapes = {}
    for name in dynamodb.list_tables()["TableNames"]:
        table = dynamodb.describe_table(TableName=name)["Table"]
        ttl = dynamodb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
        shapes[_strip(name, LOCAL_PREFIX)] = _table_shape(
            key_schema=table["KeySchema"],
            attributes=table["AttributeDefinitions"],
            indexes=table.get("GlobalSecondaryIndexes", []),
            ttl=ttl.get("AttributeName") if ttl["TimeToLiveStatus"] == "ENABLED" else None,
        )
    return shapes


def _local_queues() -> dict[str, Shape]:
    sqs = _client("sqs")
    shapes = {}
    for url in sqs.list_queues(QueueNamePrefix=LOCAL_PREFIX).get("QueueUrls", []):
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        redrive = None
        if "RedrivePolicy" in attributes:
            policy = json.loads(attributes["RedrivePolicy"])
            dlq_name = policy["deadLetterTargetArn"].rsplit(":", 1)[1]
            redrive = (_strip(dlq_name, LOCAL_PREFIX), int(policy["maxReceiveCount"]))
        shapes[_strip(url.rsplit("/", 1)[1], LOCAL_PREFIX)] = _queue_shape(
            visibility=attributes["VisibilityTimeout"],
            retention=attributes["MessageRetentionPeriod"],
            redrive=redrive,
        )
    return shapes


def _local_buckets() -> dict[str, Shape]:
    s3 = _client("s3")
    shapes = {}
    for bucket in s3.list_buckets()["Buckets"]:
        name = bucket["Name"]
        key = _strip(name, LOCAL_PREFIX).removesuffix(f"-{LOCAL_ACCOUNT}")
        rules = s3.get_bucket_lifecycle_configuration(Bucket=name)["Rules"]
        try:
            cors_rules = s3.get_bucket_cors(Bucket=name)["CORSRules"]
        except s3.exceptions.ClientError:
            cors_rules = []
        shapes[key] = {
            "lifecycle": sorted(
                _lifecycle_shape(
                    rule_id=r["ID"],
                    prefix=r.get("Filter", {}).get("Prefix", r.get("Prefix", "")),
                    status=r["Status"],
                    expiration=r.get("Expiration", {}).get("Days"),
                    abort_multipart=r.get("AbortIncompleteMultipartUpload", {}).get("DaysAfterInitiation"),
                )
                for r in rules
            ),
            "cors": _cors_shape(cors_rules, exposed="ExposeHeaders", max_age="MaxAgeSeconds"),
        }
    return shapes


def _local_workflow(arn: str, queue_urls: dict[str, str], tables: dict[str, str]) -> Shape:
    described = _client("stepfunctions").describe_state_machine(stateMachineArn=arn)
    names = {url: f"queue:{key}" for key, url in queue_urls.items()}
    names |= {name: f"table:{key}" for key, name in tables.items()}
    return {
        "name": _strip(described["name"], LOCAL_PREFIX),
        "type": described["type"],
        "asl": _canonical_asl(json.loads(described["definition"]), names),
    }


# ----------------------------------------------------------------------------- template side


def _of_type(template: dict[str, Any], resource_type: str) -> dict[str, dict[str, Any]]:
    return {
        logical_id: resource.get("Properties", {})
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == resource_type
    }


def _referenced(template: dict[str, Any], reference: Any) -> dict[str, Any]:
    """The properties of the resource a Ref or Fn::GetAtt points at ({} for anything else)."""
    if isinstance(reference, dict) and "Ref" in reference:
        logical_id = reference["Ref"]
    elif isinstance(reference, dict) and "Fn::GetAtt" in reference:
        logical_id = reference["Fn::GetAtt"][0]
    else:
        return {}
    properties: dict[str, Any] = template["Resources"].get(logical_id, {}).get("Properties", {})
    return properties


def _template_tables(template: dict[str, Any]) -> dict[str, Shape]:
    shapes = {}
    for props in _of_type(template, "AWS::DynamoDB::Table").values():
        ttl = props.get("TimeToLiveSpecification", {})
        shapes[_strip(props["TableName"], TEMPLATE_PREFIX)] = _table_shape(
            key_schema=props["KeySchema"],
            attributes=props["AttributeDefinitions"],
            indexes=props.get("GlobalSecondaryIndexes", []),
            ttl=ttl.get("AttributeName") if ttl.get("Enabled") else None,
        )
    return shapes


def _template_queues(template: dict[str, Any]) -> dict[str, Shape]:
    shapes = {}
    for props in _of_type(template, "AWS::SQS::Queue").values():
        redrive = None
        if "RedrivePolicy" in props:
            dlq = _referenced(template, props["RedrivePolicy"]["deadLetterTargetArn"])
            redrive = (
                _strip(dlq["QueueName"], TEMPLATE_PREFIX),
                int(props["RedrivePolicy"]["maxReceiveCount"]),
            )
        shapes[_strip(props["QueueName"], TEMPLATE_PREFIX)] = _queue_shape(
            visibility=props.get("VisibilityTimeout", SQS_DEFAULT_VISIBILITY_TIMEOUT),
            retention=props.get("MessageRetentionPeriod", SQS_DEFAULT_RETENTION),
            redrive=redrive,
        )
    return shapes


def _template_buckets(template: dict[str, Any]) -> dict[str, Shape]:
    # The console's buckets are deployed only (locally the API serves console/dist).
    deployed_only = {b.key for b in resources.CONSOLE_BUCKETS}
    shapes = {}
    for props in _of_type(template, "AWS::S3::Bucket").values():
        key = _template_bucket_key(props["BucketName"])
        if key in deployed_only:
            continue
        shapes[key] = {
            "lifecycle": sorted(
                _lifecycle_shape(
                    rule_id=r["Id"],
                    prefix=r.get("Prefix", ""),
                    status=r["Status"],
                    expiration=r.get("ExpirationInDays"),
                    abort_multipart=r.get("AbortIncompleteMultipartUpload", {}).get("DaysAfterInitiation"),
                )
                for r in props.get("LifecycleConfiguration", {}).get("Rules", [])
            ),
            "cors": _cors_shape(
                props.get("CorsConfiguration", {}).get("CorsRules", []),
                exposed="ExposedHeaders",
                max_age="MaxAge",
            ),
        }
    return shapes


def _template_bucket_key(bucket_name: Any) -> str:
    # Deployed names end with the account id, a token:
    # {"Fn::Join": ["", ["<prefix>-<key>-", {"Ref": "AWS::AccountId"}]]}.
    if isinstance(bucket_name, dict) and "Fn::Join" in bucket_name:
        literal = "".join(part for part in bucket_name["Fn::Join"][1] if isinstance(part, str))
        return _strip(literal, TEMPLATE_PREFIX).rstrip("-")
    return _strip(str(bucket_name), TEMPLATE_PREFIX).rsplit("-", 1)[0]


def _template_workflow(template: dict[str, Any]) -> Shape:
    (props,) = _of_type(template, "AWS::StepFunctions::StateMachine").values()
    assert isinstance(props["DefinitionString"], str), "the ASL should reach CloudFormation as text"
    names = {}
    for placeholder, reference in props.get("DefinitionSubstitutions", {}).items():
        target = _referenced(template, reference)
        if "QueueName" in target:
            names["${" + placeholder + "}"] = f"queue:{_strip(target['QueueName'], TEMPLATE_PREFIX)}"
        elif "TableName" in target:
            names["${" + placeholder + "}"] = f"table:{_strip(target['TableName'], TEMPLATE_PREFIX)}"
    return {
        "name": _strip(props["StateMachineName"], TEMPLATE_PREFIX),
        "type": props.get("StateMachineType", "STANDARD"),
        "asl": _canonical_asl(json.loads(props["DefinitionString"]), names),
    }


def _strip(name: str, prefix: str) -> str:
    assert name.startswith(f"{prefix}-"), f"{name!r} is not under {prefix!r}"
    return name[len(prefix) + 1 :]
