"""Lambda functions, the layer, their triggers and their permissions."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from batchroute import resources
from batchroute.config import Settings
from bench import coldstart
from infra import assets
from infra.compute import API_STREAM
from infra.context import EnvironmentConfig
from tests.infra.cfn import Cfn, as_list, render, render_json

# Read by Powertools and pydantic, not by batchroute.config.Settings.
POWERTOOLS_VARIABLES = {"POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE", "PYDANTIC_DISABLE_PLUGINS"}
EXPECTED_VARIABLES = {
    "ENVIRONMENT",
    "RESOURCE_PREFIX",
    "QUEUE_URLS",
    "BUCKETS",
    "STATE_MACHINE_ARN",
    "KMS_KEY_ID",
    "APP_SECRET_ARN",
    "PUBLIC_BASE_URL",
    "EMAIL_SENDER",
    "LOG_LEVEL",
    "BEDROCK_BATCH_ROLE_ARN",
    "PAYMENTS_SECRET_NAME",
    *POWERTOOLS_VARIABLES,
}


# The recurring schedules' triggers (infra/schedules.py): the API manages them, the sweeper
# fires them (and catches up a missed one).
SCHEDULE_VARIABLES = {"SCHEDULE_GROUP_NAME", "SCHEDULE_ROLE_ARN", "SCHEDULE_TARGET_ARN"}


def _function(cfn: Cfn, prefix: str, key: str) -> tuple[str, dict[str, Any]]:
    logical_id, function = cfn.named("AWS::Lambda::Function", "FunctionName", f"{prefix}-{key}")
    return logical_id, function["Properties"]


def _actions(statements: list[dict[str, Any]]) -> set[str]:
    return {action for s in statements if s["Effect"] == "Allow" for action in as_list(s["Action"])}


def _statements_on(statements: list[dict[str, Any]], resource: str) -> set[str]:
    """Actions granted on a resource (a rendered ARN such as <LogicalId> or <LogicalId.Arn>)."""
    return {
        action
        for s in statements
        if s["Effect"] == "Allow" and resource in [render(r) for r in as_list(s["Resource"])]
        for action in as_list(s["Action"])
    }


def test_one_function_per_declared_function(cfn: Cfn, prefix: str) -> None:
    # Given / When: the synthesized stack's functions, by name
    names = [props.get("FunctionName") for props in cfn.properties("AWS::Lambda::Function").values()]
    ours = sorted(name for name in names if isinstance(name, str) and name.startswith(f"{prefix}-"))

    # Then: the declared functions, one layer of ours; the only other function is CDK's
    # handler that copies the console into its bucket (docs/console.md, Deployment)
    # (and the API's streamed routes: the API's code under the Lambda Web Adapter)
    assert ours == sorted(
        [f"{prefix}-{spec.key}" for spec in resources.FUNCTIONS] + [f"{prefix}-{API_STREAM}"]
    )
    assert [lid for lid in cfn.of_type("AWS::Lambda::Function") if not _named_ours(cfn, lid, prefix)] == [
        lid for lid in cfn.of_type("AWS::Lambda::Function") if lid.startswith("CustomCDKBucketDeployment")
    ]
    assert len(_shared_layers(cfn, prefix)) == 1


def _named_ours(cfn: Cfn, logical_id: str, prefix: str) -> bool:
    name = cfn.resources[logical_id]["Properties"].get("FunctionName")
    return isinstance(name, str) and name.startswith(f"{prefix}-")


def _shared_layers(cfn: Cfn, prefix: str) -> list[str]:
    return [
        lid
        for lid, props in cfn.properties("AWS::Lambda::LayerVersion").items()
        if props.get("LayerName") == f"{prefix}-shared"
    ]


@pytest.mark.parametrize("spec", resources.FUNCTIONS, ids=lambda f: f.key)
def test_function_runtime_handler_sizing_tracing_and_layer(
    cfn: Cfn, prefix: str, spec: resources.Function
) -> None:
    # Given: the shared layer
    (layer_id,) = _shared_layers(cfn, prefix)

    # When
    _, props = _function(cfn, prefix, spec.key)

    # Then
    assert props["Runtime"] == f"python{assets.LAMBDA_PYTHON_VERSION}"
    assert props["Architectures"] == ["x86_64"]
    assert props["Handler"] == spec.handler
    assert props["Timeout"] == spec.timeout_seconds
    assert props["MemorySize"] == spec.memory_mb
    assert props.get("ReservedConcurrentExecutions") == spec.reserved_concurrency
    assert props["TracingConfig"] == {"Mode": "Active"}
    assert props["Layers"] == [{"Ref": layer_id}]
    assert cfn.referenced(props["LoggingConfig"]["LogGroup"]) in cfn.of_type("AWS::Logs::LogGroup")


def test_the_layer_targets_the_function_runtime(template: Template) -> None:
    # Given / When: the synthesized stack
    # Then
    template.has_resource_properties(
        "AWS::Lambda::LayerVersion",
        {
            "CompatibleRuntimes": [f"python{assets.LAMBDA_PYTHON_VERSION}"],
            "CompatibleArchitectures": ["x86_64"],
        },
    )


@pytest.mark.parametrize("spec", resources.FUNCTIONS, ids=lambda f: f.key)
def test_function_environment_is_what_settings_reads(
    cfn: Cfn, prefix: str, config: EnvironmentConfig, spec: resources.Function
) -> None:
    # Given: the queues and buckets of the stack
    queue_ids = {
        q.key: cfn.named("AWS::SQS::Queue", "QueueName", q.physical_name(prefix))[0] for q in resources.QUEUES
    }
    bucket_ids = {
        b.key: cfn.named("AWS::S3::Bucket", "BucketName", b.physical_name(prefix, "<AWS::AccountId>"))[0]
        for b in resources.BUCKETS
    }

    # When
    _, props = _function(cfn, prefix, spec.key)
    variables = props["Environment"]["Variables"]

    # Then: exactly the expected variables, each one a Settings field or a Powertools setting
    assert set(variables) == EXPECTED_VARIABLES | (
        SCHEDULE_VARIABLES if spec.key in ("api", "sweeper") else set()
    )
    assert {name.lower() for name in EXPECTED_VARIABLES - POWERTOOLS_VARIABLES} <= set(Settings.model_fields)
    assert variables["ENVIRONMENT"] == config.name
    assert variables["RESOURCE_PREFIX"] == prefix
    assert variables["PUBLIC_BASE_URL"] == config.public_base_url
    assert render_json(variables["QUEUE_URLS"]) == {key: f"<{lid}>" for key, lid in queue_ids.items()}
    assert render_json(variables["BUCKETS"]) == {key: f"<{lid}>" for key, lid in bucket_ids.items()}
    assert cfn.referenced(variables["STATE_MACHINE_ARN"]) in cfn.of_type("AWS::StepFunctions::StateMachine")
    assert cfn.referenced(variables["APP_SECRET_ARN"]) in cfn.of_type("AWS::SecretsManager::Secret")
    assert cfn.referenced(variables["KMS_KEY_ID"]) in cfn.of_type("AWS::KMS::Key")
    assert variables["POWERTOOLS_SERVICE_NAME"] == resources.SERVICE
    assert variables["PYDANTIC_DISABLE_PLUGINS"] == "__all__"


def test_the_cold_start_bench_imports_with_the_functions_runtime_variables(cfn: Cfn, prefix: str) -> None:
    # The bench's figure is the deployed function's only if the variables the libraries read at
    # import (Powertools', pydantic's) are the same (bench/coldstart.py, docs/cold-start.md).
    _, props = _function(cfn, prefix, "api")
    variables = props["Environment"]["Variables"]
    assert {name: coldstart.LAMBDA_ENV[name] for name in POWERTOOLS_VARIABLES} == {
        name: variables[name] for name in POWERTOOLS_VARIABLES
    }


@pytest.mark.parametrize("spec", resources.QUEUES, ids=lambda q: q.key)
def test_each_queue_feeds_its_consumer_with_partial_batch_responses(
    cfn: Cfn, prefix: str, spec: resources.Queue
) -> None:
    # Given
    queue_id, _ = cfn.named("AWS::SQS::Queue", "QueueName", spec.physical_name(prefix))
    function_id, _ = _function(cfn, prefix, spec.consumer)

    # When
    (mapping,) = [
        props
        for props in cfn.properties("AWS::Lambda::EventSourceMapping").values()
        if props["EventSourceArn"] == {"Fn::GetAtt": [queue_id, "Arn"]}
    ]

    # Then
    assert mapping["FunctionName"] == {"Ref": function_id}
    assert mapping["BatchSize"] == spec.batch_size
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    if spec.max_batching_window_seconds:
        assert mapping["MaximumBatchingWindowInSeconds"] == spec.max_batching_window_seconds
    else:
        assert "MaximumBatchingWindowInSeconds" not in mapping


def test_the_sweeper_runs_on_its_schedule(template: Template, cfn: Cfn, prefix: str) -> None:
    # Given
    sweeper_id, _ = _function(cfn, prefix, "sweeper")
    minutes = resources.SWEEPER_RATE_MINUTES

    # When / Then
    template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "ScheduleExpression": f"rate({minutes} minute{'s' if minutes != 1 else ''})",
            "State": "ENABLED",
            "Targets": [Match.object_like({"Arn": {"Fn::GetAtt": [sweeper_id, "Arn"]}})],
        },
    )


def test_the_daily_payments_reconciliation_invokes_the_sweeper_with_its_input(cfn: Cfn, prefix: str) -> None:
    # Given
    sweeper_id, _ = _function(cfn, prefix, "sweeper")

    # When: the rules
    rules = {p["Name"]: p for p in cfn.properties("AWS::Events::Rule").values()}

    # Then a second rule on the sweeper, once a day, whose event is the rule's input, not retried
    rule = rules[f"{prefix}-{resources.RECONCILIATION_RULE}"]
    assert (rule["ScheduleExpression"], rule["State"]) == ("rate(1 day)", "ENABLED")
    (target,) = rule["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": [sweeper_id, "Arn"]}
    assert json.loads(target["Input"]) == resources.RECONCILIATION_EVENT
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 0}
    assert resources.RECONCILIATION_RATE_HOURS == 24


def test_function_roles_carry_no_aws_managed_policy(cfn: Cfn, prefix: str) -> None:
    # Given / When: every function's role
    roles = [cfn.referenced(_function(cfn, prefix, f.key)[1]["Role"]) for f in resources.FUNCTIONS]

    # Then
    for role in roles:
        assert "ManagedPolicyArns" not in cfn.resources[role]["Properties"]


def test_only_the_api_and_the_sweeper_start_workflows(cfn: Cfn, prefix: str) -> None:
    # Given
    (machine_id,) = cfn.of_type("AWS::StepFunctions::StateMachine")

    for spec in resources.FUNCTIONS:
        # When
        role = cfn.referenced(_function(cfn, prefix, spec.key)[1]["Role"])
        on_machine = _statements_on(cfn.policy_statements(role), f"<{machine_id}>")

        # Then
        assert ("states:StartExecution" in on_machine) == (spec.key in {"api", "sweeper"}), spec.key
        task_responses = {"states:SendTaskSuccess", "states:SendTaskFailure", "states:SendTaskHeartbeat"}
        assert (task_responses <= on_machine) == (spec.key != "api"), spec.key


def test_only_the_api_and_the_billing_watch_send_email_and_only_as_the_configured_sender(
    cfn: Cfn, prefix: str, config: EnvironmentConfig
) -> None:
    # The API (accounts, alerts at submit and chat), the settle worker and the sweeper (alerts
    # after a settlement): docs/billing-alerts.md
    for spec in resources.FUNCTIONS:
        # When
        role = cfn.referenced(_function(cfn, prefix, spec.key)[1]["Role"])
        statements = [s for s in cfn.policy_statements(role) if "ses:SendEmail" in as_list(s["Action"])]

        # Then
        if spec.key not in {"api", "settle", "sweeper"}:
            assert statements == [], spec.key
            continue
        (statement,) = statements
        resources_ = {render(r) for r in as_list(statement["Resource"])}
        assert all(
            r.endswith((f"identity/{config.email_domain}", f"identity/{config.email_sender}"))
            for r in resources_
        )


def test_every_function_reads_the_app_secret_and_writes_its_own_logs(cfn: Cfn, prefix: str) -> None:
    # Given
    secret_id, _ = cfn.named("AWS::SecretsManager::Secret", "Name", f"{prefix}/app-secret")

    for spec in resources.FUNCTIONS:
        # When
        _, props = _function(cfn, prefix, spec.key)
        statements = cfn.policy_statements(cfn.referenced(props["Role"]))
        log_group = cfn.referenced(props["LoggingConfig"]["LogGroup"])

        # Then
        assert "secretsmanager:GetSecretValue" in _statements_on(statements, f"<{secret_id}>")
        assert _statements_on(statements, f"<{log_group}.Arn>") == {
            "logs:CreateLogStream",
            "logs:PutLogEvents",
        }
        assert not any(
            a.startswith("logs:")
            for a in _actions(statements) - {"logs:CreateLogStream", "logs:PutLogEvents"}
        )


def test_the_sweeper_may_reclaim_artifacts_and_query_the_reclaim_index(cfn: Cfn, prefix: str) -> None:
    # Given: the artifacts bucket, the batches table, the sweeper's role (docs/retention.md)
    artifacts = resources.bucket("artifacts").physical_name(prefix, "<AWS::AccountId>")
    bucket_id, _ = cfn.named("AWS::S3::Bucket", "BucketName", artifacts)
    batches = resources.table("batches").physical_name(prefix)
    table_id, _ = cfn.named("AWS::DynamoDB::Table", "TableName", batches)
    _, props = _function(cfn, prefix, "sweeper")

    # When
    statements = cfn.policy_statements(cfn.referenced(props["Role"]))

    # Then: it lists the bucket, deletes its objects, and queries the table's indexes
    assert "s3:List*" in _statements_on(statements, f"<{bucket_id}.Arn>")
    assert "s3:DeleteObject*" in _statements_on(statements, f"<{bucket_id}.Arn>/*")
    assert "dynamodb:Query" in _statements_on(statements, f"<{table_id}.Arn>/index/*")


def test_delivery_targets_have_the_permissions_they_rely_on(cfn: Cfn, prefix: str) -> None:
    """docs/delivery-targets.md: the API seals a target's secret key and unseals it for a
    test; the deliver worker (webhook) unseals it to push artifacts; the sweeper puts due
    retries on the deliver queue. (Every function holds the stack key through the encrypted
    tables' grants; the encryption context binds each ciphertext to its org and target.)"""
    # Given: the stack's key and the deliver queue
    (key_id,) = cfn.of_type("AWS::KMS::Key")
    deliver = resources.queue("deliver")
    queue_id, _ = cfn.named("AWS::SQS::Queue", "QueueName", deliver.physical_name(prefix))

    def on(key: str, resource: str) -> set[str]:
        role = cfn.referenced(_function(cfn, prefix, key)[1]["Role"])
        return _statements_on(cfn.policy_statements(role), resource)

    # Then
    assert {"kms:Encrypt", "kms:Decrypt"} <= on("api", f"<{key_id}.Arn>")
    assert "kms:Decrypt" in on("webhook", f"<{key_id}.Arn>")
    assert "sqs:SendMessage" in on("sweeper", f"<{queue_id}.Arn>")
    assert "sqs:SendMessage" in on("api", f"<{queue_id}.Arn>")  # redeliver queues at once
