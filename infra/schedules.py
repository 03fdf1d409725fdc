"""The triggers of recurring schedules (docs/schedules.md): the EventBridge Scheduler group
the API manages one schedule per active customer schedule in, the role the scheduler assumes
to invoke the sweeper function (which calls `Schedules.fire`), and the API's permission to
manage schedules in that group only and to pass that role to the scheduler only, and the
sweeper's to delete one of them (a trigger that outlived its schedule)."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_scheduler as scheduler
from constructs import Construct

SCHEDULE_ACTIONS = (
    "scheduler:CreateSchedule",
    "scheduler:UpdateSchedule",
    "scheduler:DeleteSchedule",
    "scheduler:GetSchedule",
)
# The API creates one EventBridge schedule per customer schedule, named after it at runtime.
SCHEDULES_IN_GROUP = (
    "Each customer schedule gets its own EventBridge schedule, named after it at runtime: the "
    "API may manage, and the sweeper delete, the schedules of this one group only."
)


class ScheduleTriggers(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id_: str,
        *,
        prefix: str,
        apis: Sequence[lambda_.Function],
        sweeper: lambda_.Function,
        sweeper_name: str,
    ) -> None:
        super().__init__(scope, construct_id_)
        stack = Stack.of(self)
        self.group_name = f"{prefix}-schedules"
        self.group = scheduler.CfnScheduleGroup(self, "Group", name=self.group_name)
        self.role = iam.Role(
            self,
            "InvokeRole",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": stack.account}},
            ),
            description=f"{prefix}: EventBridge Scheduler invokes the sweeper for customer schedules",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[sweeper.function_arn])
        )
        self.schedules_arn = stack.format_arn(
            service="scheduler",
            resource="schedule",
            resource_name=f"{self.group_name}/*",
            arn_format=ArnFormat.SLASH_RESOURCE_NAME,
        )
        for api in apis:  # the API function and its streaming twin run the same app
            api.add_to_role_policy(
                iam.PolicyStatement(actions=list(SCHEDULE_ACTIONS), resources=[self.schedules_arn])
            )
            api.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["iam:PassRole"],
                    resources=[self.role.role_arn],
                    conditions={"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}},
                )
            )
        # A trigger that fires for a schedule no longer there removes itself (Schedules.fire):
        # the sweeper may delete the group's schedules, nothing more.
        sweeper.add_to_role_policy(
            iam.PolicyStatement(actions=["scheduler:DeleteSchedule"], resources=[self.schedules_arn])
        )
        # By name, not by GetAtt: the sweeper's own environment names it (no cycle).
        target_arn = stack.format_arn(
            service="lambda",
            resource="function",
            resource_name=sweeper_name,
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        environment = {
            "SCHEDULE_GROUP_NAME": self.group_name,
            "SCHEDULE_ROLE_ARN": self.role.role_arn,
            "SCHEDULE_TARGET_ARN": target_arn,
        }
        for function in (*apis, sweeper):
            for name, value in environment.items():
                function.add_environment(name, value)
