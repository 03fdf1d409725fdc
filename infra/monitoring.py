"""Alarms on what needs a human: dead letters, API server errors, failed workflows, lanes
marked unavailable because a vendor account cannot serve (out of credit), payment events
refused, and a payments reconciliation that found differences or could not run."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from batchroute import resources
from infra.context import EnvironmentConfig
from infra.naming import construct_id

# The application's own metrics (batchroute/observability.py: powertools Metrics, namespace
# BatchRoute, dimensions service and environment).
APP_NAMESPACE = "BatchRoute"


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id_: str,
        *,
        prefix: str,
        config: EnvironmentConfig,
        key: kms.IKey,
        dead_letter_queues: dict[str, sqs.Queue],
        rest_api: apigateway.RestApi,
        state_machine: sfn.StateMachine,
    ) -> None:
        super().__init__(scope, construct_id_)
        self._prefix = prefix
        self.topic = sns.Topic(
            self,
            "AlarmTopic",
            topic_name=f"{prefix}-alarms",
            display_name=f"{prefix} alarms",
            master_key=key,
            enforce_ssl=True,
        )
        if config.alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(config.alarm_email))
        self.alarms: list[cloudwatch.Alarm] = []

        for key_, dlq in dead_letter_queues.items():
            self._alarm(
                construct_id(key_, "DeadLettersAlarm"),
                name=f"{key_}-dead-letters",
                description=f"Messages reached the {key_} dead-letter queue: inspect, fix, redrive.",
                metric=dlq.metric_approximate_number_of_messages_visible(
                    period=Duration.minutes(1), statistic="Maximum"
                ),
                threshold=1,
            )
        # 5XXError averages to the share of requests that failed (each request counts 0 or 1).
        self._alarm(
            "Api5xxRateAlarm",
            name="api-5xx-rate",
            description=f"More than {config.api_5xx_rate_threshold:.0%} of API requests failed with 5xx.",
            metric=rest_api.metric_server_error(period=Duration.minutes(5), statistic="Average"),
            threshold=config.api_5xx_rate_threshold,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        )
        self._alarm(
            "WorkflowFailedAlarm",
            name="workflow-executions-failed",
            description="A batch workflow execution failed.",
            metric=state_machine.metric_failed(period=Duration.minutes(5), statistic="Sum"),
            threshold=1,
        )
        self._alarm(
            "WorkflowTimedOutAlarm",
            name="workflow-executions-timed-out",
            description="A batch workflow execution timed out.",
            metric=state_machine.metric_timed_out(period=Duration.minutes(5), statistic="Sum"),
            threshold=1,
        )

        # The lane runner marks a provider's lanes unavailable when its account cannot serve
        # (services/workflow/execution.py, mark_account_down): someone must add credit.
        self._app_metric_alarm(
            "LanesMarkedUnavailable",
            name="lanes-marked-unavailable",
            description="A vendor account cannot serve (e.g. out of credit): its lanes were marked "
            "unavailable. Check the provider account; the lanes come back by themselves an hour later.",
            environment=config.name,
        )
        # A signed processor event that does not match what the service sells was refused
        # (services/billing/payments.py): nothing was credited; someone must look at why.
        self._app_metric_alarm(
            "PaymentEventsRejected",
            name="payment-events-rejected",
            description="A signed payment event did not match what the service sells (currency, "
            "amount) and credited nothing. Check the event id in the API's error log.",
            environment=config.name,
        )

        # A refund or lost dispute took back less than it owed: the org had spent the credit
        # already, and the service bore the rest (services/billing/reversals.py).
        self._app_metric_alarm(
            "PaymentReversalUnrecovered",
            name="payment-reversal-unrecovered",
            description="A refund or lost dispute could not take all its credit back (already spent). "
            "See the 'payment reversed' error log line (org, payment) and docs/payments.md.",
            environment=config.name,
        )
        # A refund the processor had made failed (the payer's card or bank refused it): the
        # service gave the credit back, but the customer asked for money, not credit
        # (services/billing/reversals.py).
        self._app_metric_alarm(
            "PaymentRefundsFailed",
            name="payment-refunds-failed",
            description="A refund failed at the processor and its credit was given back to the org's "
            "wallet; the customer is still owed the refund. See the 'payment refund failed' log line "
            "(org, payment, amounts) and docs/payments.md, Refunds and disputes.",
            environment=config.name,
        )
        # A payer disputed a payment (a chargeback): look at the org before the dispute is lost.
        self._app_metric_alarm(
            "PaymentDisputes",
            name="payment-disputes",
            description="A payment was disputed (or a dispute closed). See the 'payment disputed' "
            "log line (org, payment, dispute) and docs/payments.md, Refunds and disputes.",
            environment=config.name,
        )

        # A step of the minute sweep raised (services/workflow/sweeper.py): the later steps ran,
        # this one is tried again each minute until someone looks at why.
        self._app_metric_alarm(
            "SweepStepFailed",
            name="sweep-step-failed",
            description="A step of the scheduled sweep failed (the others ran). See the 'sweep step "
            "failed' error log line (its step) in the sweeper's log.",
            environment=config.name,
        )
        # A batch hold no workflow would settle was handed to the settle worker
        # (services/workflow/stranded.py): the money is resolved, but a workflow ended without
        # settling, and someone should find out why (a stopped execution, a long settle outage).
        self._app_metric_alarm(
            "StrandedBatchHoldsResent",
            name="stranded-batch-holds-resent",
            description="The sweep sent a batch's fail step to the settle worker: its workflow ended "
            "without settling its hold. See the sweeper's 'stranded batch hold: fail step sent' log line "
            "(batch, org, state) and docs/batches.md, A workflow that ends unsettled.",
            environment=config.name,
        )
        # An auto top-up attempt raised something other than a processor outage; it was left
        # pending and the sweep went on to the next (services/billing/auto_topup.py).
        self._app_metric_alarm(
            "AutoTopupSweepErrors",
            name="auto-topup-sweep-errors",
            description="An auto top-up attempt failed unexpectedly and was left pending. See the "
            "sweeper's error log (org, attempt) and docs/payments.md, Auto top-up.",
            environment=config.name,
        )

        # The daily payments reconciliation (services/billing/reconciliation.py) found ledger
        # credits and processor payments that disagree, or could not run (docs/payments.md).
        self._app_metric_alarm(
            "PaymentReconciliationDifferences",
            name="payment-reconciliation-differences",
            description="The daily payments reconciliation found credits and processor payments that "
            "disagree. Run `batchroute-admin payments reconcile` and see docs/payments.md.",
            environment=config.name,
        )
        self._app_metric_alarm(
            "PaymentReconciliationFailed",
            name="payment-reconciliation-failed",
            description="The daily payments reconciliation could not run (processor or keys). "
            "See the sweeper's error log; run `batchroute-admin payments reconcile` by hand.",
            environment=config.name,
        )

    def _app_metric_alarm(self, metric_name: str, *, name: str, description: str, environment: str) -> None:
        """An alarm on the first count of one of the service's own metrics (observability.py's
        namespace and dimensions) in five minutes."""
        self._alarm(
            f"{metric_name}Alarm",
            name=name,
            description=description,
            metric=cloudwatch.Metric(
                namespace=APP_NAMESPACE,
                metric_name=metric_name,
                dimensions_map={"service": resources.SERVICE, "environment": environment},
                period=Duration.minutes(5),
                statistic="Sum",
            ),
            threshold=1,
        )

    def _alarm(
        self,
        construct_id_: str,
        *,
        name: str,
        description: str,
        metric: cloudwatch.IMetric,
        threshold: float,
        comparison: cloudwatch.ComparisonOperator = (
            cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
        ),
    ) -> None:
        alarm = cloudwatch.Alarm(
            self,
            construct_id_,
            alarm_name=f"{self._prefix}-{name}",
            alarm_description=description,
            metric=metric,
            threshold=threshold,
            comparison_operator=comparison,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        action = cloudwatch_actions.SnsAction(self.topic)
        alarm.add_alarm_action(action)
        alarm.add_ok_action(action)
        self.alarms.append(alarm)
