"""The shared layer, one Lambda function per batchroute.resources.FUNCTIONS entry, their
triggers (SQS event sources, the sweeper schedule) and least-privilege grants."""

from __future__ import annotations

import json

from aws_cdk import ArnFormat, Duration, RemovalPolicy, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_logs as logs
from constructs import Construct

from batchroute import resources
from infra import assets
from infra.context import EnvironmentConfig
from infra.messaging import Messaging
from infra.naming import construct_id
from infra.providers import Providers
from infra.security import Security
from infra.storage import Storage
from infra.workflow import Workflow

RUNTIME = lambda_.Runtime.PYTHON_3_12  # the layer's wheels are built for it (infra.assets)
ARCHITECTURE = lambda_.Architecture.X86_64
POWERTOOLS_SERVICE_NAME = resources.SERVICE
POWERTOOLS_METRICS_NAMESPACE = "BatchRoute"
# The service installs no pydantic plugin, so pydantic need not scan every installed
# distribution's entry points when it builds its first model (~5 ms of each cold start;
# docs/cold-start.md).
PYDANTIC_DISABLE_PLUGINS = "__all__"

API = "api"
SWEEPER = "sweeper"
# The functions that call AI providers: the API (direct chat), the router (lanes) and the
# sweeper (each provider's health check refreshes its lanes' heartbeats).
PROVIDER_CALLERS = frozenset({"api", "router", "sweeper"})
# The functions that call the payment processor (docs/payments.md).
PAYMENT_CALLERS = frozenset({"api", "sweeper"})
# SnapStart (Python 3.12+): the API function starts from a snapshot of its initialized
# memory instead of importing (docs/cold-start.md; hooks in functions/api/snapstart.py).
SNAPSTART = frozenset({"api"})
API_ALIAS = "live"
# The streamed routes (docs/chat.md, "On AWS"): the same app and code under the AWS Lambda
# Web Adapter, which runs it in uvicorn and hands each chunk to Lambda's response stream.
API_STREAM = "api-stream"
STREAM_SCRIPT = "functions/api/stream.sh"  # the handler: starts uvicorn (LWA runs it)
STREAM_PORT = "8080"
# The adapter's public layer (awslabs/aws-lambda-web-adapter, x86_64), pinned.
WEB_ADAPTER_ACCOUNT = "753240598075"
WEB_ADAPTER_LAYER = "LambdaAdapterLayerX86:25"
# Workers answer the workflow's task tokens (router, settle, webhook).
WORKERS = frozenset(q.consumer for q in resources.QUEUES)
# The functions that send email: the API (accounts, and billing alerts after a reservation or
# a chat charge), and those running the billing watch after a settlement: the settle worker
# and the sweeper (stale chat holds, grants' follow-ups) (docs/billing-alerts.md).
EMAIL_SENDERS = frozenset({"api", "settle", "sweeper"})


