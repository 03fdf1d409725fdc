"""The public REST API: a Lambda proxy with stage logging, tracing, throttling and WAF."""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Match, Template

from batchroute.resources import STREAM_TIMEOUT_SECONDS
from infra.api import ORIGIN_VERIFY_HEADER, VIEWER_ADDRESS_HEADER
from infra.compute import API_ALIAS, API_STREAM, STREAM_SCRIPT
from infra.context import EnvironmentConfig
from infra.stack import BatchRouteStack
from tests.infra.cfn import Cfn, render


def _methods(cfn: Cfn) -> dict[tuple[str, str], dict[str, Any]]:
    """Every method by (resource path, HTTP method); the root is "/"."""
    resources = cfn.properties("AWS::ApiGateway::Resource")

    def path(ref: Any) -> str:
        if not isinstance(ref, dict) or "Ref" not in ref:
            return ""  # the API's root resource (GetAtt RootResourceId)
        props = resources[ref["Ref"]]
        return f"{path(props['ParentId'])}/{props['PathPart']}"

    return {
        (path(m["ResourceId"]) or "/", m["HttpMethod"]): m
        for m in cfn.properties("AWS::ApiGateway::Method").values()
    }


def test_every_route_proxies_to_the_api_alias_but_the_streamed_ones(cfn: Cfn, prefix: str) -> None:
    # Given: the buffered API's alias (SnapStart) and the streaming function
    api_id, _ = cfn.named("AWS::Lambda::Function", "FunctionName", f"{prefix}-api")
    stream_id, _ = cfn.named("AWS::Lambda::Function", "FunctionName", f"{prefix}-{API_STREAM}")
    (alias_id,) = [lid for lid, p in cfn.properties("AWS::Lambda::Alias").items() if p["Name"] == API_ALIAS]

    # When
    methods = _methods(cfn)

    # Then: the streamed routes stream from the streaming function (InvokeWithResponseStream)
    streamed = {("/v1/chat/completions", "POST"), ("/v1/compat", "ANY"), ("/v1/compat/{proxy+}", "ANY")}
    for key in streamed:
        integration = methods[key]["Integration"]
        assert integration["Type"] == "AWS_PROXY", key
        assert integration["ResponseTransferMode"] == "STREAM", key
        # and may run as long as the streaming function, past the buffered API's 29 s
        assert integration["TimeoutInMillis"] == STREAM_TIMEOUT_SECONDS * 1000, key
        uri = render(integration["Uri"])
        assert f"<{stream_id}.Arn>" in uri and "response-streaming-invocations" in uri, key
    # and everything else is buffered, on the API's alias, with a catch-all at every level
    for key, method in methods.items():
        if key in streamed:
            continue
        integration = method["Integration"]
        assert integration["Type"] == "AWS_PROXY", key
        assert integration.get("ResponseTransferMode", "BUFFERED") == "BUFFERED", key
        assert integration.get("TimeoutInMillis", 29_000) == 29_000, key
        assert f"<{alias_id}>" in render(integration["Uri"]), key
        assert f"<{api_id}.Arn>" not in render(integration["Uri"]), key  # never $LATEST
    for path in ("/", "/v1", "/v1/chat", "/v1/chat/completions"):
        assert (path, "ANY") in methods
        assert (f"{path.rstrip('/')}/{{proxy+}}", "ANY") in methods


def test_the_streaming_function_runs_the_app_under_the_web_adapter(cfn: Cfn, prefix: str) -> None:
    # Given / When
    _, function = cfn.named("AWS::Lambda::Function", "FunctionName", f"{prefix}-{API_STREAM}")
    props = function["Properties"]
    _, api = cfn.named("AWS::Lambda::Function", "FunctionName", f"{prefix}-api")

    # Then: the adapter's layer and exec wrapper, in response-stream mode, over the API's code
    variables = props["Environment"]["Variables"]
    assert variables["AWS_LAMBDA_EXEC_WRAPPER"] == "/opt/bootstrap"
    assert variables["AWS_LWA_INVOKE_MODE"] == "response_stream"
    assert props["Handler"] == STREAM_SCRIPT
    assert any("LambdaAdapterLayerX86" in str(render(layer)) for layer in props["Layers"])
    assert props["Code"] == api["Properties"]["Code"]
    assert props["Timeout"] == STREAM_TIMEOUT_SECONDS > api["Properties"]["Timeout"]
    # with the API's settings (the same app reads them)
    for name, value in api["Properties"]["Environment"]["Variables"].items():
        assert variables[name] == value, name


