"""The stack's side of the providers (infra/providers.py): one empty, KMS-encrypted secret per
provider that the environment enables with an API key; only the functions that call
providers may read them; Bedrock's batch role and the permissions to run its jobs."""

from __future__ import annotations

from typing import Any

from batchroute import resources
from batchroute.catalog import builtin_catalog
from batchroute.catalog.environments import keyed_providers
from infra.context import EnvironmentConfig
from tests.infra.cfn import Cfn, as_list, render

CALLERS = {"api", "router", "sweeper"}


def _role_statements(cfn: Cfn, prefix: str, key: str) -> list[dict[str, Any]]:
    _, function = cfn.named("AWS::Lambda::Function", "FunctionName", f"{prefix}-{key}")
    return cfn.policy_statements(cfn.referenced(function["Properties"]["Role"]))


def _granted(statements: list[dict[str, Any]], action: str) -> set[str]:
    return {render(r) for s in statements if action in as_list(s["Action"]) for r in as_list(s["Resource"])}


def test_one_empty_encrypted_secret_per_keyed_provider(
    cfn: Cfn, prefix: str, config: EnvironmentConfig
) -> None:
    slugs = keyed_providers(builtin_catalog(), config.name)
    assert "openai" in slugs and "bedrock" not in slugs  # Bedrock: the IAM role, no key
    for slug in slugs:
        _, secret = cfn.named(
            "AWS::SecretsManager::Secret", "Name", resources.provider_secret_name(prefix, slug)
        )
        props = secret["Properties"]
        assert "SecretString" not in props and "GenerateSecretString" not in props  # the operator fills it
        assert props["KmsKeyId"]


def test_only_the_provider_callers_read_the_keys(cfn: Cfn, prefix: str, config: EnvironmentConfig) -> None:
    names = [
        resources.provider_secret_name(prefix, slug)
        for slug in keyed_providers(builtin_catalog(), config.name)
    ]
    secrets = {f"<{cfn.named('AWS::SecretsManager::Secret', 'Name', name)[0]}>" for name in names}
    for spec in resources.FUNCTIONS:
        readable = _granted(_role_statements(cfn, prefix, spec.key), "secretsmanager:GetSecretValue")
        assert (secrets <= readable) == (spec.key in CALLERS), spec.key
        assert not (secrets & readable) or spec.key in CALLERS


def test_bedrock_batch_jobs_run_as_their_own_role(cfn: Cfn, prefix: str) -> None:
    roles = [
        props
        for props in cfn.properties("AWS::IAM::Role").values()
        if any(
            render(s.get("Principal", {}).get("Service")) == "bedrock.amazonaws.com"
            for s in props["AssumeRolePolicyDocument"]["Statement"]
        )
    ]
    assert len(roles) == 1
    router = _role_statements(cfn, prefix, "router")
    assert _granted(router, "bedrock:CreateModelInvocationJob")
    assert _granted(router, "bedrock:InvokeModelWithResponseStream")
    (pass_role,) = [s for s in router if "iam:PassRole" in as_list(s["Action"])]
    assert pass_role["Condition"] == {"StringEquals": {"iam:PassedToService": "bedrock.amazonaws.com"}}
    settle = _role_statements(cfn, prefix, "settle")
    assert not _granted(settle, "bedrock:InvokeModel") and not _granted(settle, "iam:PassRole")


def test_the_payment_keys_are_one_empty_encrypted_secret_only_the_api_and_sweeper_read(
    cfn: Cfn, prefix: str
) -> None:
    # Given the secret the operator fills with {secret_key, webhook_secret} (docs/payments.md)
    logical, secret = cfn.named("AWS::SecretsManager::Secret", "Name", resources.payment_secret_name(prefix))
    props = secret["Properties"]
    assert "SecretString" not in props and "GenerateSecretString" not in props
    assert props["KmsKeyId"]
    # Then only the functions that call the processor may read it, and know its name
    for spec in resources.FUNCTIONS:
        readable = _granted(_role_statements(cfn, prefix, spec.key), "secretsmanager:GetSecretValue")
        assert (f"<{logical}>" in readable) == (spec.key in {"api", "sweeper"}), spec.key
        _, function = cfn.named("AWS::Lambda::Function", "FunctionName", f"{prefix}-{spec.key}")
        variables = function["Properties"]["Environment"]["Variables"]
        assert variables["PAYMENTS_SECRET_NAME"] == resources.payment_secret_name(prefix)


def _bedrock_batch_role(cfn: Cfn) -> str:
    (logical,) = [
        lid
        for lid, props in cfn.properties("AWS::IAM::Role").items()
        if any(
            render(s.get("Principal", {}).get("Service")) == "bedrock.amazonaws.com"
            for s in props["AssumeRolePolicyDocument"]["Statement"]
        )
    ]
    return logical


def test_the_providers_check_may_list_bedrock_models_and_inference_profiles(cfn: Cfn, prefix: str) -> None:
    # Given the functions that run the providers check (their Bedrock adapter's check():
    # ListFoundationModels and ListInferenceProfiles, the catalog's lanes naming `us.` profiles)
    for key in ("api", "router"):
        statements = _role_statements(cfn, prefix, key)
        # Then both lists are allowed, on every model and profile of the region
        assert _granted(statements, "bedrock:ListFoundationModels") == {"*"}, key
        assert _granted(statements, "bedrock:ListInferenceProfiles") == {"*"}, key
    # And the lane runner may list its jobs (a canceled batch finds the job a dead invocation made)
    assert _granted(_role_statements(cfn, prefix, "router"), "bedrock:ListModelInvocationJobs") == {"*"}
    # And a function that calls no provider may not
    assert not _granted(_role_statements(cfn, prefix, "settle"), "bedrock:ListInferenceProfiles")


def test_bedrock_batch_role_may_invoke_models_through_an_inference_profile(cfn: Cfn) -> None:
    # Given the role Bedrock's batch jobs run as (AWS's "Create a custom service role for
    # batch inference": with an inference profile, InvokeModel on the profile in the job's
    # region and on the model in every region the profile routes to)
    statements = cfn.policy_statements(_bedrock_batch_role(cfn))
    # Then it may invoke this account's inference profiles here and any region's foundation models
    assert _granted(statements, "bedrock:InvokeModel") == {
        "arn:<AWS::Partition>:bedrock:<AWS::Region>:<AWS::AccountId>:inference-profile/*",
        "arn:<AWS::Partition>:bedrock:*::foundation-model/*",
    }
    # And nothing else of Bedrock's: no streaming, no jobs of its own, no role to pass
    actions = {a for s in statements for a in as_list(s["Action"]) if a.startswith(("bedrock:", "iam:"))}
    assert actions == {"bedrock:InvokeModel"}
