"""One environment's stack: every resource batchroute.resources declares, wired together."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack, Tags
from constructs import Construct

from batchroute import resources
from infra import assets
from infra.api import Api
from infra.compute import API, SWEEPER, Compute
from infra.console import Console
from infra.context import EnvironmentConfig
from infra.messaging import Messaging
from infra.monitoring import Monitoring
from infra.nag import acknowledge_findings
from infra.providers import Providers
from infra.schedules import ScheduleTriggers
from infra.security import Security
from infra.storage import Storage
from infra.workflow import Workflow


def stack_name(environment: str) -> str:
    name: str = resources.resource_prefix(environment)
    return name


class BatchRouteStack(Stack):
    def __init__(self, scope: Construct, *, config: EnvironmentConfig, **kwargs: Any) -> None:
        prefix = resources.resource_prefix(config.name)
        super().__init__(
            scope,
            stack_name(config.name),
            description=f"{resources.SERVICE} ({config.name}): batch AI routing service",
            termination_protection=config.is_production,
            **kwargs,
        )
        self.config = config
        self.security = Security(self, "Security", prefix=prefix, config=config)
        key = self.security.key
        self.storage = Storage(self, "Storage", prefix=prefix, config=config, key=key)
        self.messaging = Messaging(self, "Messaging", prefix=prefix, key=key)
        self.workflow = Workflow(
            self,
            "Workflow",
            prefix=prefix,
            config=config,
            queues=self.messaging.queues,
            batches_table=self.storage.tables["batches"],
            key=key,
        )
        self.providers = Providers(
            self,
            "Providers",
            prefix=prefix,
            config=config,
            security=self.security,
            artifacts=self.storage.buckets["artifacts"],
        )
        self.compute = Compute(
            self,
            "Compute",
            prefix=prefix,
            config=config,
            security=self.security,
            storage=self.storage,
            messaging=self.messaging,
            workflow=self.workflow,
            providers=self.providers,
        )
        self.schedule_triggers = ScheduleTriggers(
            self,
            "ScheduleTriggers",
            prefix=prefix,
            apis=(self.compute.functions[API], self.compute.api_stream),
            sweeper=self.compute.functions[SWEEPER],
            sweeper_name=f"{prefix}-{SWEEPER}",
        )
        self.api = Api(
            self,
            "Api",
            prefix=prefix,
            config=config,
            handler=self.compute.api_alias,
            stream_handler=self.compute.api_stream,
            key=key,
        )
        self.console = Console(
            self,
            "Console",
            prefix=prefix,
            config=config,
            api=self.api,
            access_logs=self.storage.access_logs,
            uploads=self.storage.buckets["uploads"],
            dist=assets.console_dist(),
        )
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            prefix=prefix,
            config=config,
            key=key,
            dead_letter_queues=self.messaging.dead_letter_queues,
            rest_api=self.api.rest_api,
            state_machine=self.workflow.state_machine,
        )

        Tags.of(self).add("service", resources.SERVICE)
        Tags.of(self).add("environment", config.name)
        CfnOutput(self, "ApiUrl", value=self.api.rest_api.url)
        CfnOutput(self, "StateMachineArn", value=self.workflow.state_machine.state_machine_arn)
        CfnOutput(self, "AlarmTopicArn", value=self.monitoring.topic.topic_arn)
        acknowledge_findings(
            self,
            storage=self.storage,
            security=self.security,
            workflow=self.workflow,
            compute=self.compute,
            api=self.api,
            providers=self.providers,
            console=self.console,
            schedule_triggers=self.schedule_triggers,
        )
