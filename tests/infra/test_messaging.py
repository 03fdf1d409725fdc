"""Work queues and their dead-letter queues, as batchroute.resources declares them."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Template

from batchroute import resources
from tests.infra.cfn import Cfn


def test_every_queue_has_a_dead_letter_queue(template: Template) -> None:
    # Given / When: the synthesized stack
    # Then: a queue and a DLQ per declared queue
    template.resource_count_is("AWS::SQS::Queue", 2 * len(resources.QUEUES))


@pytest.mark.parametrize("spec", resources.QUEUES, ids=lambda q: q.key)
def test_queue_timeouts_retention_redrive_and_encryption(
    cfn: Cfn, prefix: str, spec: resources.Queue
) -> None:
    # Given: the declared queue and its DLQ
    dlq_id, dlq = cfn.named("AWS::SQS::Queue", "QueueName", spec.dlq_physical_name(prefix))

    # When
    _, queue = cfn.named("AWS::SQS::Queue", "QueueName", spec.physical_name(prefix))
    props = queue["Properties"]

    # Then: visibility and retention as declared, redriven to its own DLQ
    assert props["VisibilityTimeout"] == spec.visibility_timeout_seconds
    assert props["MessageRetentionPeriod"] == spec.retention_seconds
    assert props["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [dlq_id, "Arn"]},
        "maxReceiveCount": spec.max_receive_count,
    }
    assert dlq["Properties"]["MessageRetentionPeriod"] == spec.dlq_retention_seconds
    # And: both encrypted with the stack's key
    for encrypted in (props, dlq["Properties"]):
        assert cfn.referenced(encrypted["KmsMasterKeyId"]).startswith("SecurityKey")


def test_every_queue_denies_requests_without_tls(cfn: Cfn) -> None:
    # Given
    queues = set(cfn.of_type("AWS::SQS::Queue"))

    # When: the queues covered by a TLS-only deny statement
    enforced = set()
    for props in cfn.properties("AWS::SQS::QueuePolicy").values():
        statements = props["PolicyDocument"]["Statement"]
        if any(
            s["Effect"] == "Deny" and s.get("Condition", {}).get("Bool") == {"aws:SecureTransport": "false"}
            for s in statements
        ):
            enforced |= {cfn.referenced(q) for q in props["Queues"]}

    # Then: all of them, DLQs included
    assert enforced == queues