def test_the_api_function_starts_from_a_snapstart_snapshot(cfn: Cfn, prefix: str) -> None:
    # Given / When
    api_id, function = cfn.named("AWS::Lambda::Function", "FunctionName", f"{prefix}-api")
    versions = [
        lid
        for lid, p in cfn.properties("AWS::Lambda::Version").items()
        if render(p["FunctionName"]) == f"<{api_id}>"
    ]
    (alias,) = [p for p in cfn.properties("AWS::Lambda::Alias").values() if p["Name"] == API_ALIAS]

    # Then: SnapStart on published versions, and the alias API Gateway calls is one of them
    assert function["Properties"]["SnapStart"] == {"ApplyOn": "PublishedVersions"}
    assert function["Properties"]["Runtime"] == "python3.12"  # SnapStart for Python: 3.12+
    assert len(versions) == 1
    assert render(alias["FunctionVersion"]) == f"<{versions[0]}.Version>"


def test_the_stage_is_named_after_the_environment_traced_logged_and_throttled(
    template: Template, environment: str, config: EnvironmentConfig
) -> None:
    # Given / When: the synthesized stack
    # Then
    template.has_resource_properties(
        "AWS::ApiGateway::Stage",
        {
            "StageName": environment,
            "TracingEnabled": True,
            "AccessLogSetting": {"DestinationArn": Match.any_value(), "Format": Match.any_value()},
            "MethodSettings": [
                Match.object_like(
                    {
                        "HttpMethod": "*",
                        "ResourcePath": "/*",
                        "LoggingLevel": "ERROR",
                        "DataTraceEnabled": False,
                        "ThrottlingRateLimit": config.api_throttling_rate_limit,
                        "ThrottlingBurstLimit": config.api_throttling_burst_limit,
                    }
                )
            ],
        },
    )


def test_the_stage_sits_behind_a_web_acl_with_a_per_ip_rate_limit(
    template: Template, cfn: Cfn, config: EnvironmentConfig
) -> None:
    # Given
    (stage_id,) = cfn.of_type("AWS::ApiGateway::Stage")
    (acl_id,) = cfn.of_type("AWS::WAFv2::WebACL")

    # When
    (association,) = cfn.properties("AWS::WAFv2::WebACLAssociation").values()

    # Then
    assert association["WebACLArn"] == {"Fn::GetAtt": [acl_id, "Arn"]}
    assert render(association["ResourceArn"]).endswith(f"/stages/<{stage_id}>")
    template.has_resource_properties(
        "AWS::WAFv2::WebACL",
        {
            "Scope": "REGIONAL",
            "DefaultAction": {"Allow": {}},
            "Rules": Match.array_with(
                [
                    Match.object_like(
                        {
                            "Action": {"Block": {}},
                            "Statement": {
                                "RateBasedStatement": Match.object_like(
                                    {
                                        "AggregateKeyType": "IP",
                                        "Limit": config.waf_requests_per_ip_per_5_minutes,
                                    }
                                )
                            },
                        }
                    )
                ]
            ),
        },
    )


def _rate_rules(cfn: Cfn) -> dict[str, dict[str, Any]]:
    (acl,) = cfn.properties("AWS::WAFv2::WebACL").values()
    return {
        r["Name"]: r["Statement"]["RateBasedStatement"]
        for r in acl["Rules"]
        if "RateBasedStatement" in r["Statement"]
    }


def test_console_traffic_is_rate_limited_per_viewer_and_direct_callers_per_source(
    cfn: Cfn, stack: BatchRouteStack, config: EnvironmentConfig
) -> None:
    # Given: the origin-verify secret the console's distribution sends
    secret = stack.get_logical_id(stack.api.origin_secret.node.default_child)  # type: ignore[arg-type]
    verified = {
        "ByteMatchStatement": {
            "FieldToMatch": {"SingleHeader": {"Name": ORIGIN_VERIFY_HEADER}},
            "PositionalConstraint": "EXACTLY",
            "SearchString": {
                "Fn::Join": ["", ["{{resolve:secretsmanager:", {"Ref": secret}, ":SecretString:::}}"]]
            },
            "TextTransformations": [{"Priority": 0, "Type": "NONE"}],
        }
    }

    # When
    rules = _rate_rules(cfn)

    # Then: without the secret, by source address (a caller cannot choose its own key) ...
    assert set(rules) == {"rate-limit-per-ip", "rate-limit-per-viewer"}
    direct = rules["rate-limit-per-ip"]
    assert direct["AggregateKeyType"] == "IP"
    assert direct["ScopeDownStatement"] == {"NotStatement": {"Statement": verified}}
    # ... with it, by the viewer address CloudFront's function wrote (edge addresses are shared)
    viewer = rules["rate-limit-per-viewer"]
    assert viewer["AggregateKeyType"] == "FORWARDED_IP"
    assert viewer["ForwardedIPConfig"] == {
        "HeaderName": VIEWER_ADDRESS_HEADER,
        "FallbackBehavior": "NO_MATCH",
    }
    assert viewer["ScopeDownStatement"] == verified
    assert direct["Limit"] == viewer["Limit"] == config.waf_requests_per_ip_per_5_minutes
    # And: the value is generated by Secrets Manager, never written in the template
    generated = cfn.resources[secret]["Properties"]["GenerateSecretString"]
    assert generated["PasswordLength"] >= 32
