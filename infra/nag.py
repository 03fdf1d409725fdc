"""cdk-nag (AwsSolutions) findings the stack acknowledges, each with its reason.

cdk-nag 3 runs as a CDK policy-validation plugin: `Validations.of(app).add_plugins(...)`
(infra/synth.py), and acknowledgments are exact finding ids (`Rule[Finding]`) recorded
on the narrowest construct that produces them. Everything else is fixed, not suppressed:
no AWS managed policy on the function roles, KMS everywhere, TLS-only, PITR, DLQs,
access logs, tracing, WAF.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, CfnElement, Stack, Validations
from aws_cdk import aws_iam as iam
from constructs import Construct, IConstruct

from infra.api import Api
from infra.compute import API, PROVIDER_CALLERS, SWEEPER, Compute, executions_arn
from infra.console import Console
from infra.providers import BEDROCK_BATCH_PREFIX, Providers
from infra.schedules import SCHEDULES_IN_GROUP, ScheduleTriggers
from infra.security import Security
from infra.storage import Storage
from infra.workflow import Workflow

# X-Ray trace upload (active tracing) and CloudWatch Logs vended-log delivery (the state
# machine's logging) have no resource-level permissions.
UNSCOPABLE_SERVICES = (
    "AWS documents Resource '*' for X-Ray trace upload and CloudWatch Logs log delivery: "
    "they support no resource-level permissions."
)
# CDK grants on the KMS-encrypted tables, queues, buckets and secret.
KMS_GRANT = (
    "CDK's grant methods emit kms:GenerateDataKey*/kms:ReEncrypt* on the stack's single "
    "customer managed key (its ARN is the only resource)."
)
TABLE_INDEXES = (
    "Table grants cover the table's own global secondary indexes (<table arn>/index/*), "
    "which the repositories query; scoped to one table."
)
S3_ACTIONS = (
    "CDK's bucket grants (grant_read, grant_read_write, grant_delete) use these S3 action "
    "families, limited to named buckets."
)
S3_OBJECTS = (
    "Object keys (per org and batch) are created at runtime: access is to the objects of one named bucket."
)
EXECUTIONS = (
    "Execution ARNs are minted per run; the sweeper may stop or describe executions of this "
    "one state machine only."
)
RUNTIME = (
    "Python 3.12 on purpose: the layer's compiled wheels (pydantic-core, cffi, argon2) are built "
    "for cp312 by scripts/build_assets.py; a runtime move is a deliberate rebuild and retest."
)
SNAPSTART_PUBLISHED = (
    "The API function's SnapStart applies to the version the stack publishes (currentVersion); "
    "API Gateway invokes that version through the alias `live`, never $LATEST."
)
NO_AUTOMATIC_ROTATION = (
    "The app secret keys the HMAC of every stored API-key hash and signs tokens: automatic "
    "rotation would invalidate all issued keys and sessions. Rotation is a planned manual "
    "procedure (docs/deploy.md)."
)
REQUEST_VALIDATION = (
    "Lambda proxy to a FastAPI app that validates every body, query and header with pydantic "
    "against its OpenAPI schema; a second copy in API Gateway would drift."
)
AUTHORIZATION = (
    "The application authenticates every request itself (org API keys, session cookies, "
    "signed tokens) and decides which routes are public; a gateway authorizer would duplicate it."
)
COGNITO = (
    "No Cognito: orgs, users, API keys and sessions live in the identity table and are "
    "verified by the application."
)
PROCESSOR_KEYS = (
    "The payment processor's secret key and webhook signing secret are issued and rolled in "
    "the processor's dashboard; no Lambda can rotate them. The operator replaces the value; "
    "functions re-read it within minutes (docs/payments.md)."
)
VENDOR_KEYS = (
    "Provider API keys are issued and rotated by the vendor or the operator's own server; "
    "no Lambda can rotate them. The operator replaces the value; functions re-read it within "
    "minutes (PROVIDER_KEY_MAX_AGE_SECONDS)."
)
BEDROCK_MODELS = (
    "Which models a lane calls is catalog data, not stack structure: invoking and batch jobs are "
    "allowed on Bedrock's foundation models, this account's inference profiles and its "
    "model-invocation jobs. ListFoundationModels and ListInferenceProfiles (the providers "
    "check) list the whole region's models and profiles, and ListModelInvocationJobs (a "
    "canceled batch finding the job a dead invocation made) the region's jobs: granted on *."
)
BEDROCK_BATCH_PROFILES = (
    "A batch job runs its model through a cross-region inference profile: AWS's batch service "
    "role page asks for InvokeModel on the profile in this region and on the foundation model "
    "in every region it routes to; which model is catalog data, not stack structure."
)
BEDROCK_BATCH_OBJECTS = (
    "Bedrock batch jobs read every object under the job input prefix and write under the output "
    "prefix of the artifacts bucket; object names are per job."
)
APIGATEWAY_LOGS_ROLE = (
    "The account-level API Gateway logging role needs AmazonAPIGatewayPushToCloudWatchLogs "
    "(AWS's documented setup); it only lets API Gateway write CloudWatch Logs."
)

ORIGIN_VERIFY = (
    "The origin-verify value is written into the console distribution's origin header and the "
    "web ACL's match by CloudFormation at deploy time; an automatic rotation would split them "
    "until the next deploy and rate-limit console users by CloudFront's addresses. Rotation is "
    "a new value followed by a deploy (docs/console.md)."
)
CONSOLE_DEFAULT_CERTIFICATE = (
    "Without console_domain_names the distribution answers on its *.cloudfront.net name with "
    "CloudFront's default certificate, whose security policy AWS fixes at TLSv1; the viewer "
    "policy is redirect-to-HTTPS and browsers negotiate TLS 1.2+. Setting the console's domain "
    "and its ACM certificate (cdk.json) moves it to TLSv1.2_2021 and clears this finding."
)
CONSOLE_GEO = (
    "The service sells to customers worldwide: no country is denied at the edge; sanctions "
    "screening is a billing concern, not a CDN rule."
)
CONSOLE_WAF = (
    "A CloudFront web ACL must be created in us-east-1 and this stack is region-agnostic; the "
    "/v1 behaviours reach the API stage, whose regional web ACL (rate limit, IP reputation, "
    "known bad inputs) still runs. The console's own paths serve static files only."
)
CONSOLE_DEPLOY_S3 = (
    "CDK's BucketDeployment reads its zip from the CDK asset bucket and syncs (put, delete, "
    "list) the console bucket: bucket grant action families on those two buckets only."
)
CONSOLE_DEPLOY_OBJECTS = (
    "The deployment copies every file of the console's build: objects of the console bucket "
    "and the CDK asset bucket's staged zip."
)
CONSOLE_INVALIDATION = (
    "BucketDeployment's handler invalidates /console/* on the console distribution after a "
    "release; CDK grants cloudfront:CreateInvalidation/GetInvalidation on '*'."
)
CONSOLE_DEPLOY_RUNTIME = (
    "The runtime of CDK's own BucketDeployment handler is chosen by aws-cdk-lib (it bundles the "
    "AWS CLI layer for it); it moves with the aws-cdk-lib version, not with this stack."
)


def acknowledge_findings(
    scope: Construct,
    *,
    storage: Storage,
    security: Security,
    workflow: Workflow,
    compute: Compute,
    api: Api,
    providers: Providers,
    console: Console,
    schedule_triggers: ScheduleTriggers | None = None,
) -> None:
    """Record each acknowledged finding on the construct of the stack (`scope`) that produces it."""
    tables = [_arn_ref(table) for table in storage.tables.values()]
    buckets = storage.buckets

    # SMG4: no automatic rotation of the app secret (it keys every API-key hash).
    _acknowledge(security.app_secret, "AwsSolutions-SMG4", NO_AUTOMATIC_ROTATION)
    # SMG4: provider API keys are the vendors' to rotate.
    for secret in providers.secrets.values():
        _acknowledge(secret, "AwsSolutions-SMG4", VENDOR_KEYS)
    _acknowledge(providers.payment_secret, "AwsSolutions-SMG4", PROCESSOR_KEYS)
    if providers.batch_role is not None:
        artifacts = _arn_ref(storage.buckets["artifacts"])
        for action in ("s3:GetObject*", "s3:GetBucket*", "s3:List*", "s3:Abort*"):
            _acknowledge(providers.batch_role, f"AwsSolutions-IAM5[Action::{action}]", S3_ACTIONS)
        for part in ("input", "output"):
            finding = f"AwsSolutions-IAM5[Resource::{artifacts}/{BEDROCK_BATCH_PREFIX}/{part}/*]"
            _acknowledge(providers.batch_role, finding, BEDROCK_BATCH_OBJECTS)
        _acknowledge_kms_grants(providers.batch_role)
        for finding in _bedrock_batch_findings(scope):
            _acknowledge(providers.batch_role, finding, BEDROCK_BATCH_PROFILES)

    # The state machine role (SendMessage to the queues, UpdateItem on the batches table):
    workflow_role = workflow.state_machine.role
    # IAM5 Resource::*: X-Ray and CloudWatch Logs delivery statements CDK adds for tracing/logging.
    _acknowledge(workflow_role, "AwsSolutions-IAM5[Resource::*]", UNSCOPABLE_SERVICES)
    # IAM5 kms:*: the encrypted queues' grant on the stack key.
    _acknowledge_kms_grants(workflow_role)
    # IAM5 index/*: Table.grant covers the batches table's indexes.
    batches = _arn_ref(storage.tables["batches"])
    _acknowledge(workflow_role, f"AwsSolutions-IAM5[Resource::{batches}/index/*]", TABLE_INDEXES)

    # The streaming function runs the API's app: the API's findings, for the same reasons.
    for key, function in [*compute.functions.items(), (API, compute.api_stream)]:
        # L1: the runtime is pinned to the layer's build target.
        _acknowledge(function, "AwsSolutions-L1", RUNTIME)
        role = function.role
        assert role is not None
        # IAM5 Resource::*: X-Ray trace upload (active tracing).
        _acknowledge(role, "AwsSolutions-IAM5[Resource::*]", UNSCOPABLE_SERVICES)
        # IAM5 kms:*: grants on the stack key through tables, queues, buckets and the secret.
        _acknowledge_kms_grants(role)
        # IAM5 index/*: every function reads and writes all four tables, indexes included.
        for table in tables:
            _acknowledge(role, f"AwsSolutions-IAM5[Resource::{table}/index/*]", TABLE_INDEXES)
        # IAM5 s3 action families from Bucket.grant_* (artifacts read/write for every function).
        for action in ("s3:GetObject*", "s3:GetBucket*", "s3:List*", "s3:DeleteObject*", "s3:Abort*"):
            _acknowledge(role, f"AwsSolutions-IAM5[Action::{action}]", S3_ACTIONS)
        # IAM5 bucket/*: objects of the artifacts and uploads buckets.
        for bucket in ("artifacts", "uploads"):
            _acknowledge(role, f"AwsSolutions-IAM5[Resource::{_arn_ref(buckets[bucket])}/*]", S3_OBJECTS)
        if key in PROVIDER_CALLERS and providers.batch_role is not None:
            for finding in _bedrock_findings(scope):
                _acknowledge(role, finding, BEDROCK_MODELS)
        if key in (API, SWEEPER) and schedule_triggers is not None:
            # IAM5 schedule/<group>/*: the customer schedules' EventBridge schedules (docs/schedules.md).
            arn = _flatten(Stack.of(scope).resolve(schedule_triggers.schedules_arn))
            _acknowledge(role, f"AwsSolutions-IAM5[Resource::{arn}]", SCHEDULES_IN_GROUP)
        if key == SWEEPER:
            # IAM5 execution:<name>:*: the sweeper stops executions of the batch workflow.
            arn = Stack.of(scope).resolve(executions_arn(scope, workflow.state_machine_name))
            _acknowledge(role, f"AwsSolutions-IAM5[Resource::{_flatten(arn)}]", EXECUTIONS)

    # CDK warns that SnapStart needs published versions: the stack publishes one (currentVersion)
    # and API Gateway invokes it through the `live` alias (infra/compute.py).
    _acknowledge(
        compute.functions[API], "Annotation::@aws-cdk/aws-lambda:snapStartRequirePublish", SNAPSTART_PUBLISHED
    )
    rest_api = api.rest_api
    # SMG4: the origin-verify value changes with a deploy, never on its own.
    _acknowledge(api.origin_secret, "AwsSolutions-SMG4", ORIGIN_VERIFY)
    # APIG2: the application validates requests.
    _acknowledge(rest_api, "AwsSolutions-APIG2", REQUEST_VALIDATION)
    # APIG4 / COG4 on both proxy methods: the application authenticates; no Cognito.
    _acknowledge(rest_api.root, "AwsSolutions-APIG4", AUTHORIZATION)
    _acknowledge(rest_api.root, "AwsSolutions-COG4", COGNITO)
    _acknowledge_console(scope, console)
    # IAM4: the account-level API Gateway logging role's AWS managed policy.
    _acknowledge(
        rest_api.node.find_child("CloudWatchRole"),
        "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
        "AmazonAPIGatewayPushToCloudWatchLogs]",
        APIGATEWAY_LOGS_ROLE,
    )


def _acknowledge_console(scope: Construct, console: Console) -> None:
    distribution = console.distribution
    # CFR4: the default *.cloudfront.net certificate (no custom domain configured).
    if console.certificate is None:
        _acknowledge(distribution, "AwsSolutions-CFR4", CONSOLE_DEFAULT_CERTIFICATE)
    _acknowledge(distribution, "AwsSolutions-CFR1", CONSOLE_GEO)
    _acknowledge(distribution, "AwsSolutions-CFR2", CONSOLE_WAF)
    # The deployment's role (explicit, own log group only): bucket grants and the invalidation.
    role = console.deploy_role
    for action in ("s3:GetObject*", "s3:GetBucket*", "s3:List*", "s3:DeleteObject*", "s3:Abort*"):
        _acknowledge(role, f"AwsSolutions-IAM5[Action::{action}]", CONSOLE_DEPLOY_S3)
    for resource in (f"{_arn_ref(console.bucket)}/*", _cdk_assets_objects(scope)):
        _acknowledge(role, f"AwsSolutions-IAM5[Resource::{resource}]", CONSOLE_DEPLOY_OBJECTS)
    _acknowledge(role, "AwsSolutions-IAM5[Resource::*]", CONSOLE_INVALIDATION)
    # L1: CDK's singleton handler function, at the stack's root.
    _acknowledge(console.deploy_handler, "AwsSolutions-L1", CONSOLE_DEPLOY_RUNTIME)


def _cdk_assets_objects(scope: Construct) -> str:
    """How cdk-nag prints the CDK asset bucket's objects (the default synthesizer's bucket)."""
    stack = Stack.of(scope)
    qualifier = stack.synthesizer.bootstrap_qualifier or "hnb659fds"
    return f"arn:<AWS::Partition>:s3:::cdk-{qualifier}-assets-<AWS::AccountId>-<AWS::Region>/*"


def _bedrock_findings(scope: Construct) -> list[str]:
    """The IAM5 findings of Providers.grant_calls' Bedrock statements, as cdk-nag names them."""
    stack = Stack.of(scope)
    account, region, partition = (
        _flatten(stack.resolve(v)) for v in (stack.account, stack.region, stack.partition)
    )
    base = f"arn:{partition}:bedrock"
    return [
        "AwsSolutions-IAM5[Resource::*]",
        f"AwsSolutions-IAM5[Resource::{base}:*::foundation-model/*]",
        f"AwsSolutions-IAM5[Resource::{base}:{region}:{account}:inference-profile/*]",
        f"AwsSolutions-IAM5[Resource::{base}:{region}:{account}:model-invocation-job/*]",
    ]


