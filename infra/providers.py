"""What the stack needs to call the AI providers its environment enables
(catalog/data/environments/<env>.toml, docs/providers.md):

- one Secrets Manager secret per provider that authenticates with an API key,
  `<prefix>-provider-<slug>`, created EMPTY (the operator puts the key in; an empty secret
  makes that provider's lanes fail over with a message naming the secret), KMS-encrypted
  with the stack key;
- for Bedrock (IAM, no key): a role Bedrock batch inference jobs run as, allowed to read the
  job inputs and write the outputs under `bedrock-batch/` of the artifacts bucket, and to
  invoke the job's model through a cross-region inference profile (AWS's "Create a custom
  service role for batch inference": the profile in this region and the foundation model in
  every region it routes to);
- `grant_calls(function)`: read the secrets, invoke Bedrock models, run and watch batch
  inference jobs, list the models and inference profiles (the providers check) and pass the
  batch role: for the functions that call providers (the API, for direct chat, and the
  router, which runs the lanes);
- the payment processor's keys (docs/payments.md): one secret `<prefix>-payments-stripe`,
  created EMPTY, KMS-encrypted, that the operator fills with
  `{"secret_key": "sk_...", "webhook_secret": "whsec_..."}`; `grant_payments(function)` lets
  the API (checkout, the processor's webhook) and the sweeper (auto top-up charges) read it.
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from batchroute import resources
from batchroute.catalog import builtin_catalog
from batchroute.catalog.environments import load_deployment
from infra.context import EnvironmentConfig
from infra.naming import construct_id
from infra.security import Security

BEDROCK_BATCH_PREFIX = "bedrock-batch"


class Providers(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id_: str,
        *,
        prefix: str,
        config: EnvironmentConfig,
        security: Security,
        artifacts: s3.IBucket,
    ) -> None:
        super().__init__(scope, construct_id_)
        deployment = load_deployment(builtin_catalog(), config.name)
        self.secrets: dict[str, secretsmanager.CfnSecret] = {}
        for slug, endpoint in deployment.endpoints.items():
            if endpoint.credentials != "api_key":
                continue
            self.secrets[slug] = secretsmanager.CfnSecret(
                self,
                construct_id(slug, "Key"),
                name=resources.provider_secret_name(prefix, slug),
                description=f"{prefix}: API key of provider {slug} (empty: its lanes fail over)",
                kms_key_id=security.key.key_arn,
            )
        self.payment_secret = secretsmanager.CfnSecret(
            self,
            "PaymentsKeys",
            name=resources.payment_secret_name(prefix),
            description=f"{prefix}: the payment processor's keys, JSON {{secret_key, webhook_secret}}",
            kms_key_id=security.key.key_arn,
        )
        self._key = security.key
        self.bedrock = "bedrock" in deployment.endpoints
        self.batch_role: iam.Role | None = None
        if self.bedrock:
            stack = Stack.of(self)
            self.batch_role = iam.Role(
                self,
                "BedrockBatchRole",
                assumed_by=iam.ServicePrincipal(
                    "bedrock.amazonaws.com",
                    conditions={"StringEquals": {"aws:SourceAccount": stack.account}},
                ),
                description=f"{prefix}: Bedrock batch inference jobs read inputs and write outputs",
            )
            artifacts.grant_read(self.batch_role, f"{BEDROCK_BATCH_PREFIX}/input/*")
            artifacts.grant_put(self.batch_role, f"{BEDROCK_BATCH_PREFIX}/output/*")
            self.batch_role.add_to_policy(
                iam.PolicyStatement(
                    actions=["bedrock:InvokeModel"],
                    resources=[
                        f"arn:{stack.partition}:bedrock:{stack.region}:{stack.account}:inference-profile/*",
                        f"arn:{stack.partition}:bedrock:*::foundation-model/*",
                    ],
                )
            )

    def environment(self) -> dict[str, str]:
        """Variables for batchroute.config.Settings."""
        variables = {"PAYMENTS_SECRET_NAME": self.payment_secret.name or ""}
        if self.batch_role:
            variables["BEDROCK_BATCH_ROLE_ARN"] = self.batch_role.role_arn
        return variables

    def grant_payments(self, function: lambda_.Function) -> None:
        """Read the payment processor's keys (the API and the sweeper)."""
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
                resources=[self.payment_secret.ref],
            )
        )
        self._key.grant_decrypt(function)

    def grant_calls(self, function: lambda_.Function) -> None:
        if self.secrets:
            function.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
                    resources=[secret.ref for secret in self.secrets.values()],
                )
            )
            self._key.grant_decrypt(function)
        if not self.bedrock or self.batch_role is None:
            return
        stack = Stack.of(self)
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=[
                    "bedrock:InvokeModel",
                    "bedrock:InvokeModelWithResponseStream",
                    "bedrock:CreateModelInvocationJob",
                ],
                resources=[
                    f"arn:{stack.partition}:bedrock:*::foundation-model/*",
                    f"arn:{stack.partition}:bedrock:{stack.region}:{stack.account}:inference-profile/*",
                    f"arn:{stack.partition}:bedrock:{stack.region}:{stack.account}:model-invocation-job/*",
                ],
            )
        )
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["bedrock:GetModelInvocationJob", "bedrock:StopModelInvocationJob"],
                resources=[
                    f"arn:{stack.partition}:bedrock:{stack.region}:{stack.account}:model-invocation-job/*"
                ],
            )
        )
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=[
                    "bedrock:ListFoundationModels",
                    "bedrock:ListInferenceProfiles",
                    "bedrock:ListModelInvocationJobs",
                ],
                resources=["*"],
            )
        )
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["iam:PassRole"],
                resources=[self.batch_role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "bedrock.amazonaws.com"}},
            )
        )
