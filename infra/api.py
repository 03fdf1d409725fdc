"""The public REST API: API Gateway proxying every path to the api function, behind WAF.

Two integrations: every route goes to the API function's `live` alias (buffered, Mangum,
SnapStart), except the routes that stream, which go to the `api-stream` function with
`responseTransferMode: STREAM` (API Gateway relays the bytes as Lambda streams them):
`POST /v1/chat/completions` and the compat API under `/v1/compat/` (its file downloads).
API Gateway picks the most specific resource, so the tree spells the streamed paths out and
gives every explicit resource on the way an `ANY` and a `{proxy+}` to the buffered function
(STREAMED_ROUTES; docs/chat.md, "On AWS").

The application authenticates each request itself (API keys, session cookies), so the
gateway has no authorizer; see infra/nag.py.

The console's CloudFront distribution also forwards /v1/* here (infra/console.py). Its
requests come from CloudFront's edge addresses, so the per-IP rate limit counts them by the
viewer's address instead: CloudFront adds a secret origin header (ORIGIN_VERIFY_HEADER) and
a viewer-request function the viewer's address (VIEWER_ADDRESS_HEADER, overwriting whatever
the client sent). Requests without the secret (direct callers of the stage) are counted by
their source address as before, so no caller can pick its own rate-limit key.
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_wafv2 as wafv2
from constructs import Construct

from batchroute import resources
from infra.context import EnvironmentConfig

# Direct uploads arrive as multipart or raw bytes: pass them through untouched (base64).
BINARY_MEDIA_TYPES = ("multipart/form-data", "application/octet-stream", "application/gzip")
ORIGIN_VERIFY_HEADER = "x-batchroute-origin-verify"
VIEWER_ADDRESS_HEADER = "x-batchroute-viewer-address"
# Routes served by the streaming function: (method, resource path).
STREAMED_ROUTES = (
    ("POST", "/v1/chat/completions"),
    ("ANY", "/v1/compat"),
    ("ANY", "/v1/compat/{proxy+}"),
)
_WAF_MANAGED_RULE_GROUPS = ("AWSManagedRulesAmazonIpReputationList", "AWSManagedRulesKnownBadInputsRuleSet")


class Api(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        prefix: str,
        config: EnvironmentConfig,
        handler: lambda_.IFunction,
        stream_handler: lambda_.IFunction,
        key: kms.IKey,
    ) -> None:
        super().__init__(scope, construct_id)
        removal = RemovalPolicy.RETAIN if config.is_production else RemovalPolicy.DESTROY
        # Shared by the console's distribution (origin header) and the web ACL (match):
        # CloudFormation resolves it into both at deploy time; it is never in the template.
        self.origin_secret = secretsmanager.Secret(
            self,
            "OriginVerify",
            secret_name=f"{prefix}/cdn-origin-verify",
            description=f"{prefix}: header value marking requests from the console's distribution",
            encryption_key=key,
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=48, exclude_punctuation=True
            ),
            removal_policy=removal,
        )
        self.access_logs = logs.LogGroup(
            self,
            "AccessLogs",
            log_group_name=f"/aws/apigateway/{prefix}-api/access",
            retention=config.log_retention,
            removal_policy=removal,
        )
        self.rest_api = apigateway.LambdaRestApi(
            self,
            "RestApi",
            rest_api_name=f"{prefix}-api",
            description=f"{prefix}: public HTTP API",
            handler=handler,
            proxy=False,  # the resource tree is ours (_routes)
            endpoint_types=[apigateway.EndpointType.REGIONAL],
            binary_media_types=list(BINARY_MEDIA_TYPES),
            # Stage logging needs the account-level API Gateway CloudWatch role; keep it when
            # the stack goes (other APIs in the account may rely on it).
            cloud_watch_role=True,
            cloud_watch_role_removal_policy=RemovalPolicy.RETAIN,
            deploy_options=apigateway.StageOptions(
                stage_name=config.name,
                tracing_enabled=True,
                metrics_enabled=True,
                logging_level=apigateway.MethodLoggingLevel.ERROR,
                data_trace_enabled=False,  # bodies carry API keys and customer data
                throttling_rate_limit=config.api_throttling_rate_limit,
                throttling_burst_limit=config.api_throttling_burst_limit,
                access_log_destination=apigateway.LogGroupLogDestination(self.access_logs),
                access_log_format=apigateway.AccessLogFormat.json_with_standard_fields(
                    caller=False,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=False,
                ),
            ),
        )
        self._routes(stream_handler)
        self.stage = self.rest_api.deployment_stage
        self.web_acl = self._web_acl(prefix, config)
        wafv2.CfnWebACLAssociation(
            self,
            "WebAclAssociation",
            resource_arn=self.stage.stage_arn,
            web_acl_arn=self.web_acl.attr_arn,
        )

    def _routes(self, stream_handler: lambda_.IFunction) -> None:
        """ANY and {proxy+} on the root, and on every explicit resource on the way to a
        streamed route, to the buffered function (the API's default integration); the
        streamed routes (STREAMED_ROUTES) to the streaming function."""
        streamed = apigateway.LambdaIntegration(
            stream_handler,
            proxy=True,
            response_transfer_mode=apigateway.ResponseTransferMode.STREAM,
            timeout=Duration.seconds(resources.STREAM_TIMEOUT_SECONDS),  # a streamed answer may run long
            scope_permission_to_method=False,  # one permission for every streamed method
        )

        def buffered(resource: apigateway.IResource) -> apigateway.IResource:
            resource.add_method("ANY")
            resource.add_proxy(any_method=True)
            return resource

        v1 = buffered(self.rest_api.root).add_resource("v1")
        chat = buffered(buffered(v1).add_resource("chat")).add_resource("completions")
        chat.add_method("POST", streamed)
        buffered(chat)  # GET /v1/chat/completions/{job_id} and the other methods
        compat = v1.add_resource("compat")
        compat.add_method("ANY", streamed)
        compat.add_proxy(any_method=True, default_integration=streamed)

    def _web_acl(self, prefix: str, config: EnvironmentConfig) -> wafv2.CfnWebACL:
        # Low-false-positive protections only: AWS's body-size and SQLi/XSS groups would
        # block legitimate batch payloads (prompts are free text).
        through_cdn = self._through_cdn()
        rules = [
            # Direct callers of the stage: by their source address.
            wafv2.CfnWebACL.RuleProperty(
                name="rate-limit-per-ip",
                priority=0,
                action=wafv2.CfnWebACL.RuleActionProperty(block={}),
                statement=wafv2.CfnWebACL.StatementProperty(
                    rate_based_statement=wafv2.CfnWebACL.RateBasedStatementProperty(
                        aggregate_key_type="IP",
                        limit=config.waf_requests_per_ip_per_5_minutes,
                        evaluation_window_sec=300,
                        scope_down_statement=wafv2.CfnWebACL.StatementProperty(
                            not_statement=wafv2.CfnWebACL.NotStatementProperty(statement=through_cdn)
                        ),
                    )
                ),
                visibility_config=_visibility(f"{prefix}-rate-limit-per-ip"),
            ),
            # Through the console's distribution: by the viewer's address CloudFront set.
            wafv2.CfnWebACL.RuleProperty(
                name="rate-limit-per-viewer",
                priority=1,
                action=wafv2.CfnWebACL.RuleActionProperty(block={}),
                statement=wafv2.CfnWebACL.StatementProperty(
                    rate_based_statement=wafv2.CfnWebACL.RateBasedStatementProperty(
                        aggregate_key_type="FORWARDED_IP",
                        # The function always sets it; were it ever unusable, the request
                        # is not counted rather than blocked (no console outage).
                        forwarded_ip_config=wafv2.CfnWebACL.ForwardedIPConfigurationProperty(
                            header_name=VIEWER_ADDRESS_HEADER, fallback_behavior="NO_MATCH"
                        ),
                        limit=config.waf_requests_per_ip_per_5_minutes,
                        evaluation_window_sec=300,
                        scope_down_statement=through_cdn,
                    )
                ),
                visibility_config=_visibility(f"{prefix}-rate-limit-per-viewer"),
            ),
        ]
        for priority, group in enumerate(_WAF_MANAGED_RULE_GROUPS, start=len(rules)):
            rules.append(
                wafv2.CfnWebACL.RuleProperty(
                    name=group,
                    priority=priority,
                    override_action=wafv2.CfnWebACL.OverrideActionProperty(none={}),
                    statement=wafv2.CfnWebACL.StatementProperty(
                        managed_rule_group_statement=wafv2.CfnWebACL.ManagedRuleGroupStatementProperty(
                            vendor_name="AWS", name=group
                        )
                    ),
                    visibility_config=_visibility(f"{prefix}-{group}"),
                )
            )
        return wafv2.CfnWebACL(
            self,
            "WebAcl",
            name=f"{prefix}-api",
            scope="REGIONAL",
            default_action=wafv2.CfnWebACL.DefaultActionProperty(allow={}),
            visibility_config=_visibility(f"{prefix}-api"),
            rules=rules,
        )

    def _through_cdn(self) -> wafv2.CfnWebACL.StatementProperty:
        """The request carries the console distribution's secret origin header."""
        return wafv2.CfnWebACL.StatementProperty(
            byte_match_statement=wafv2.CfnWebACL.ByteMatchStatementProperty(
                field_to_match=wafv2.CfnWebACL.FieldToMatchProperty(
                    single_header={"Name": ORIGIN_VERIFY_HEADER}
                ),
                positional_constraint="EXACTLY",
                search_string=self.origin_secret.secret_value.unsafe_unwrap(),
                text_transformations=[wafv2.CfnWebACL.TextTransformationProperty(priority=0, type="NONE")],
            )
        )


def _visibility(metric_name: str) -> wafv2.CfnWebACL.VisibilityConfigProperty:
    return wafv2.CfnWebACL.VisibilityConfigProperty(
        cloud_watch_metrics_enabled=True, metric_name=metric_name, sampled_requests_enabled=True
    )
