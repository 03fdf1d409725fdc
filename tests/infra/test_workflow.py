"""The batch workflow state machine: the shared ASL, its substitutions, its narrow role."""

from __future__ import annotations

import json
import re
from typing import Any

from aws_cdk.assertions import Match, Template

from batchroute import resources
from tests.infra.cfn import Cfn, as_list, render

WAIT_FOR_TASK_TOKEN = "arn:aws:states:::sqs:sendMessage.waitForTaskToken"


def _state_machine(cfn: Cfn) -> tuple[str, dict[str, Any]]:
    ((logical_id, props),) = cfn.properties("AWS::StepFunctions::StateMachine").items()
    return logical_id, props


def _task_resources(states: dict[str, Any]) -> list[str]:
    found = []
    for state in states.values():
        if "Resource" in state:
            found.append(state["Resource"])
        for nested in (state.get("Iterator"), state.get("ItemProcessor")):
            if nested:
                found += _task_resources(nested["States"])
    return found


def test_a_standard_traced_logged_state_machine(template: Template, prefix: str) -> None:
    # Given / When: the synthesized stack
    # Then
    template.resource_count_is("AWS::StepFunctions::StateMachine", 1)
    template.has_resource_properties(
        "AWS::StepFunctions::StateMachine",
        {
            "StateMachineName": resources.state_machine_name(prefix),
            "StateMachineType": "STANDARD",
            "TracingConfiguration": {"Enabled": True},
            "LoggingConfiguration": Match.object_like({"Level": "ALL"}),
        },
    )


def test_the_definition_is_the_shared_asl_handing_work_to_queues(cfn: Cfn) -> None:
    # Given
    _, props = _state_machine(cfn)

    # When
    definition = props["DefinitionString"]
    asl = json.loads(definition)

    # Then: the shared file, verbatim; every worker task waits on a task token over SQS
    assert definition == resources.workflow_definition_template()
    tasks = _task_resources(asl["States"])
    assert WAIT_FOR_TASK_TOKEN in tasks
    assert set(tasks) <= {WAIT_FOR_TASK_TOKEN, "arn:aws:states:::dynamodb:updateItem"}
    assert "lambda:invoke" not in definition


def test_every_placeholder_is_substituted_with_the_stack_resources(cfn: Cfn, prefix: str) -> None:
    # Given
    _, props = _state_machine(cfn)
    queue_ids = {
        q.key: cfn.named("AWS::SQS::Queue", "QueueName", q.physical_name(prefix))[0] for q in resources.QUEUES
    }
    batches_id, _ = cfn.named(
        "AWS::DynamoDB::Table", "TableName", resources.table("batches").physical_name(prefix)
    )

    # When
    placeholders = set(re.findall(r"\$\{(\w+)\}", props["DefinitionString"]))
    substitutions = props["DefinitionSubstitutions"]

    # Then: CloudFormation resolves every ${...}: the queue URLs and the batches table
    assert placeholders == set(substitutions) == set(resources.WORKFLOW_SUBSTITUTIONS)
    expected = resources.workflow_substitutions(
        queue_urls={key: f"<{lid}>" for key, lid in queue_ids.items()}, batches_table_name=f"<{batches_id}>"
    )
    assert {name: render(value) for name, value in substitutions.items()} == expected
    rendered = resources.render_workflow_definition(dict.fromkeys(substitutions, "resolved"))
    assert "${" not in rendered


def test_the_state_machine_role_only_sends_to_queues_and_updates_batches(cfn: Cfn, prefix: str) -> None:
    # Given
    _, props = _state_machine(cfn)
    batches_id, _ = cfn.named(
        "AWS::DynamoDB::Table", "TableName", resources.table("batches").physical_name(prefix)
    )
    queues = {
        f"<{cfn.named('AWS::SQS::Queue', 'QueueName', q.physical_name(prefix))[0]}.Arn>"
        for q in resources.QUEUES
    }

    # When
    statements = cfn.policy_statements(cfn.referenced(props["RoleArn"]))

    # Then: DynamoDB UpdateItem on the batches table (and its indexes) only
    dynamodb = [s for s in statements if any(a.startswith("dynamodb:") for a in as_list(s["Action"]))]
    assert [as_list(s["Action"]) for s in dynamodb] == [["dynamodb:UpdateItem"]]
    assert {render(r) for r in as_list(dynamodb[0]["Resource"])} == {
        f"<{batches_id}.Arn>",
        f"<{batches_id}.Arn>/index/*",
    }
    # And: SQS SendMessage on the four work queues, nothing else on SQS
    sqs = [s for s in statements if any(a.startswith("sqs:") for a in as_list(s["Action"]))]
    assert {a for s in sqs for a in as_list(s["Action"])} <= {
        "sqs:SendMessage",
        "sqs:GetQueueAttributes",
        "sqs:GetQueueUrl",
    }
    assert {render(r) for s in sqs for r in as_list(s["Resource"])} == queues
    # And: no Lambda, no other service beyond KMS for the encrypted queues, logs and tracing
    services = {a.split(":")[0] for s in statements for a in as_list(s["Action"])}
    assert services == {"sqs", "dynamodb", "kms", "logs", "xray"}
