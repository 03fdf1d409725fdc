"""Infrastructure suite fixtures: the Lambda assets are built once (cached: a no-op after
`make build`), and the app is synthesized once per session, both environments, with the
cdk-nag checks on exactly as `make synth` runs them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, cx_api
from aws_cdk.assertions import Template

from batchroute import resources
from infra import assets
from infra.context import ENVIRONMENTS, EnvironmentConfig
from infra.stack import BatchRouteStack
from infra.synth import build_app
from tests.infra.cfn import Cfn


@dataclass(frozen=True)
class Synthesized:
    app: App
    stacks: dict[str, BatchRouteStack]
    assembly: cx_api.CloudAssembly
    outdir: Path

    def template_json(self, environment: str) -> dict[str, Any]:
        template: dict[str, Any] = self.assembly.get_stack_by_name(
            self.stacks[environment].stack_name
        ).template
        return template


@pytest.fixture(scope="session", autouse=True)
def lambda_assets() -> assets.BuildResult:
    try:
        return assets.build(quiet=True)
    except assets.BuildError as error:
        pytest.fail(f"could not build .build/ assets (run `make build` to see why): {error}")


@pytest.fixture(scope="session")
def synthesized(lambda_assets: assets.BuildResult, tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    outdir = tmp_path_factory.mktemp("cdk.out")
    # Assets are referenced in place rather than copied: same template, faster.
    app, stacks = build_app(outdir=str(outdir), stage_assets=False)
    assembly = app.synth()  # fails on any unacknowledged cdk-nag finding, warnings included
    return Synthesized(app=app, stacks=stacks, assembly=assembly, outdir=outdir)


@pytest.fixture(scope="session")
def templates(synthesized: Synthesized) -> dict[str, Template]:
    return {env: Template.from_json(synthesized.template_json(env)) for env in ENVIRONMENTS}


@pytest.fixture(scope="session", params=ENVIRONMENTS)
def environment(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def template(templates: dict[str, Template], environment: str) -> Template:
    return templates[environment]


@pytest.fixture
def cfn(synthesized: Synthesized, environment: str) -> Cfn:
    return Cfn(synthesized.template_json(environment))


@pytest.fixture
def stack(synthesized: Synthesized, environment: str) -> BatchRouteStack:
    return synthesized.stacks[environment]


@pytest.fixture
def config(stack: BatchRouteStack) -> EnvironmentConfig:
    return stack.config


@pytest.fixture
def prefix(environment: str) -> str:
    name: str = resources.resource_prefix(environment)
    return name
