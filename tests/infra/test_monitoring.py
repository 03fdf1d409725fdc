"""Alarms: dead letters, API 5xx rate, failed and timed-out workflows, all to one topic."""

from __future__ import annotations

from typing import Any

import pytest

from batchroute import resources
from infra.context import EnvironmentConfig
from tests.infra.cfn import Cfn


def _alarms(cfn: Cfn, metric_name: str) -> list[dict[str, Any]]:
    return [
        a for a in cfn.properties("AWS::CloudWatch::Alarm").values() if a.get("MetricName") == metric_name
    ]


@pytest.mark.parametrize("spec", resources.QUEUES, ids=lambda q: q.key)
def test_a_message_in_any_dead_letter_queue_raises_an_alarm(
    cfn: Cfn, prefix: str, spec: resources.Queue
) -> None:
    # Given
    dlq_id, _ = cfn.named("AWS::SQS::Queue", "QueueName", spec.dlq_physical_name(prefix))

    # When
    (alarm,) = [
        a
        for a in _alarms(cfn, "ApproximateNumberOfMessagesVisible")
        if a["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [dlq_id, "QueueName"]}}]
    ]

    # Then
    assert alarm["Namespace"] == "AWS/SQS"
    assert alarm["Threshold"] == 1
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"


def test_the_api_5xx_rate_alarm_uses_the_environment_threshold(cfn: Cfn, config: EnvironmentConfig) -> None:
    # Given / When
    (alarm,) = _alarms(cfn, "5XXError")

    # Then: the average of 5XXError is the share of failed requests
    assert alarm["Namespace"] == "AWS/ApiGateway"
    assert alarm["Statistic"] == "Average"
    assert alarm["Threshold"] == config.api_5xx_rate_threshold
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"


@pytest.mark.parametrize("metric", ["ExecutionsFailed", "ExecutionsTimedOut"])
def test_failed_and_timed_out_workflows_raise_alarms(cfn: Cfn, metric: str) -> None:
    # Given
    (machine_id,) = cfn.of_type("AWS::StepFunctions::StateMachine")

    # When
    (alarm,) = _alarms(cfn, metric)

    # Then
    assert alarm["Namespace"] == "AWS/States"
    assert alarm["Dimensions"] == [{"Name": "StateMachineArn", "Value": {"Ref": machine_id}}]
    assert alarm["Threshold"] == 1


def test_every_alarm_notifies_the_encrypted_tls_only_alarm_topic(cfn: Cfn) -> None:
    # Given
    ((topic_id, topic),) = cfn.properties("AWS::SNS::Topic").items()
    (policy,) = cfn.properties("AWS::SNS::TopicPolicy").values()

    # When
    alarms = cfn.properties("AWS::CloudWatch::Alarm").values()

    # Then
    # a DLQ alarm per queue, three service alarms, lanes marked unavailable, payment events
    # rejected, payment reconciliation differences and failed runs, unrecovered refunds, failed
    # refunds and disputes, failed sweep steps, stranded batch holds resent and auto top-up
    # sweep errors
    assert len(alarms) == len(resources.QUEUES) + 13
    for alarm in alarms:
        assert alarm["AlarmActions"] == [{"Ref": topic_id}]
    assert cfn.referenced(topic["KmsMasterKeyId"]).startswith("SecurityKey")
    assert any(
        s["Effect"] == "Deny" and s.get("Condition", {}).get("Bool") == {"aws:SecureTransport": "false"}
        for s in policy["PolicyDocument"]["Statement"]
    )


@pytest.mark.parametrize(
    "metric",
    [
        "LanesMarkedUnavailable",
        "PaymentEventsRejected",
        "PaymentReconciliationDifferences",
        "PaymentReconciliationFailed",
        "PaymentReversalUnrecovered",
        "PaymentRefundsFailed",
        "PaymentDisputes",
        "SweepStepFailed",
        "StrandedBatchHoldsResent",
        "AutoTopupSweepErrors",
    ],
)
def test_operator_metrics_raise_an_alarm(cfn: Cfn, config: EnvironmentConfig, metric: str) -> None:
    # Given / When: the metrics the lane runner (a vendor account cannot serve) and the payment
    # webhook (a signed event that matches nothing the service sells) emit
    (alarm,) = _alarms(cfn, metric)

    # Then it alarms on the first one, in this environment
    assert alarm["Namespace"] == "BatchRoute"
    assert alarm["Statistic"] == "Sum"
    assert alarm["Threshold"] == 1
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert {d["Name"]: d["Value"] for d in alarm["Dimensions"]} == {
        "service": resources.SERVICE,
        "environment": config.name,
    }
