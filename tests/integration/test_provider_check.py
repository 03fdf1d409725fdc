"""`batchroute-admin providers check` against the vendor emulators: each enabled provider's
adapter is built as the service builds it (endpoint, key from the provider's secret) and asked
for its model list; a provider that is down, or whose key is not set, fails with the reason."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from batchroute import resources
from batchroute.catalog import builtin_catalog
from batchroute.catalog.environments import load_deployment
from batchroute_tools.admin import main
from batchroute_tools.emulators import build_vendors
from batchroute_tools.emulators.behaviour import Behaviour, EmulatorConfig
from batchroute_tools.emulators.server import EmulatorServer
from batchroute_tools.local.provision import LocalStack


@pytest.fixture
def emulators(local_aws: LocalStack) -> Iterator[EmulatorServer]:
    behaviour = Behaviour(EmulatorConfig(providers_down=frozenset({"groq"})))
    server = EmulatorServer(
        build_vendors(behaviour, s3=boto3.client("s3", region_name=local_aws.region))
    ).start()
    yield server
    server.stop()


def _stack_file(tmp_path: Path, stack: LocalStack, emulators: EmulatorServer) -> Path:
    path = tmp_path / "stack.json"
    path.write_text(
        json.dumps({"prefix": stack.prefix, "region": stack.region, "emulators_url": emulators.base_url})
    )
    return path


def test_every_enabled_provider_is_checked_with_a_reason_on_failure(
    local_aws: LocalStack, emulators: EmulatorServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the local stack's provider secrets, with DeepInfra's key removed
    secrets = boto3.client("secretsmanager", region_name=local_aws.region)
    secrets.delete_secret(
        SecretId=resources.provider_secret_name(local_aws.prefix, "deepinfra"),
        ForceDeleteWithoutRecovery=True,
    )
    # When every provider is checked
    code = main(
        ["providers", "check", "--stack-file", str(_stack_file(tmp_path, local_aws, emulators)), "--json"]
    )
    checks = {c["provider"]: c for c in json.loads(capsys.readouterr().out)["providers"]}
    # Then each enabled provider was asked; Groq (down) and DeepInfra (no key) fail with why
    assert set(checks) == set(load_deployment(builtin_catalog(), "local").endpoints)
    assert code == 1
    assert checks["groq"]["ok"] is False and checks["groq"]["reason"].startswith("provider_unreachable")
    assert checks["deepinfra"]["ok"] is False and "provider-deepinfra" in checks["deepinfra"]["reason"]
    for slug in ("openai", "anthropic", "google", "bedrock", "together", "edge-eu"):
        assert checks[slug]["ok"] is True, checks[slug]
        assert checks[slug]["latency_ms"] >= 0 and checks[slug]["missing_models"] == []
        assert checks[slug]["models_listed"] >= 1
    assert "local-fake-key" not in json.dumps(checks)  # keys are never printed


def test_one_provider_in_text(
    local_aws: LocalStack, emulators: EmulatorServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "providers",
            "check",
            "--stack-file",
            str(_stack_file(tmp_path, local_aws, emulators)),
            "--provider",
            "openai",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("ok   openai: ") and "models listed" in out
    assert (
        main(
            [
                "providers",
                "check",
                "--stack-file",
                str(_stack_file(tmp_path, local_aws, emulators)),
                "--provider",
                "nope",
            ]
        )
        == 2
    )
