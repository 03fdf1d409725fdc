"""The batch workflow state machine: the shared ASL file with its ${...} placeholders substituted."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from batchroute import resources
from infra.context import EnvironmentConfig


class Workflow(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        prefix: str,
        config: EnvironmentConfig,
        queues: dict[str, sqs.Queue],
        batches_table: dynamodb.ITable,
        key: kms.IKey,
    ) -> None:
        super().__init__(scope, construct_id)
        name = resources.state_machine_name(prefix)
        self.state_machine_name = name
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            # The /aws/vendedlogs/ prefix keeps the logs resource policy small.
            log_group_name=f"/aws/vendedlogs/states/{name}",
            retention=config.log_retention,
            removal_policy=RemovalPolicy.RETAIN if config.is_production else RemovalPolicy.DESTROY,
        )
        substitutions = resources.workflow_substitutions(
            queue_urls={key_: queue.queue_url for key_, queue in queues.items()},
            batches_table_name=batches_table.table_name,
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            state_machine_name=name,
            state_machine_type=sfn.StateMachineType.STANDARD,
            definition_body=sfn.DefinitionBody.from_string(resources.workflow_definition_template()),
            definition_substitutions=substitutions,
            logs=sfn.LogOptions(
                destination=self.log_group,
                level=sfn.LogLevel.ALL,
                # Steps carry ids and task tokens only; the batch record holds the data.
                include_execution_data=False,
            ),
            tracing_enabled=True,
        )
        # Every task hands work to a queue (sqs:sendMessage.waitForTaskToken); the first
        # records the execution on the batch. Nothing else.
        for queue in queues.values():
            queue.grant_send_messages(self.state_machine)
        batches_table.grant(self.state_machine, "dynamodb:UpdateItem")
        key.grant_encrypt_decrypt(self.state_machine)