def _bedrock_batch_findings(scope: Construct) -> list[str]:
    """The IAM5 findings of the batch role's InvokeModel statement, as cdk-nag names them."""
    return [f for f in _bedrock_findings(scope) if "foundation-model" in f or "inference-profile" in f]


def _acknowledge_kms_grants(role: iam.IRole) -> None:
    for action in ("kms:GenerateDataKey*", "kms:ReEncrypt*"):
        _acknowledge(role, f"AwsSolutions-IAM5[Action::{action}]", KMS_GRANT)


def _acknowledge(scope: IConstruct, finding: str, reason: str) -> None:
    Validations.of(scope).acknowledge(Acknowledgment(id=finding, reason=reason))


def _arn_ref(construct: IConstruct) -> str:
    """How cdk-nag prints a GetAtt of the construct's resource: <LogicalId.Arn>."""
    element = construct.node.default_child
    assert isinstance(element, CfnElement)
    return f"<{Stack.of(construct).get_logical_id(element)}.Arn>"


def _flatten(value: object) -> str:
    """cdk-nag's rendering of a resolved ARN (Fn::Join of literals and pseudo parameters)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_flatten(part) for part in parts)
    if isinstance(value, dict) and "Ref" in value:
        return f"<{value['Ref']}>"
    raise ValueError(f"cannot flatten {value!r}")