class Compute(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id_: str,
        *,
        prefix: str,
        config: EnvironmentConfig,
        security: Security,
        storage: Storage,
        messaging: Messaging,
        workflow: Workflow,
        providers: Providers,
    ) -> None:
        super().__init__(scope, construct_id_)
        _require_assets()
        self._providers = providers
        self._config = config
        self._security = security
        self._storage = storage
        self._messaging = messaging
        self._workflow = workflow

        self.layer = lambda_.LayerVersion(
            self,
            "SharedLayer",
            layer_version_name=f"{prefix}-shared",
            description=f"{resources.SERVICE} package and its runtime dependencies",
            code=lambda_.Code.from_asset(str(assets.LAYER_DIR)),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[ARCHITECTURE],
        )
        environment = self._environment(prefix)
        self.functions = {
            spec.key: self._function(spec, prefix=prefix, environment=environment)
            for spec in resources.FUNCTIONS
        }
        for spec in resources.FUNCTIONS:
            self._grant(spec.key, self.functions[spec.key])
        self.api_stream = self._stream_function(prefix, environment)
        self._grant(API, self.api_stream)  # the same app: the same grants as the API
        # SnapStart restores published versions only: API Gateway invokes this alias, which
        # CDK moves to a new version whenever the function's code or configuration changes.
        self.api_alias = lambda_.Alias(
            self,
            "ApiLive",
            alias_name=API_ALIAS,
            version=self.functions[API].current_version,
            description="the API version API Gateway invokes (SnapStart restores it)",
        )
        self._connect_queues()
        self.sweeper_schedule = events.Rule(
            self,
            "SweeperSchedule",
            rule_name=f"{prefix}-{SWEEPER}",
            description="SLA expiry, stale holds and heartbeats, retention GC, delivery retries",
            schedule=events.Schedule.rate(Duration.minutes(resources.SWEEPER_RATE_MINUTES)),
            # The next tick does the same work: no retries to pile up.
            targets=[targets.LambdaFunction(self.functions[SWEEPER], retry_attempts=0)],
        )
        # The daily payments reconciliation (docs/payments.md): the sweeper function with the
        # rule's input; alarms on PaymentReconciliationDifferences / ...Failed (monitoring.py).
        self.reconciliation_schedule = events.Rule(
            self,
            "PaymentReconciliationSchedule",
            rule_name=f"{prefix}-{resources.RECONCILIATION_RULE}",
            description="daily payments reconciliation: ledger credits against the processor's payments",
            schedule=events.Schedule.rate(Duration.hours(resources.RECONCILIATION_RATE_HOURS)),
            targets=[
                targets.LambdaFunction(
                    self.functions[SWEEPER],
                    event=events.RuleTargetInput.from_object(resources.RECONCILIATION_EVENT),
                    retry_attempts=0,  # a failed run is counted and alarmed; the next day covers it
                )
            ],
        )

    def _environment(self, prefix: str) -> dict[str, str]:
        """Variables batchroute.config.Settings reads (uppercase field names) plus Powertools' and
        pydantic's."""
        stack = Stack.of(self)
        return {
            "ENVIRONMENT": self._config.name,
            "RESOURCE_PREFIX": prefix,
            "QUEUE_URLS": stack.to_json_string(self._messaging.urls()),
            "BUCKETS": stack.to_json_string(
                {key: bucket.bucket_name for key, bucket in self._storage.buckets.items()}
            ),
            "STATE_MACHINE_ARN": self._workflow.state_machine.state_machine_arn,
            "KMS_KEY_ID": self._security.key.key_id,
            "APP_SECRET_ARN": self._security.app_secret.secret_arn,
            "PUBLIC_BASE_URL": self._config.public_base_url,
            "EMAIL_SENDER": self._config.email_sender,
            "LOG_LEVEL": self._config.log_level,
            "POWERTOOLS_SERVICE_NAME": POWERTOOLS_SERVICE_NAME,
            "POWERTOOLS_METRICS_NAMESPACE": POWERTOOLS_METRICS_NAMESPACE,
            "PYDANTIC_DISABLE_PLUGINS": PYDANTIC_DISABLE_PLUGINS,
            **self._providers.environment(),
            **self._console_origins(),
        }

    def _console_origins(self) -> dict[str, str]:
        """The console's names besides PUBLIC_BASE_URL's: their pages' cookie writes are the
        service's own (docs/auth.md, Cross-site writes). Only set with a console domain."""
        names = self._config.console_domain_names
        return {"CONSOLE_ORIGINS": json.dumps([f"https://{name}" for name in names])} if names else {}

    def _function(
        self, spec: resources.Function, *, prefix: str, environment: dict[str, str]
    ) -> lambda_.Function:
        name = f"{prefix}-{spec.key}"
        log_group = logs.LogGroup(
            self,
            construct_id(spec.key, "Logs"),
            log_group_name=f"/aws/lambda/{name}",
            retention=self._config.log_retention,
            removal_policy=RemovalPolicy.RETAIN if self._config.is_production else RemovalPolicy.DESTROY,
        )
        # An explicit role instead of the AWSLambdaBasicExecutionRole managed policy:
        # it may write to its own log group only.
        role = iam.Role(
            self,
            construct_id(spec.key, "Role"),
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"{name}: {spec.purpose}",
        )
        log_group.grant_write(role)
        return lambda_.Function(
            self,
            construct_id(spec.key, "Function"),
            function_name=name,
            description=spec.purpose,
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=spec.handler,
            code=lambda_.Code.from_asset(str(assets.function_asset_dir(spec.key))),
            layers=[self.layer],
            timeout=Duration.seconds(spec.timeout_seconds),
            memory_size=spec.memory_mb,
            reserved_concurrent_executions=spec.reserved_concurrency,
            tracing=lambda_.Tracing.ACTIVE,
            role=role,
            log_group=log_group,
            environment=environment,
            snap_start=lambda_.SnapStartConf.ON_PUBLISHED_VERSIONS if spec.key in SNAPSTART else None,
        )

    def _stream_function(self, prefix: str, environment: dict[str, str]) -> lambda_.Function:
        """The API app for the routes that stream (chat completions, the compat API's file
        downloads): API Gateway invokes it with InvokeWithResponseStream; the Lambda Web
        Adapter (an extension from its layer) starts `stream.sh` (uvicorn on the same ASGI
        app), forwards each request to it, and writes the response to Lambda's response
        stream as uvicorn produces it: the first SSE event leaves when the provider's first
        byte has arrived, not when the answer ends."""
        (api,) = [spec for spec in resources.FUNCTIONS if spec.key == API]
        name = f"{prefix}-{API_STREAM}"
        log_group = logs.LogGroup(
            self,
            "ApiStreamLogs",
            log_group_name=f"/aws/lambda/{name}",
            retention=self._config.log_retention,
            removal_policy=RemovalPolicy.RETAIN if self._config.is_production else RemovalPolicy.DESTROY,
        )
        role = iam.Role(
            self,
            "ApiStreamRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"{name}: streamed API routes",
        )
        log_group.grant_write(role)
        adapter = lambda_.LayerVersion.from_layer_version_arn(
            self,
            "WebAdapterLayer",
            Stack.of(self).format_arn(
                service="lambda",
                account=WEB_ADAPTER_ACCOUNT,
                resource="layer",
                resource_name=WEB_ADAPTER_LAYER,
                arn_format=ArnFormat.COLON_RESOURCE_NAME,
            ),
        )
        return lambda_.Function(
            self,
            "ApiStreamFunction",
            function_name=name,
            description="HTTP API, streamed routes (FastAPI in uvicorn via the Lambda Web Adapter)",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=STREAM_SCRIPT,
            code=lambda_.Code.from_asset(str(assets.function_asset_dir(API))),
            layers=[adapter, self.layer],
            timeout=Duration.seconds(resources.STREAM_TIMEOUT_SECONDS),
            memory_size=api.memory_mb,
            tracing=lambda_.Tracing.ACTIVE,
            role=role,
            log_group=log_group,
            environment={
                **environment,
                "AWS_LAMBDA_EXEC_WRAPPER": "/opt/bootstrap",
                "AWS_LWA_INVOKE_MODE": "response_stream",
                "AWS_LWA_PORT": STREAM_PORT,
                "AWS_LWA_READINESS_CHECK_PATH": "/v1/health",
            },
        )

    def _grant(self, key: str, function: lambda_.Function) -> None:
        tables = self._storage.tables.values()
        buckets = self._storage.buckets
        state_machine = self._workflow.state_machine
        for table in tables:
            table.grant_read_write_data(function)
        for queue in self._messaging.queues.values():
            queue.grant_send_messages(function)  # enqueue and re-enqueue work
        self._security.app_secret.grant_read(function)
        buckets["artifacts"].grant_read_write(function)
        if key in PROVIDER_CALLERS:  # direct chat, and the lanes (docs/providers.md)
            self._providers.grant_calls(function)
        if key in PAYMENT_CALLERS:  # checkout, the processor's webhook, auto top-up charges
            self._providers.grant_payments(function)
        if key == API:
            buckets["uploads"].grant_read_write(function)
            state_machine.grant_start_execution(function)
            self._security.key.grant_encrypt_decrypt(function)
        elif key in WORKERS:
            if key == "router":  # checks large signed uploads: copies them out of staging, deletes staging
                buckets["uploads"].grant_read_write(function)
            else:
                buckets["uploads"].grant_read(function)
            state_machine.grant_task_response(function)
        elif key == SWEEPER:
            buckets["uploads"].grant_delete(function)  # retention GC of customer inputs
            state_machine.grant_start_execution(function)
            state_machine.grant_task_response(function)
            function.add_to_role_policy(self._executions_statement())
        else:
            raise ValueError(f"no grants declared for function {key!r}")
        if key in EMAIL_SENDERS:
            function.add_to_role_policy(self._send_email_statement())

    def _executions_statement(self) -> iam.PolicyStatement:
        # Execution ARNs are minted per run: scope to this state machine's executions.
        return iam.PolicyStatement(
            actions=["states:StopExecution", "states:DescribeExecution"],
            resources=[executions_arn(self, self._workflow.state_machine_name)],
        )

    def _send_email_statement(self) -> iam.PolicyStatement:
        stack = Stack.of(self)
        identities = {self._config.email_domain, self._config.email_sender}
        return iam.PolicyStatement(
            actions=["ses:SendEmail", "ses:SendRawEmail"],
            resources=[
                stack.format_arn(service="ses", resource="identity", resource_name=identity)
                for identity in sorted(identities)
            ],
        )

    def _connect_queues(self) -> None:
        for spec in resources.QUEUES:
            window = spec.max_batching_window_seconds
            self.functions[spec.consumer].add_event_source(
                event_sources.SqsEventSource(
                    self._messaging.queues[spec.key],
                    batch_size=spec.batch_size,
                    max_batching_window=Duration.seconds(window) if window > 0 else None,
                    report_batch_item_failures=True,
                )
            )


def executions_arn(scope: Construct, state_machine_name: str) -> str:
    return Stack.of(scope).format_arn(
        service="states",
        resource="execution",
        resource_name=f"{state_machine_name}:*",
        arn_format=ArnFormat.COLON_RESOURCE_NAME,
    )


def _require_assets() -> None:
    missing = [assets.LAYER_DIR / "python" / resources.SERVICE] + [
        assets.function_asset_dir(spec.key) / "functions" for spec in resources.FUNCTIONS
    ]
    absent = [str(path.relative_to(assets.ROOT)) for path in missing if not path.is_dir()]
    if absent:
        raise FileNotFoundError(f"Lambda assets not built ({', '.join(absent)}): run `make build` first")
