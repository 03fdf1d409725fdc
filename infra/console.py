"""The web console on the API's origin: its files in a private bucket, CloudFront in front.

One distribution serves both, so the console is a same-origin client of the public API and
the session cookie stays first-party (docs/console.md, Deployment):

  default behaviour  -> the console bucket (Origin Access Control), a viewer-request
                        function that redirects / to /console/ and answers every extension-less
                        /console/... route with /console/index.html (the SPA's router takes it
                        from there), security headers with a CSP of 'self' (and, in
                        connect-src, the uploads bucket: large files are PUT there)
  /v1/*, /openapi.json
                     -> the REST API's stage (execute-api domain, stage as origin path):
                        no caching, every viewer header but Host, cookies and query strings
                        forwarded, all methods; answers pass through untouched; a
                        viewer-request function adds the viewer's address and the origin
                        the secret header, so the API's web ACL rate-limits per viewer
                        (infra/api.py)

HTTP redirects to HTTPS everywhere. The console's files come from console/dist (built by
`make build`); hashed assets are cached for a year, index.html is revalidated every time.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Aws, CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_cloudfront_origins as origins
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3_deployment
from constructs import Construct

from batchroute import resources
from infra.api import ORIGIN_VERIFY_HEADER, VIEWER_ADDRESS_HEADER, Api
from infra.console_headers import (
    HSTS_MAX_AGE_SECONDS,
    PERMISSIONS_POLICY,
    content_security_policy,
)
from infra.context import EnvironmentConfig
from infra.naming import construct_id
from infra.storage import lifecycle_rule

CONSOLE_PATH = "/console/"
KEY_PREFIX = "console/"  # the bucket mirrors the URL space: /console/x is the object console/x
# Paths the API answers; everything else is the console's.
# Not /docs: its Swagger UI loads a script from a CDN, which must not run on the origin that
# holds the console's session cookie; it stays on the API's own (execute-api) host.
API_PATH_PATTERNS = ("/v1/*", "/openapi.json")
API_ORIGIN_READ_TIMEOUT_SECONDS = 60
INDEX = "index.html"
# Vite names every asset after its content hash: a changed file is a new URL.
ASSETS_CACHE_CONTROL = "public, max-age=31536000, immutable"
INDEX_CACHE_CONTROL = "no-cache"
HSTS_MAX_AGE = Duration.seconds(HSTS_MAX_AGE_SECONDS)

# Viewer-request on the console: / and /console go to /console/; /reset-password (the page
# password-reset emails link to, docs/auth.md) goes to the console's page of that name with
# its query string; an extension-less path under /console/ is a route of the single-page app,
# so CloudFront fetches its index.html. Files (a dot in the last segment) are fetched as they
# are. The API's behaviours do not run it, so their 403/404 answers stay theirs.
SPA_ROUTER_CODE = """\
var REDIRECTS = { '/': '/console/', '/console': '/console/', '/reset-password': '/console/reset-password' };

function query(querystring) {
  var parts = [];
  Object.keys(querystring).forEach(function (name) {
    var entry = querystring[name];
    var values = entry.multiValue ? entry.multiValue.map(function (v) { return v.value; }) : [entry.value];
    values.forEach(function (value) { parts.push(value === '' ? name : name + '=' + value); });
  });
  return parts.length ? '?' + parts.join('&') : '';
}

