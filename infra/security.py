"""The stack's customer managed KMS key and the application secret."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra.context import EnvironmentConfig

APP_SECRET_LENGTH = 64


class Security(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, prefix: str, config: EnvironmentConfig
    ) -> None:
        super().__init__(scope, construct_id)
        removal = RemovalPolicy.RETAIN if config.is_production else RemovalPolicy.DESTROY

        self.key = kms.Key(
            self,
            "Key",
            alias=f"alias/{prefix}",
            description=f"{prefix}: tables, queues, buckets, secret and alarm topic",
            enable_key_rotation=True,
            removal_policy=removal,
        )
        # CloudWatch alarms publish to the KMS-encrypted alarm topic.
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowCloudWatchAlarmsToUseTheKey",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],
            )
        )

        # Keys API-key hashes and signs tokens (batchroute.config.Settings.app_secret_arn).
        self.app_secret = secretsmanager.Secret(
            self,
            "AppSecret",
            secret_name=f"{prefix}/app-secret",
            description=f"{prefix}: HMAC key for API-key hashes and signed tokens",
            encryption_key=self.key,
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=APP_SECRET_LENGTH, exclude_punctuation=True
            ),
            removal_policy=removal,
        )
