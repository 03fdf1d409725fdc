"""Create every AWS resource that batchroute.resources declares, on moto.

The definitions come from batchroute.resources only; this module decides how to
ask the AWS APIs for them, never what they are. It works against the moto server
(`endpoint_url` set, `make run`) and inside `moto.mock_aws` (`endpoint_url` None,
the parity and integration tests).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import boto3

from batchroute import resources
from batchroute.catalog import builtin_catalog
from batchroute.catalog.environments import keyed_providers
from batchroute.config import Settings

LOCAL_ACCOUNT = "123456789012"  # moto's default account id
LOCAL_REGION = "us-east-1"

# Browsers upload input files straight to the uploads bucket with signed URLs. The
# parity test holds this to the deployed bucket's rule.
_UPLOAD_CORS_RULE = {
    "AllowedMethods": ["PUT", "GET"],
    "AllowedOrigins": ["*"],
    "AllowedHeaders": ["*"],
    "ExposeHeaders": ["ETag"],
    "MaxAgeSeconds": 3000,
}


@dataclass(frozen=True)
class LocalStack:
    """Physical names of everything provision() created, keyed by the resources.py key."""

    prefix: str
    account: str
    region: str
    endpoint_url: str | None
    tables: dict[str, str]
    queue_urls: dict[str, str]
    queue_arns: dict[str, str]
    dlq_urls: dict[str, str]
    buckets: dict[str, str]
    state_machine_arn: str
    kms_key_id: str
    email_sender: str


def provision(
    *,
    prefix: str,
    account: str,
    region: str,
    endpoint_url: str | None,
    email_sender: str | None = None,
) -> LocalStack:
    # The default session caches service models, so a second provision (tests) is quick.
    # Typed Any: the service name is a variable, which typed boto3 overloads cannot follow.
    make_client: Any = boto3.client

    def client(service: str) -> Any:
        return make_client(service, region_name=region, endpoint_url=endpoint_url)

    tables = _create_tables(client("dynamodb"), prefix)
    queue_urls, queue_arns, dlq_urls = _create_queues(client("sqs"), prefix)
    buckets = _create_buckets(client("s3"), prefix=prefix, account=account, region=region)
    kms_key_id = _create_kms_key(client("kms"), prefix)
    sender = email_sender or str(Settings.model_fields["email_sender"].default)
    client("ses").verify_email_identity(EmailAddress=sender)
    state_machine_arn = _create_state_machine(
        client("stepfunctions"), prefix=prefix, account=account, queue_urls=queue_urls, tables=tables
    )
    _create_provider_secrets(client("secretsmanager"), prefix)
    return LocalStack(
        prefix=prefix,
        account=account,
        region=region,
        endpoint_url=endpoint_url,
        tables=tables,
        queue_urls=queue_urls,
        queue_arns=queue_arns,
        dlq_urls=dlq_urls,
        buckets=buckets,
        state_machine_arn=state_machine_arn,
        kms_key_id=kms_key_id,
        email_sender=sender,
    )


def _create_provider_secrets(secretsmanager: Any, prefix: str) -> None:
    """One secret per provider that authenticates with a key, as the CDK stack creates them;
    here filled with a fake key the vendor emulators accept (docs/emulators.md)."""
    for slug in keyed_providers(builtin_catalog(), "local"):
        secretsmanager.create_secret(
            Name=resources.provider_secret_name(prefix, slug), SecretString=f"local-fake-key-{slug}"
        )


def _create_tables(dynamodb: Any, prefix: str) -> dict[str, str]:
    names = {}
    for table in resources.TABLES:
        name = table.physical_name(prefix)
        key_names = [table.partition_key, table.sort_key]
        for index in table.indexes:
            key_names += [index.partition_key, index.sort_key]
        create: dict[str, Any] = {
            "TableName": name,
            "BillingMode": "PAY_PER_REQUEST",
            "KeySchema": _key_schema(table.partition_key, table.sort_key),
            # dict.fromkeys keeps the order and drops the repeats.
            "AttributeDefinitions": [
                {"AttributeName": key, "AttributeType": "S"} for key in dict.fromkeys(key_names)
            ],
        }
        if table.indexes:
            create["GlobalSecondaryIndexes"] = [
                {
                    "IndexName": index.name,
                    "KeySchema": _key_schema(index.partition_key, index.sort_key),
                    "Projection": {"ProjectionType": index.projection},
                }
                for index in table.indexes
            ]
        dynamodb.create_table(**create)
        dynamodb.update_time_to_live(
            TableName=name,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": table.ttl_attribute},
        )
        names[table.key] = name
    return names


def _key_schema(partition_key: str, sort_key: str) -> list[dict[str, str]]:
    return [
        {"AttributeName": partition_key, "KeyType": "HASH"},
        {"AttributeName": sort_key, "KeyType": "RANGE"},
    ]


def _create_queues(sqs: Any, prefix: str) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    queue_urls, queue_arns, dlq_urls = {}, {}, {}
    for queue in resources.QUEUES:
        # The DLQ first: the source queue's redrive policy names its ARN.
        dlq_url = sqs.create_queue(
            QueueName=queue.dlq_physical_name(prefix),
            Attributes={"MessageRetentionPeriod": str(queue.dlq_retention_seconds)},
        )["QueueUrl"]
        dlq_arn = _queue_arn(sqs, dlq_url)
        redrive_policy = {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": queue.max_receive_count}
        url = sqs.create_queue(
            QueueName=queue.physical_name(prefix),
            Attributes={
                "VisibilityTimeout": str(queue.visibility_timeout_seconds),
                "MessageRetentionPeriod": str(queue.retention_seconds),
                "RedrivePolicy": json.dumps(redrive_policy),
            },
        )["QueueUrl"]
        queue_urls[queue.key] = url
        queue_arns[queue.key] = _queue_arn(sqs, url)
        dlq_urls[queue.key] = dlq_url
    return queue_urls, queue_arns, dlq_urls


def _queue_arn(sqs: Any, url: str) -> str:
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
    return str(attributes["QueueArn"])


def _create_buckets(s3: Any, *, prefix: str, account: str, region: str) -> dict[str, str]:
    names = {}
    for bucket in resources.BUCKETS:
        name = bucket.physical_name(prefix, account)
        create: dict[str, Any] = {"Bucket": name}
        if region != "us-east-1":  # us-east-1 refuses an explicit location constraint
            create["CreateBucketConfiguration"] = {"LocationConstraint": region}
        s3.create_bucket(**create)
        s3.put_public_access_block(
            Bucket=name,
            PublicAccessBlockConfiguration={
                "BlockPublicAcls": True,
                "IgnorePublicAcls": True,
                "BlockPublicPolicy": True,
                "RestrictPublicBuckets": True,
            },
        )
        s3.put_bucket_encryption(
            Bucket=name,
            ServerSideEncryptionConfiguration={
                "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
            },
        )
        if bucket.lifecycle:
            s3.put_bucket_lifecycle_configuration(
                Bucket=name,
                LifecycleConfiguration={"Rules": [_lifecycle_rule(rule) for rule in bucket.lifecycle]},
            )
        if bucket.cors:
            s3.put_bucket_cors(Bucket=name, CORSConfiguration={"CORSRules": [_UPLOAD_CORS_RULE]})
        names[bucket.key] = name
    return names


def _lifecycle_rule(rule: resources.LifecycleRule) -> dict[str, Any]:
    shaped: dict[str, Any] = {"ID": rule.id, "Filter": {"Prefix": rule.prefix}, "Status": "Enabled"}
    if rule.expiration_days is not None:
        shaped["Expiration"] = {"Days": rule.expiration_days}
    if rule.abort_incomplete_multipart_days is not None:
        shaped["AbortIncompleteMultipartUpload"] = {
            "DaysAfterInitiation": rule.abort_incomplete_multipart_days
        }
    return shaped


def _create_kms_key(kms: Any, prefix: str) -> str:
    key_id = str(kms.create_key(Description=f"{prefix} data key")["KeyMetadata"]["KeyId"])
    kms.create_alias(AliasName=f"alias/{prefix}", TargetKeyId=key_id)
    return key_id


def _create_state_machine(
    sfn: Any, *, prefix: str, account: str, queue_urls: dict[str, str], tables: dict[str, str]
) -> str:
    substitutions = resources.workflow_substitutions(
        queue_urls=queue_urls, batches_table_name=tables["batches"]
    )
    created = sfn.create_state_machine(
        name=resources.state_machine_name(prefix),
        definition=resources.render_workflow_definition(substitutions),
        # moto checks only the ARN's shape; nothing assumes the role locally.
        roleArn=f"arn:aws:iam::{account}:role/{prefix}-workflow",
        type="STANDARD",
    )
    return str(created["stateMachineArn"])
