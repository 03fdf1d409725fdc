"""DynamoDB tables and S3 buckets, exactly as batchroute.resources declares them."""

from __future__ import annotations

from aws_cdk import Aws, Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from batchroute import resources
from infra.context import EnvironmentConfig
from infra.naming import construct_id

ACCESS_LOGS_BUCKET = "access-logs"


class Storage(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id_: str,
        *,
        prefix: str,
        config: EnvironmentConfig,
        key: kms.IKey,
    ) -> None:
        super().__init__(scope, construct_id_)
        self._removal = RemovalPolicy.RETAIN if config.is_production else RemovalPolicy.DESTROY
        self.tables = {
            spec.key: self._table(spec, prefix=prefix, key=key, production=config.is_production)
            for spec in resources.TABLES
        }
        # The access-logs bucket first: the others deliver their server access logs to it.
        self.access_logs = self._bucket(resources.bucket(ACCESS_LOGS_BUCKET), prefix=prefix, key=None)
        self.buckets = {ACCESS_LOGS_BUCKET: self.access_logs}
        for spec in resources.BUCKETS:
            if spec.key != ACCESS_LOGS_BUCKET:
                self.buckets[spec.key] = self._bucket(spec, prefix=prefix, key=key)

    def _table(
        self, spec: resources.Table, *, prefix: str, key: kms.IKey, production: bool
    ) -> dynamodb.Table:
        table = dynamodb.Table(
            self,
            construct_id(spec.key, "Table"),
            table_name=spec.physical_name(prefix),
            partition_key=_string_attribute(spec.partition_key),
            sort_key=_string_attribute(spec.sort_key),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED,
            encryption_key=key,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            time_to_live_attribute=spec.ttl_attribute,
            deletion_protection=production,
            removal_policy=self._removal,
        )
        for index in spec.indexes:
            table.add_global_secondary_index(
                index_name=index.name,
                partition_key=_string_attribute(index.partition_key),
                sort_key=_string_attribute(index.sort_key),
                projection_type=dynamodb.ProjectionType[index.projection],
            )
        return table

    def _bucket(self, spec: resources.Bucket, *, prefix: str, key: kms.IKey | None) -> s3.Bucket:
        # S3 log delivery cannot write to a KMS-encrypted bucket: the log bucket uses SSE-S3.
        encryption = s3.BucketEncryption.S3_MANAGED if key is None else s3.BucketEncryption.KMS
        logs_bucket = None if spec.key == ACCESS_LOGS_BUCKET else self.access_logs
        return s3.Bucket(
            self,
            construct_id(spec.key, "Bucket"),
            bucket_name=spec.physical_name(prefix, Aws.ACCOUNT_ID),
            encryption=encryption,
            encryption_key=key,
            bucket_key_enabled=key is not None or None,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            enforce_ssl=True,
            minimum_tls_version=1.2,
            # Unversioned on purpose: retention deletes customer data for good.
            versioned=False,
            server_access_logs_bucket=logs_bucket,
            server_access_logs_prefix=f"{spec.key}/" if logs_bucket else None,
            lifecycle_rules=[lifecycle_rule(rule) for rule in spec.lifecycle],
            cors=_upload_cors() if spec.cors else None,
            removal_policy=self._removal,
        )


def _string_attribute(name: str) -> dynamodb.Attribute:
    return dynamodb.Attribute(name=name, type=dynamodb.AttributeType.STRING)


def lifecycle_rule(rule: resources.LifecycleRule) -> s3.LifecycleRule:
    return s3.LifecycleRule(
        id=rule.id,
        prefix=rule.prefix or None,
        expiration=Duration.days(rule.expiration_days) if rule.expiration_days is not None else None,
        abort_incomplete_multipart_upload_after=(
            Duration.days(rule.abort_incomplete_multipart_days)
            if rule.abort_incomplete_multipart_days is not None
            else None
        ),
    )


def _upload_cors() -> list[s3.CorsRule]:
    # Browsers PUT/GET straight to S3 with signed URLs; the signature is the authorization.
    return [
        s3.CorsRule(
            allowed_methods=[s3.HttpMethods.PUT, s3.HttpMethods.GET],
            allowed_origins=["*"],
            allowed_headers=["*"],
            exposed_headers=["ETag"],
            max_age=3000,
        )
    ]
