"""Build the CDK app from cdk.json's context and synthesize it, offline (no AWS calls, no lookups)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from aws_cdk import App, Validations
from cdk_nag import AwsSolutionsChecks

from infra.assets import ROOT
from infra.context import ENVIRONMENTS, EnvironmentConfig
from infra.stack import BatchRouteStack

CDK_JSON = ROOT / "cdk.json"
# Reference assets where they are instead of copying .build/ into the output directory.
DISABLE_ASSET_STAGING = "aws:cdk:disable-asset-staging"


def load_context(path: Path = CDK_JSON) -> dict[str, Any]:
    """cdk.json's context: what the cdk CLI would hand the app."""
    context: dict[str, Any] = json.loads(path.read_text("utf-8"))["context"]
    return context


def build_app(
    *,
    outdir: str | None = None,
    context: dict[str, Any] | None = None,
    environments: tuple[str, ...] = ENVIRONMENTS,
    nag: bool = True,
    stage_assets: bool = True,
) -> tuple[App, dict[str, BatchRouteStack]]:
    """The app with one stack per environment.

    cdk.json's context is the default context, so running app.py directly behaves like the
    cdk CLI; under the CLI, its context (CDK_CONTEXT_JSON, -c options) wins. With nag, the
    AwsSolutions checks run at synth and any unacknowledged finding fails it (cdk.json sets
    @aws-cdk/core:strictCfnValidateErrors, so warnings fail too).
    """
    values = dict(load_context() if context is None else context)
    if not stage_assets:
        values[DISABLE_ASSET_STAGING] = True
    app = App(outdir=outdir, context=values)
    stacks = {
        name: BatchRouteStack(app, config=EnvironmentConfig.from_context(app, name)) for name in environments
    }
    if nag:
        Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
    return app, stacks


def synthesize(environment: str) -> dict[str, Any]:
    """The synthesized CloudFormation template of one environment's stack (needs `make build`)."""
    with tempfile.TemporaryDirectory(prefix="cdk-synth-") as outdir:
        app, stacks = build_app(outdir=outdir, environments=(environment,), nag=False, stage_assets=False)
        assembly = app.synth()
        template: dict[str, Any] = assembly.get_stack_by_name(stacks[environment].stack_name).template
    return template
