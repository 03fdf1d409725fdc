"""Both environments synthesize offline from cdk.json's context, through infra.synth and app.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from batchroute import resources
from infra.assets import ROOT
from infra.context import ENVIRONMENTS, EnvironmentConfig
from infra.stack import BatchRouteStack
from infra.synth import load_context, synthesize
from tests.infra.cfn import Cfn
from tests.infra.conftest import Synthesized

TAGGED_TYPES = (
    "AWS::DynamoDB::Table",
    "AWS::SQS::Queue",
    "AWS::S3::Bucket",
    "AWS::Lambda::Function",
    "AWS::StepFunctions::StateMachine",
    "AWS::KMS::Key",
)


def test_synthesize_returns_the_template_app_py_deploys(synthesized: Synthesized, environment: str) -> None:
    # Given: the session's app (built as app.py builds it)
    expected = synthesized.template_json(environment)

    # When
    template = synthesize(environment)

    # Then
    assert template["Resources"] == expected["Resources"]
    assert template["Outputs"] == expected["Outputs"]


def test_cdk_json_runs_app_py_and_configures_both_environments() -> None:
    # Given
    cdk_json = json.loads((ROOT / "cdk.json").read_text())

    # When
    environments = load_context()["environments"]

    # Then
    assert cdk_json["app"] == ".venv/bin/python app.py"
    assert set(environments) == set(ENVIRONMENTS)
    for name, values in environments.items():
        assert EnvironmentConfig.from_mapping(name, values).name == name


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"public_base_url": "http://api.example"}, "https"),
        ({"log_retention_days": 42}, "log_retention_days"),
        ({"api_5xx_rate_threshold": 5}, "fraction"),
        ({"surprise": True}, "unknown settings"),
    ],
)
def test_invalid_environment_settings_are_refused(change: dict[str, Any], problem: str) -> None:
    # Given
    values = {**load_context()["environments"]["test"], **change}

    # When / Then
    with pytest.raises((ValueError, TypeError), match=problem):
        EnvironmentConfig.from_mapping("test", values)


def test_stacks_are_environment_agnostic(stack: BatchRouteStack, environment: str) -> None:
    # Given / When: the stack (no lookups, no account or region baked in)
    # Then
    assert stack.stack_name == resources.resource_prefix(environment)
    assert stack.environment == "aws://unknown-account/unknown-region"


def test_resources_are_tagged_with_service_and_environment(cfn: Cfn, environment: str) -> None:
    for resource_type in TAGGED_TYPES:
        for logical_id, props in cfn.properties(resource_type).items():
            # When
            tags = props.get("Tags", [])
            tags = tags if isinstance(tags, list) else [{"Key": k, "Value": v} for k, v in tags.items()]

            # Then
            assert {"Key": "service", "Value": resources.SERVICE} in tags, logical_id
            assert {"Key": "environment", "Value": environment} in tags, logical_id


def test_app_py_writes_both_templates_without_the_cdk_cli(tmp_path: Path) -> None:
    # Given: no CLI context in the environment; outdir as the CLI would pass it
    env = {k: v for k, v in os.environ.items() if not k.startswith("CDK_")}
    env["CDK_OUTDIR"] = str(tmp_path)

    # When
    completed = subprocess.run(
        [sys.executable, "app.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )

    # Then
    assert completed.returncode == 0, completed.stderr[-3000:]
    for name in ENVIRONMENTS:
        template = json.loads((tmp_path / f"{resources.resource_prefix(name)}.template.json").read_text())
        assert template["Resources"]