function handler(event) {
  var request = event.request;
  var uri = request.uri;
  if (REDIRECTS.hasOwnProperty(uri)) {
    return {
      statusCode: 302,
      statusDescription: 'Found',
      headers: {
        location: { value: REDIRECTS[uri] + query(request.querystring) },
        'cache-control': { value: 'no-store' }
      }
    };
  }
  if (uri.indexOf('/console/') === 0 && uri.substring(uri.lastIndexOf('/') + 1).indexOf('.') === -1) {
    request.uri = '/console/index.html';
  }
  return request;
}
"""

# Viewer-request on the API's behaviours: the viewer's address, overwriting any value the
# client sent under that name (the web ACL counts requests per viewer by it).
VIEWER_ADDRESS_CODE = f"""\
function handler(event) {{
  var request = event.request;
  request.headers['{VIEWER_ADDRESS_HEADER}'] = {{ value: event.viewer.ip }};
  return request;
}}
"""


def upload_origins(uploads: s3.IBucket) -> tuple[str, ...]:
    """Where the console PUTs a large file's bytes by signed URL: the uploads bucket under
    both S3 host names a virtual-hosted URL may carry (the global one botocore signs for
    us-east-1, the regional one elsewhere)."""
    return (f"https://{uploads.bucket_domain_name}", f"https://{uploads.bucket_regional_domain_name}")


class Console(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id_: str,
        *,
        prefix: str,
        config: EnvironmentConfig,
        api: Api,
        access_logs: s3.IBucket,
        uploads: s3.IBucket,
        dist: Path,
    ) -> None:
        super().__init__(scope, construct_id_)
        self._removal = RemovalPolicy.RETAIN if config.is_production else RemovalPolicy.DESTROY
        self._access_logs = access_logs
        self.bucket = self._bucket(resources.bucket("console"), prefix=prefix)
        # CloudFront's standard logs are written with ACLs: their own bucket, ACLs enabled
        # there only, SSE-S3 (CloudFront log delivery cannot use a KMS key).
        self.logs_bucket = self._bucket(
            resources.bucket("cdn-logs"), prefix=prefix, ownership=s3.ObjectOwnership.OBJECT_WRITER
        )
        self.router_function = cloudfront.Function(
            self,
            "SpaRouter",
            function_name=f"{prefix}-console-router",
            comment="console: / -> /console/; SPA routes -> /console/index.html",
            code=cloudfront.FunctionCode.from_inline(SPA_ROUTER_CODE),
            runtime=cloudfront.FunctionRuntime.JS_2_0,
        )
        self.viewer_address_function = cloudfront.Function(
            self,
            "ViewerAddress",
            function_name=f"{prefix}-api-viewer-address",
            comment="API: the viewer's address in a header the web ACL rate-limits by",
            code=cloudfront.FunctionCode.from_inline(VIEWER_ADDRESS_CODE),
            runtime=cloudfront.FunctionRuntime.JS_2_0,
        )
        self.console_headers = self._console_headers(prefix, upload_origins(uploads))
        self.api_headers = self._api_headers(prefix)
        self.certificate = (
            acm.Certificate.from_certificate_arn(self, "Certificate", config.console_certificate_arn)
            if config.console_certificate_arn
            else None
        )
        self.distribution = self._distribution(prefix, config, api)
        self.deployments = self._deploy(prefix, config, dist)
        domain = config.console_domain_names[0] if config.console_domain_names else None
        self.url = f"https://{domain or self.distribution.distribution_domain_name}{CONSOLE_PATH}"
        CfnOutput(self, "Url", key="ConsoleUrl", value=self.url, description="the web console")
        CfnOutput(
            self,
            "DistributionId",
            key="ConsoleDistributionId",
            value=self.distribution.distribution_id,
            description="CloudFront distribution of the console and the API's same-origin paths",
        )
        CfnOutput(
            self,
            "DistributionDomain",
            key="ConsoleDistributionDomain",
            value=self.distribution.distribution_domain_name,
            description="the distribution's own name: where the console's DNS record points",
        )

    def _bucket(
        self,
        spec: resources.Bucket,
        *,
        prefix: str,
        ownership: s3.ObjectOwnership = s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
    ) -> s3.Bucket:
        return s3.Bucket(
            self,
            construct_id(spec.key, "Bucket"),
            bucket_name=spec.physical_name(prefix, Aws.ACCOUNT_ID),
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=ownership,
            enforce_ssl=True,
            minimum_tls_version=1.2,
            versioned=False,
            server_access_logs_bucket=self._access_logs,
            server_access_logs_prefix=f"{spec.key}/",
            lifecycle_rules=[lifecycle_rule(rule) for rule in spec.lifecycle],
            removal_policy=self._removal,
        )

    def _console_headers(self, prefix: str, uploads: tuple[str, ...]) -> cloudfront.ResponseHeadersPolicy:
        return cloudfront.ResponseHeadersPolicy(
            self,
            "ConsoleHeaders",
            response_headers_policy_name=f"{prefix}-console",
            comment="console: CSP self (and PUTs to the uploads bucket), HSTS, no framing, nosniff",
            security_headers_behavior=cloudfront.ResponseSecurityHeadersBehavior(
                content_security_policy=cloudfront.ResponseHeadersContentSecurityPolicy(
                    content_security_policy=content_security_policy(uploads), override=True
                ),
                strict_transport_security=cloudfront.ResponseHeadersStrictTransportSecurity(
                    access_control_max_age=HSTS_MAX_AGE, include_subdomains=True, override=True
                ),
                frame_options=cloudfront.ResponseHeadersFrameOptions(
                    frame_option=cloudfront.HeadersFrameOption.DENY, override=True
                ),
                content_type_options=cloudfront.ResponseHeadersContentTypeOptions(override=True),
                referrer_policy=cloudfront.ResponseHeadersReferrerPolicy(
                    referrer_policy=cloudfront.HeadersReferrerPolicy.STRICT_ORIGIN_WHEN_CROSS_ORIGIN,
                    override=True,
                ),
            ),
            custom_headers_behavior=cloudfront.ResponseCustomHeadersBehavior(
                custom_headers=[
                    cloudfront.ResponseCustomHeader(
                        header="Permissions-Policy", value=PERMISSIONS_POLICY, override=True
                    )
                ]
            ),
        )

    def _api_headers(self, prefix: str) -> cloudfront.ResponseHeadersPolicy:
        # The API's own headers win (override=False); HSTS and nosniff where it sets none.
        return cloudfront.ResponseHeadersPolicy(
            self,
            "ApiHeaders",
            response_headers_policy_name=f"{prefix}-api",
            comment="API through the console's origin: HSTS and nosniff unless the API sets them",
            security_headers_behavior=cloudfront.ResponseSecurityHeadersBehavior(
                strict_transport_security=cloudfront.ResponseHeadersStrictTransportSecurity(
                    access_control_max_age=HSTS_MAX_AGE, include_subdomains=True, override=False
                ),
                content_type_options=cloudfront.ResponseHeadersContentTypeOptions(override=False),
            ),
        )

    def _distribution(self, prefix: str, config: EnvironmentConfig, api: Api) -> cloudfront.Distribution:
        # CloudFront replaces a viewer's header of the same name with this one.
        verify = {ORIGIN_VERIFY_HEADER: api.origin_secret.secret_value.unsafe_unwrap()}
        api_behaviour = cloudfront.BehaviorOptions(
            origin=origins.RestApiOrigin(
                api.rest_api,
                custom_headers=verify,
                # the most CloudFront waits for an origin's next byte without a quota increase
                # (default 30 s): a streamed answer may be slow to start (docs/chat.md, "On AWS")
                read_timeout=Duration.seconds(API_ORIGIN_READ_TIMEOUT_SECONDS),
            ),
            viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.REDIRECT_TO_HTTPS,
            allowed_methods=cloudfront.AllowedMethods.ALLOW_ALL,
            cached_methods=cloudfront.CachedMethods.CACHE_GET_HEAD,
            cache_policy=cloudfront.CachePolicy.CACHING_DISABLED,
            # API Gateway routes on its own Host; the cookie, Authorization, query strings
            # and every other header reach the API as the browser sent them.
            origin_request_policy=cloudfront.OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER,
            response_headers_policy=self.api_headers,
            # Streams (chat) and downloads pass through as the API sends them.
            compress=False,
            function_associations=[
                cloudfront.FunctionAssociation(
                    function=self.viewer_address_function,
                    event_type=cloudfront.FunctionEventType.VIEWER_REQUEST,
                )
            ],
        )
        certificate = self.certificate
        return cloudfront.Distribution(
            self,
            "Distribution",
            comment=f"{prefix}: web console and the API on one origin",
            default_behavior=cloudfront.BehaviorOptions(
                origin=origins.S3BucketOrigin.with_origin_access_control(self.bucket),
                viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.REDIRECT_TO_HTTPS,
                allowed_methods=cloudfront.AllowedMethods.ALLOW_GET_HEAD_OPTIONS,
                cache_policy=cloudfront.CachePolicy.CACHING_OPTIMIZED,
                response_headers_policy=self.console_headers,
                compress=True,
                function_associations=[
                    cloudfront.FunctionAssociation(
                        function=self.router_function, event_type=cloudfront.FunctionEventType.VIEWER_REQUEST
                    )
                ],
            ),
            additional_behaviors=dict.fromkeys(API_PATH_PATTERNS, api_behaviour),
            domain_names=list(config.console_domain_names) or None,
            certificate=certificate,
            minimum_protocol_version=(
                cloudfront.SecurityPolicyProtocol.TLS_V1_2_2021 if certificate is not None else None
            ),
            http_version=cloudfront.HttpVersion.HTTP2_AND_3,
            price_class=(
                cloudfront.PriceClass.PRICE_CLASS_ALL
                if config.is_production
                else cloudfront.PriceClass.PRICE_CLASS_100
            ),
            enable_logging=True,
            log_bucket=self.logs_bucket,
            log_file_prefix="distribution/",
            log_includes_cookies=False,  # the session cookie never reaches a log
        )

    def _deploy(
        self, prefix: str, config: EnvironmentConfig, dist: Path
    ) -> list[s3_deployment.BucketDeployment]:
        """Two uploads of console/dist: hashed assets cached for a year, then index.html
        revalidated on every load, with an invalidation so the edge serves the new release
        at once. Earlier releases' assets stay (no prune): a console opened before a release
        still loads its lazily fetched page chunks after it."""
        name = f"{prefix}-console-deploy"
        log_group = logs.LogGroup(
            self,
            "DeployLogs",
            log_group_name=f"/aws/lambda/{name}",
            retention=config.log_retention,
            removal_policy=self._removal,
        )
        # An explicit role instead of AWSLambdaBasicExecutionRole: its own log group only.
        role = self.deploy_role = iam.Role(
            self,
            "DeployRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"{name}: copies console/dist into the console bucket",
        )
        log_group.grant_write(role)
        source = s3_deployment.Source.asset(str(dist))
        common = {
            "sources": [source],
            "destination_bucket": self.bucket,
            "destination_key_prefix": KEY_PREFIX,
            "role": role,
            "log_group": log_group,
            "memory_limit": 512,
            "output_object_keys": False,
            "retain_on_delete": False,
        }
        assets = s3_deployment.BucketDeployment(
            self,
            "DeployAssets",
            exclude=[INDEX],
            prune=False,
            cache_control=[s3_deployment.CacheControl.from_string(ASSETS_CACHE_CONTROL)],
            **common,  # type: ignore[arg-type]
        )
        index = s3_deployment.BucketDeployment(
            self,
            "DeployIndex",
            exclude=["*"],
            include=[INDEX],
            prune=False,
            cache_control=[s3_deployment.CacheControl.from_string(INDEX_CACHE_CONTROL)],
            distribution=self.distribution,
            distribution_paths=[f"{CONSOLE_PATH}*"],
            **common,  # type: ignore[arg-type]
        )
        index.node.add_dependency(assets)  # the new index.html names assets already there
        # CDK runs both through one singleton handler function at the stack's root.
        (self.deploy_handler,) = [
            child
            for child in Stack.of(self).node.children
            if child.node.id.startswith("Custom::CDKBucketDeployment")
        ]
        return [assets, index]
