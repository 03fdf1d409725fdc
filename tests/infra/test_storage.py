"""Tables, buckets and the KMS key, as batchroute.resources declares them."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from batchroute import resources
from tests.infra.cfn import Cfn, as_list, render

RETAINED = {"DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain"}


def _keys(partition_key: str, sort_key: str) -> list[dict[str, str]]:
    return [
        {"AttributeName": partition_key, "KeyType": "HASH"},
        {"AttributeName": sort_key, "KeyType": "RANGE"},
    ]


def test_the_stack_has_exactly_the_declared_tables_and_buckets(template: Template) -> None:
    # Given / When: the synthesized stack
    # Then
    template.resource_count_is("AWS::DynamoDB::Table", len(resources.TABLES))
    template.resource_count_is("AWS::S3::Bucket", len(resources.BUCKETS) + len(resources.CONSOLE_BUCKETS))


@pytest.mark.parametrize("spec", resources.TABLES, ids=lambda t: t.key)
def test_table_keys_indexes_ttl_billing_recovery_and_encryption(
    template: Template, cfn: Cfn, prefix: str, spec: resources.Table
) -> None:
    # Given: the declared table
    expected_indexes = [
        {
            "IndexName": index.name,
            "KeySchema": _keys(index.partition_key, index.sort_key),
            "Projection": {"ProjectionType": index.projection},
        }
        for index in spec.indexes
    ]

    # When: the template's table of that name
    _, table = cfn.named("AWS::DynamoDB::Table", "TableName", spec.physical_name(prefix))
    props = table["Properties"]

    # Then: keys, indexes, TTL, billing, PITR and KMS encryption are as declared
    assert props["KeySchema"] == _keys(spec.partition_key, spec.sort_key)
    assert props.get("GlobalSecondaryIndexes", []) == expected_indexes
    if spec.key == "batches":
        # the deadline index holds only keys, so progress updates never rewrite it
        assert {i["IndexName"]: i["Projection"]["ProjectionType"] for i in expected_indexes}[
            "gsi2"
        ] == "KEYS_ONLY"
    declared = {spec.partition_key, spec.sort_key}
    declared |= {name for i in spec.indexes for name in (i.partition_key, i.sort_key)}
    assert {(a["AttributeName"], a["AttributeType"]) for a in props["AttributeDefinitions"]} == {
        (name, "S") for name in declared
    }
    assert props["TimeToLiveSpecification"] == {"AttributeName": spec.ttl_attribute, "Enabled": True}
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "TableName": spec.physical_name(prefix),
            "SSESpecification": {
                "SSEEnabled": True,
                "SSEType": "KMS",
                "KMSMasterKeyId": {"Fn::GetAtt": [Match.string_like_regexp("^SecurityKey"), "Arn"]},
            },
        },
    )


def test_tables_are_protected_in_production_only(cfn: Cfn, environment: str) -> None:
    # Given / When: every table of the environment
    tables = cfn.of_type("AWS::DynamoDB::Table").values()

    # Then: production tables cannot be deleted by accident; test tables can
    for table in tables:
        protected = table["Properties"].get("DeletionProtectionEnabled", False)
        if environment == "production":
            assert protected is True
            assert {k: table.get(k) for k in RETAINED} == RETAINED
        else:
            assert protected is False
            assert table.get("DeletionPolicy") == "Delete"


def test_one_customer_managed_key_with_rotation(template: Template) -> None:
    # Given / When: the synthesized stack
    # Then
    template.resource_count_is("AWS::KMS::Key", 1)
    template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})


@pytest.mark.parametrize("spec", resources.BUCKETS, ids=lambda b: b.key)
def test_bucket_name_encryption_public_access_and_lifecycle(
    cfn: Cfn, prefix: str, environment: str, spec: resources.Bucket
) -> None:
    # Given: the declared bucket, named per account
    name = spec.physical_name(prefix, "<AWS::AccountId>")

    # When
    _, bucket = cfn.named("AWS::S3::Bucket", "BucketName", name)
    props = bucket["Properties"]

    # Then: encrypted (log delivery cannot use KMS: SSE-S3 for the access-logs bucket)
    (encryption,) = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    algorithm = encryption["ServerSideEncryptionByDefault"]["SSEAlgorithm"]
    assert algorithm == ("AES256" if spec.key == "access-logs" else "aws:kms")
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    # And: lifecycle rules exactly as declared
    assert props["LifecycleConfiguration"]["Rules"] == [_lifecycle_rule(rule) for rule in spec.lifecycle]
    # And: retained in production
    if environment == "production":
        assert {k: bucket.get(k) for k in RETAINED} == RETAINED


def _lifecycle_rule(rule: resources.LifecycleRule) -> dict[str, Any]:
    expected: dict[str, Any] = {"Id": rule.id, "Status": "Enabled"}
    if rule.prefix:
        expected["Prefix"] = rule.prefix
    if rule.expiration_days is not None:
        expected["ExpirationInDays"] = rule.expiration_days
    if rule.abort_incomplete_multipart_days is not None:
        expected["AbortIncompleteMultipartUpload"] = {
            "DaysAfterInitiation": rule.abort_incomplete_multipart_days
        }
    return expected


@pytest.mark.parametrize("spec", resources.BUCKETS, ids=lambda b: b.key)
def test_buckets_log_access_and_allow_cors_only_where_declared(
    cfn: Cfn, prefix: str, spec: resources.Bucket
) -> None:
    # Given
    logs_id, _ = cfn.named(
        "AWS::S3::Bucket",
        "BucketName",
        resources.bucket("access-logs").physical_name(prefix, "<AWS::AccountId>"),
    )

    # When
    _, bucket = cfn.named("AWS::S3::Bucket", "BucketName", spec.physical_name(prefix, "<AWS::AccountId>"))
    props = bucket["Properties"]

    # Then: server access logs go to the access-logs bucket (which does not log itself)
    if spec.key == "access-logs":
        assert "LoggingConfiguration" not in props
    else:
        assert props["LoggingConfiguration"] == {
            "DestinationBucketName": {"Ref": logs_id},
            "LogFilePrefix": f"{spec.key}/",
        }
    # And: browsers may PUT/GET with signed URLs on CORS buckets only
    if spec.cors:
        (rule,) = props["CorsConfiguration"]["CorsRules"]
        assert sorted(rule["AllowedMethods"]) == ["GET", "PUT"]
        assert rule["AllowedOrigins"] == ["*"]
    else:
        assert "CorsConfiguration" not in props


def test_every_bucket_denies_requests_without_tls(cfn: Cfn) -> None:
    # Given
    buckets = cfn.of_type("AWS::S3::Bucket")

    # When: each bucket's policy
    policies = {
        cfn.referenced(props["Bucket"]): props["PolicyDocument"]["Statement"]
        for props in cfn.properties("AWS::S3::BucketPolicy").values()
    }

    # Then
    assert set(policies) == set(buckets)
    for bucket_id, statements in policies.items():
        denials = [
            s
            for s in statements
            if s["Effect"] == "Deny"
            and s.get("Condition", {}).get("Bool") == {"aws:SecureTransport": "false"}
        ]
        assert denials, f"{bucket_id} accepts plain HTTP"
        assert all(action == "s3:*" for d in denials for action in as_list(d["Action"]))


def test_access_log_delivery_is_allowed_only_from_our_buckets(cfn: Cfn, prefix: str) -> None:
    # Given: the access-logs bucket and the buckets that log into it
    def bucket_id(key: str) -> str:
        name = resources.bucket(key).physical_name(prefix, "<AWS::AccountId>")
        return cfn.named("AWS::S3::Bucket", "BucketName", name)[0]

    logs_id = bucket_id("access-logs")
    every_bucket = (*resources.BUCKETS, *resources.CONSOLE_BUCKETS)
    sources = {b.key: bucket_id(b.key) for b in every_bucket if b.key != "access-logs"}

    # When: the access-logs bucket policy's grants to the S3 logging service
    (policy,) = [
        p for p in cfn.properties("AWS::S3::BucketPolicy").values() if p["Bucket"] == {"Ref": logs_id}
    ]
    delivery = [
        s
        for s in policy["PolicyDocument"]["Statement"]
        if s.get("Principal") == {"Service": "logging.s3.amazonaws.com"}
    ]

    # Then: one PutObject grant per source bucket, into its own prefix, from this account only
    assert len(delivery) == len(sources)
    for statement in delivery:
        (source,) = [
            key
            for key, lid in sources.items()
            if statement["Condition"]["ArnLike"]["aws:SourceArn"] == {"Fn::GetAtt": [lid, "Arn"]}
        ]
        assert statement["Action"] == "s3:PutObject"
        assert render(statement["Resource"]) == f"<{logs_id}.Arn>/{source}/*"
        assert statement["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
