"""The public REST API: a Lambda proxy with stage logging, tracing, throttling and WAF."""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Match, Template

from infra.api import ORIGIN_VERIFY_HEADER, VIEWER_ADDRESS_HEADER
from infra.context import EnvironmentConfig
from infra.stack import BatchRouteStack
from tests.infra.cfn import Cfn, render


def test_every_route_proxies_to_the_api_function(cfn: Cfn, prefix: str) -> None:
    # Given
    api_id, _ = cfn.named("AWS::Lambda::Function", "FunctionName", f"{prefix}-api")

    # When
    methods = cfn.properties("AWS::ApiGateway::Method").values()

    # Then: ANY on / and on /{proxy+}, integrated with the api function
    assert sorted(m["HttpMethod"] for m in methods) == ["ANY", "ANY"]
    for method in methods:
        assert method["Integration"]["Type"] == "AWS_PROXY"
        assert f"<{api_id}.Arn>" in render(method["Integration"]["Uri"])
    (resource,) = cfn.properties("AWS::ApiGateway::Resource").values()
    assert resource["PathPart"] == "{proxy+}"


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
