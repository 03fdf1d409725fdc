"""The web console's deployment: a private bucket behind CloudFront (OAC), the SPA router on
the console's behaviour, the API's paths on the same distribution, uncached, and console/dist
uploaded by BucketDeployment (docs/console.md, Deployment)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import CfnElement
from aws_cdk import aws_cloudfront as cloudfront

from batchroute import resources
from infra import assets
from infra.api import ORIGIN_VERIFY_HEADER, VIEWER_ADDRESS_HEADER
from infra.console import (
    API_ORIGIN_READ_TIMEOUT_SECONDS,
    API_PATH_PATTERNS,
    ASSETS_CACHE_CONTROL,
    INDEX_CACHE_CONTROL,
    SPA_ROUTER_CODE,
    VIEWER_ADDRESS_CODE,
)
from infra.console_headers import CONSOLE_HEADERS, console_headers
from infra.context import EnvironmentConfig
from infra.stack import BatchRouteStack
from infra.synth import build_app, load_context
from tests.infra.cfn import Cfn, render
from tests.infra.conftest import Synthesized

ALL_METHODS = {"GET", "HEAD", "OPTIONS", "PUT", "PATCH", "POST", "DELETE"}
CACHING_DISABLED = cloudfront.CachePolicy.CACHING_DISABLED.cache_policy_id
ALL_VIEWER_EXCEPT_HOST = cloudfront.OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER.origin_request_policy_id


def _bucket_id(cfn: Cfn, prefix: str, key: str) -> str:
    return cfn.named(
        "AWS::S3::Bucket", "BucketName", resources.bucket(key).physical_name(prefix, "<AWS::AccountId>")
    )[0]


def _text(value: Any) -> Any:
    """render(), plus the Fn::Select of an Fn::Split CDK uses to cut a URL into its parts."""
    if isinstance(value, dict) and "Fn::Select" in value:
        index, source = value["Fn::Select"]
        separator, joined = source["Fn::Split"]
        return str(_text(joined)).split(separator)[index]
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(str(_text(part)) for part in parts)
    return render(value)


def _distribution(cfn: Cfn) -> tuple[str, dict[str, Any]]:
    ((logical_id, props),) = cfn.properties("AWS::CloudFront::Distribution").items()
    return logical_id, props["DistributionConfig"]


def _origin(config: dict[str, Any], origin_id: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [o for o in config["Origins"] if o["Id"] == origin_id]
    (origin,) = found
    return origin


def _deployments(cfn: Cfn) -> list[dict[str, Any]]:
    return list(cfn.properties("Custom::CDKBucketDeployment").values())


def test_the_console_bucket_is_private_encrypted_tls_only_and_logged(cfn: Cfn, prefix: str) -> None:
    # Given
    bucket_id = _bucket_id(cfn, prefix, "console")
    logs_id = _bucket_id(cfn, prefix, "access-logs")

    # When
    props = cfn.resources[bucket_id]["Properties"]

    # Then: no public access, SSE, owner-enforced, server access logs like the other buckets
    assert props["PublicAccessBlockConfiguration"] == dict.fromkeys(
        ("BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"), True
    )
    (encryption,) = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert encryption["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    assert props["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
    assert props["LoggingConfiguration"] == {
        "DestinationBucketName": {"Ref": logs_id},
        "LogFilePrefix": "console/",
    }
    assert "WebsiteConfiguration" not in props


def test_only_this_distribution_may_read_the_console_bucket_through_oac(cfn: Cfn, prefix: str) -> None:
    # Given
    bucket_id = _bucket_id(cfn, prefix, "console")
    distribution_id, config = _distribution(cfn)

    # When: the bucket's policy and the distribution's S3 origin
    (policy,) = [
        p["PolicyDocument"]["Statement"]
        for p in cfn.properties("AWS::S3::BucketPolicy").values()
        if p["Bucket"] == {"Ref": bucket_id}
    ]
    allows = [s for s in policy if s["Effect"] == "Allow"]
    (s3_origin,) = [o for o in config["Origins"] if "S3OriginConfig" in o]

    # Then: one grant, reads only, to CloudFront on behalf of this distribution; no OAI
    assert len(allows) == 1
    (grant,) = allows
    assert grant["Principal"] == {"Service": "cloudfront.amazonaws.com"}
    assert grant["Action"] == "s3:GetObject"
    assert render(grant["Resource"]) == f"<{bucket_id}.Arn>/*"
    assert render(grant["Condition"]["StringEquals"]["AWS:SourceArn"]).endswith(
        f":distribution/<{distribution_id}>"
    )
    assert s3_origin["DomainName"] == {"Fn::GetAtt": [bucket_id, "RegionalDomainName"]}
    assert s3_origin["S3OriginConfig"] == {"OriginAccessIdentity": ""}
    oac_id = cfn.referenced(s3_origin["OriginAccessControlId"])
    oac = cfn.resources[oac_id]["Properties"]["OriginAccessControlConfig"]
    assert (oac["OriginAccessControlOriginType"], oac["SigningBehavior"], oac["SigningProtocol"]) == (
        "s3",
        "always",
        "sigv4",
    )
    assert cfn.of_type("AWS::CloudFront::CloudFrontOriginAccessIdentity") == {}


def test_the_default_behaviour_serves_the_bucket_through_the_spa_router(cfn: Cfn, prefix: str) -> None:
    # Given
    _, config = _distribution(cfn)
    ((function_id, function),) = [
        (lid, props)
        for lid, props in cfn.properties("AWS::CloudFront::Function").items()
        if props["FunctionCode"] == SPA_ROUTER_CODE
    ]

    # When
    default = config["DefaultCacheBehavior"]

    # Then: the bucket, read-only methods, HTTPS redirect, the router on viewer-request
    assert "S3OriginConfig" in _origin(config, default["TargetOriginId"])
    assert set(default["AllowedMethods"]) == {"GET", "HEAD", "OPTIONS"}
    assert default["ViewerProtocolPolicy"] == "redirect-to-https"
    assert default["Compress"] is True
    assert default["FunctionAssociations"] == [
        {"EventType": "viewer-request", "FunctionARN": {"Fn::GetAtt": [function_id, "FunctionARN"]}}
    ]
    assert function["FunctionCode"] == SPA_ROUTER_CODE
    assert function["FunctionConfig"]["Runtime"] == "cloudfront-js-2.0"
    assert function["Name"] == f"{prefix}-console-router"


def test_the_api_paths_go_to_the_api_stage_uncached_with_every_method(
    cfn: Cfn, stack: BatchRouteStack, environment: str
) -> None:
    # Given
    _, config = _distribution(cfn)
    rest_api = stack.api.rest_api.node.default_child
    assert isinstance(rest_api, CfnElement)
    rest_api_id = stack.get_logical_id(rest_api)
    stage = stack.get_logical_id(stack.api.stage.node.default_child)  # type: ignore[arg-type]
    (stage_props,) = [p for lid, p in cfn.properties("AWS::ApiGateway::Stage").items() if lid == stage]
    assert stage_props["StageName"] == environment  # the origin path names this stage
    stage = f"<{stage}>"

    (viewer_function,) = [
        lid
        for lid, props in cfn.properties("AWS::CloudFront::Function").items()
        if props["FunctionCode"] == VIEWER_ADDRESS_CODE
    ]
    secret = stack.get_logical_id(stack.api.origin_secret.node.default_child)  # type: ignore[arg-type]
    secret_value = {"Fn::Join": ["", ["{{resolve:secretsmanager:", {"Ref": secret}, ":SecretString:::}}"]]}

    # When
    behaviours = {b["PathPattern"]: b for b in config["CacheBehaviors"]}

    # Then: /v1/*, /openapi.json, and nothing else: not /docs, whose Swagger UI runs a CDN's
    # script, which would run on the origin of the console's session cookie
    assert set(behaviours) == set(API_PATH_PATTERNS) == {"/v1/*", "/openapi.json"}
    for pattern, behaviour in behaviours.items():
        origin = _origin(config, behaviour["TargetOriginId"])
        assert _text(origin["DomainName"]) == f"<{rest_api_id}>.execute-api.<AWS::Region>.<AWS::URLSuffix>", (
            pattern
        )
        assert _text(origin["OriginPath"]) == f"/{stage}"
        custom = origin["CustomOriginConfig"]
        assert custom["OriginProtocolPolicy"] == "https-only"
        assert custom["OriginSSLProtocols"] == ["TLSv1.2"]
        # waiting as long as CloudFront may for a slow-starting streamed answer
        assert custom["OriginReadTimeout"] == API_ORIGIN_READ_TIMEOUT_SECONDS == 60
        assert set(behaviour["AllowedMethods"]) == ALL_METHODS
        assert behaviour["CachePolicyId"] == CACHING_DISABLED
        assert behaviour["OriginRequestPolicyId"] == ALL_VIEWER_EXCEPT_HOST
        assert behaviour["ViewerProtocolPolicy"] == "redirect-to-https"
        # Only the viewer-address function: no rewrite, so the API's 404s stay its own
        assert behaviour["FunctionAssociations"] == [
            {"EventType": "viewer-request", "FunctionARN": {"Fn::GetAtt": [viewer_function, "FunctionARN"]}}
        ]
        assert origin["OriginCustomHeaders"] == [
            {"HeaderName": ORIGIN_VERIFY_HEADER, "HeaderValue": secret_value}
        ]
    # And: no error page mapping anywhere (it would turn the API's 403/404 into index.html)
    assert "CustomErrorResponses" not in config


def test_the_console_gets_security_headers_and_the_api_keeps_its_own(cfn: Cfn, prefix: str) -> None:
    # Given
    _, config = _distribution(cfn)
    policies = cfn.properties("AWS::CloudFront::ResponseHeadersPolicy")

    # When
    console = policies[cfn.referenced(config["DefaultCacheBehavior"]["ResponseHeadersPolicyId"])]
    api_ids = {cfn.referenced(b["ResponseHeadersPolicyId"]) for b in config["CacheBehaviors"]}

    # Then: CSP self, no framing, HSTS for a year or more, nosniff, on the console
    headers = console["ResponseHeadersPolicyConfig"]["SecurityHeadersConfig"]
    policy = render(headers["ContentSecurityPolicy"]["ContentSecurityPolicy"])
    csp = policy.split("; ")
    assert {"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'"} <= set(csp)
    # And: the one other origin it may connect to is the uploads bucket's, under both of its S3
    # host names, where a file too large to paste is PUT by signed URL (console/src/api/upload.ts)
    uploads = _bucket_id(cfn, prefix, "uploads")
    bucket_hosts = (f"https://<{uploads}.DomainName>", f"https://<{uploads}.RegionalDomainName>")
    assert " ".join(("connect-src 'self'", *bucket_hosts)) in csp
    assert not [d for d in csp if d.startswith("script-src") and "unsafe" in d]
    assert headers["FrameOptions"] == {"FrameOption": "DENY", "Override": True}
    assert headers["ContentTypeOptions"] == {"Override": True}
    assert headers["StrictTransportSecurity"]["AccessControlMaxAgeSec"] >= 365 * 86400
    # And: exactly the values anything else serving the console sends (infra/console_headers.py)
    assert policy == console_headers(bucket_hosts)["Content-Security-Policy"]
    assert CONSOLE_HEADERS["Strict-Transport-Security"] == (
        f"max-age={headers['StrictTransportSecurity']['AccessControlMaxAgeSec']}; includeSubDomains"
    )
    assert headers["FrameOptions"]["FrameOption"] == CONSOLE_HEADERS["X-Frame-Options"]
    assert headers["ReferrerPolicy"]["ReferrerPolicy"] == CONSOLE_HEADERS["Referrer-Policy"]
    custom = console["ResponseHeadersPolicyConfig"]["CustomHeadersConfig"]["Items"]
    assert {h["Header"]: h["Value"] for h in custom} == {
        "Permissions-Policy": CONSOLE_HEADERS["Permissions-Policy"]
    }
    # And: the API behaviours share a policy that never overrides the API's headers and sets no CSP
    (api_id,) = api_ids
    api = policies[api_id]["ResponseHeadersPolicyConfig"]["SecurityHeadersConfig"]
    assert "ContentSecurityPolicy" not in api
    assert all(value["Override"] is False for value in api.values())


def test_https_only_viewers_http2_and_cookie_free_access_logs(cfn: Cfn, prefix: str) -> None:
    # Given
    _, config = _distribution(cfn)
    logs_id = _bucket_id(cfn, prefix, "cdn-logs")

    # When
    logging = config["Logging"]
    logs_bucket = cfn.resources[logs_id]["Properties"]

    # Then: every behaviour redirects HTTP; logs go to their own bucket without cookies
    behaviours = [config["DefaultCacheBehavior"], *config["CacheBehaviors"]]
    assert {b["ViewerProtocolPolicy"] for b in behaviours} == {"redirect-to-https"}
    assert config["HttpVersion"] == "http2and3"
    assert logging["Bucket"] == {"Fn::GetAtt": [logs_id, "RegionalDomainName"]}
    assert logging["IncludeCookies"] is False
    # CloudFront writes standard logs with ACLs: enabled on this bucket only, still not public
    assert logs_bucket["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "ObjectWriter"}]}
    assert all(logs_bucket["PublicAccessBlockConfiguration"].values())
    assert logs_bucket["LifecycleConfiguration"]["Rules"] == [
        {"Id": "expire-logs", "Status": "Enabled", "ExpirationInDays": 90}
    ]


def test_console_dist_is_deployed_in_two_passes_with_cache_headers_and_an_invalidation(
    cfn: Cfn, prefix: str, synthesized: Synthesized, stack: BatchRouteStack
) -> None:
    # Given
    bucket_id = _bucket_id(cfn, prefix, "console")
    distribution_id, _ = _distribution(cfn)

    # When
    deployments = {tuple(d.get("Include", [])) or ("*",): d for d in _deployments(cfn)}
    manifest = json.loads((synthesized.outdir / f"{stack.stack_name}.assets.json").read_text())
    sources = {h: f["source"]["path"] for h, f in manifest["files"].items()}

    # Then: both copy the same console/dist asset under console/ in the console bucket
    assert set(deployments) == {("*",), ("index.html",)}
    for deployment in deployments.values():
        assert deployment["DestinationBucketName"] == {"Ref": bucket_id}
        assert deployment["DestinationBucketKeyPrefix"] == "console/"
        (key,) = deployment["SourceObjectKeys"]
        assert Path(sources[key.removesuffix(".zip")]) == assets.CONSOLE_DIST
    # And: hashed assets cached for a year and never pruned (an open console still loads the
    # page chunks its index.html names after a release)
    everything = deployments[("*",)]
    assert everything["Exclude"] == ["index.html"] and everything["Prune"] is False
    assert everything["SystemMetadata"] == {"cache-control": ASSETS_CACHE_CONTROL}
    # And: index.html revalidated on every load, then the edge invalidated
    index = deployments[("index.html",)]
    assert index["Exclude"] == ["*"] and index["Prune"] is False
    assert index["SystemMetadata"] == {"cache-control": INDEX_CACHE_CONTROL}
    assert index["DistributionId"] == {"Ref": distribution_id}
    assert index["DistributionPaths"] == ["/console/*"]


def test_the_deployment_handler_role_has_no_managed_policy_and_logs_to_its_own_group(
    cfn: Cfn, prefix: str
) -> None:
    # Given: CDK's one bucket-deployment handler
    ((_, handler),) = [
        (lid, props)
        for lid, props in cfn.properties("AWS::Lambda::Function").items()
        if lid.startswith("CustomCDKBucketDeployment")
    ]

    # When
    role_id = cfn.referenced(handler["Role"])
    role = cfn.resources[role_id]["Properties"]
    statements = cfn.policy_statements(role_id)

    # Then
    assert "ManagedPolicyArns" not in role
    assert render(handler["LoggingConfig"]["LogGroup"]).startswith("<")
    (logs,) = [s for s in statements if "logs:PutLogEvents" in s["Action"]]
    log_group_id = cfn.referenced(logs["Resource"])
    assert cfn.resources[log_group_id]["Properties"]["LogGroupName"] == f"/aws/lambda/{prefix}-console-deploy"
    # And: it writes to the console bucket only
    writes = [s for s in statements if "s3:PutObject" in s["Action"]]
    assert {render(r) for s in writes for r in s["Resource"]} == {
        f"<{_bucket_id(cfn, prefix, 'console')}.Arn>",
        f"<{_bucket_id(cfn, prefix, 'console')}.Arn>/*",
    }


def test_the_stack_outputs_the_console_url(cfn: Cfn) -> None:
    # Given
    distribution_id, _ = _distribution(cfn)

    # When
    output = cfn.template["Outputs"]["ConsoleUrl"]

    # Then
    assert render(output["Value"]) == f"https://<{distribution_id}.DomainName>/console/"
    assert cfn.template["Outputs"]["ConsoleDistributionId"]["Value"] == {"Ref": distribution_id}
    assert cfn.template["Outputs"]["ConsoleDistributionDomain"]["Value"] == {
        "Fn::GetAtt": [distribution_id, "DomainName"]
    }


# ----------------------------------------------------------------------------- the router


def _route(uris: list[str], querystring: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    node = shutil.which("node")
    assert node is not None, "node is needed to run the CloudFront function (it builds the console too)"
    driver = (
        SPA_ROUTER_CODE
        + "\nconst uris = JSON.parse(process.argv[1]);"
        + "\nconst qs = JSON.parse(process.argv[2]);"
        + "\nconsole.log(JSON.stringify(uris.map(function (uri) {"
        + "\n  return handler({ request: { method: 'GET', uri: uri, querystring: qs, headers: {} } });"
        + "\n})));"
    )
    arguments = [json.dumps(uris), json.dumps(querystring or {})]
    completed = subprocess.run(
        [node, "-e", driver, *arguments], capture_output=True, text=True, check=True, timeout=30
    )
    answers: list[dict[str, Any]] = json.loads(completed.stdout)
    return answers


@pytest.mark.parametrize("uri", ["/", "/console"])
def test_the_router_redirects_the_site_root_to_the_console(uri: str) -> None:
    # Given / When
    (answer,) = _route([uri])

    # Then
    assert answer["statusCode"] == 302
    assert answer["headers"]["location"] == {"value": "/console/"}


@pytest.mark.parametrize(
    ("querystring", "location"),
    [
        ({"token": {"value": "tok_AbC-123_x"}}, "/console/reset-password?token=tok_AbC-123_x"),
        (
            {"token": {"value": "a", "multiValue": [{"value": "a"}, {"value": "b"}]}, "debug": {"value": ""}},
            "/console/reset-password?token=a&token=b&debug",
        ),
        ({}, "/console/reset-password"),
    ],
)
def test_the_router_sends_the_reset_email_link_to_the_console_page(
    querystring: dict[str, Any], location: str
) -> None:
    # Given: the link password-reset emails carry ({PUBLIC_BASE_URL}/reset-password?token=...)
    # When
    (answer,) = _route(["/reset-password"], querystring)

    # Then: the console's page, with the query string
    assert answer["statusCode"] == 302
    assert answer["headers"]["location"] == {"value": location}


@pytest.mark.parametrize(
    "uri", ["/console/", "/console/billing", "/console/batches/batch_01JABCDEF", "/console/settings/keys/"]
)
def test_the_router_answers_console_routes_with_the_index(uri: str) -> None:
    # Given / When
    (answer,) = _route([uri])

    # Then: CloudFront fetches console/index.html; the SPA's router reads the address bar
    assert answer["uri"] == "/console/index.html"


@pytest.mark.parametrize(
    "uri", ["/console/assets/index-3f9a1c.js", "/console/favicon.svg", "/console/index.html", "/robots.txt"]
)
def test_the_router_leaves_files_and_other_paths_alone(uri: str) -> None:
    # Given / When
    (answer,) = _route([uri])

    # Then
    assert answer["uri"] == uri


def test_the_viewer_address_function_overwrites_a_forged_address() -> None:
    # Given: a client that sends its own value for the header the web ACL counts by
    node = shutil.which("node")
    assert node is not None
    event = {
        "viewer": {"ip": "198.51.100.23"},
        "request": {
            "method": "POST",
            "uri": "/v1/batches",
            "headers": {VIEWER_ADDRESS_HEADER: {"value": "10.9.8.7"}},
        },
    }
    driver = VIEWER_ADDRESS_CODE + "\nconsole.log(JSON.stringify(handler(JSON.parse(process.argv[1]))));"

    # When
    completed = subprocess.run(
        [node, "-e", driver, json.dumps(event)], capture_output=True, text=True, check=True, timeout=30
    )
    request = json.loads(completed.stdout)

    # Then: CloudFront's view of the viewer wins; the request is otherwise untouched
    assert request["headers"][VIEWER_ADDRESS_HEADER] == {"value": "198.51.100.23"}
    assert request["uri"] == "/v1/batches"


# ----------------------------------------------------------------------------- own domain


def _with_console_domain(**changes: Any) -> dict[str, Any]:
    context = load_context()
    test = {
        **context["environments"]["test"],
        "public_base_url": "https://console.test.batchroute.example",
        "console_domain_names": ["console.test.batchroute.example"],
        "console_certificate_arn": "arn:aws:acm:us-east-1:111122223333:certificate/abcd-1234",
        **changes,
    }
    return {**context, "environments": {**context["environments"], "test": test}}


def test_an_own_domain_gets_its_certificate_tls_1_2_and_the_console_url(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # Given: the test environment with the console's own domain (nag on: no CFR4 to acknowledge)
    app, stacks = build_app(
        outdir=str(tmp_path_factory.mktemp("console-domain")),
        context=_with_console_domain(),
        environments=("test",),
        stage_assets=False,
    )

    # When
    template = app.synth().get_stack_by_name(stacks["test"].stack_name).template
    cfn = Cfn(template)
    _, config = _distribution(cfn)

    # Then
    assert config["Aliases"] == ["console.test.batchroute.example"]
    assert config["ViewerCertificate"] == {
        "AcmCertificateArn": "arn:aws:acm:us-east-1:111122223333:certificate/abcd-1234",
        "MinimumProtocolVersion": "TLSv1.2_2021",
        "SslSupportMethod": "sni-only",
    }
    assert template["Outputs"]["ConsoleUrl"]["Value"] == "https://console.test.batchroute.example/console/"
    # And: the API trusts the console's names for signed-in writes (docs/auth.md, Cross-site writes)
    _, api = cfn.named("AWS::Lambda::Function", "FunctionName", f"{resources.resource_prefix('test')}-api")
    origins = api["Properties"]["Environment"]["Variables"]["CONSOLE_ORIGINS"]
    assert json.loads(origins) == ["https://console.test.batchroute.example"]


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"console_certificate_arn": ""}, "go together"),
        ({"console_domain_names": []}, "go together"),
        ({"console_certificate_arn": "arn:aws:acm:eu-west-1:111122223333:certificate/x"}, "us-east-1"),
        ({"public_base_url": "https://api.test.batchroute.example"}, "public_base_url"),
    ],
)
def test_inconsistent_console_domain_settings_are_refused(changes: dict[str, Any], problem: str) -> None:
    # Given
    values = _with_console_domain(**changes)["environments"]["test"]

    # When / Then
    with pytest.raises(ValueError, match=problem):
        EnvironmentConfig.from_mapping("test", values)
