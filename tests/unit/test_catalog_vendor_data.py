"""Vendor facts the catalog data pins: each provider's API version (on its endpoint), the
limits of one vendor batch job, which models take sampling parameters, and an endpoint's
time-outs from the environment file."""

from __future__ import annotations

import shutil
from importlib.resources import as_file
from pathlib import Path

import botocore.session
import pytest

from batchroute.catalog import builtin_catalog
from batchroute.catalog import environments as environments_module
from batchroute.catalog.datafile import DataError
from batchroute.catalog.environments import Placeholders, load_deployment
from batchroute.catalog.loader import data_folder, load_catalog
from batchroute.domain.catalog.catalog import BatchLimits
from batchroute.providers.http import Timeouts

PLACEHOLDERS = Placeholders(
    {
        "emulators": "http://127.0.0.1:9",
        "region": "us-east-1",
        "bucket:artifacts": "b",
        "bedrock_batch_role_arn": "r",
    }
)


def _data_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    with as_file(data_folder()) as source:
        shutil.copytree(source, folder)
    return folder


def _replace_once(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} must occur once in {path.name}"
    path.write_text(text.replace(old, new))


def test_every_provider_pins_the_api_version_its_adapter_speaks() -> None:
    versions = {p.slug: p.api_version for p in builtin_catalog().providers}
    assert versions["openai"] == "v1"
    assert versions["anthropic"] == "2023-06-01"
    assert versions["google"] == "v1beta"
    assert versions["bedrock"] == "2023-09-30"
    assert all(versions.values()), versions


def test_bedrock_s_pinned_versions_are_those_of_botocore_s_service_models() -> None:
    # The Bedrock adapter speaks through botocore: its service models carry the versions.
    bedrock = builtin_catalog().provider("bedrock")
    assert bedrock is not None
    session = botocore.session.get_session()
    assert session.get_service_model("bedrock-runtime").api_version == bedrock.api_version
    assert session.get_service_model("bedrock").api_version == bedrock.control_api_version == "2023-04-20"


@pytest.mark.parametrize("environment", ["local", "test", "production"])
def test_every_endpoint_carries_its_provider_s_api_version(environment: str) -> None:
    catalog = builtin_catalog()
    deployment = load_deployment(catalog, environment, PLACEHOLDERS)
    assert deployment.endpoints
    for slug, endpoint in deployment.endpoints.items():
        provider = catalog.provider(slug)
        assert provider is not None
        assert endpoint.api_version == provider.api_version, slug
        assert endpoint.control_api_version == provider.control_api_version, slug


def test_the_vendor_batch_limits_are_the_published_ones() -> None:
    limits = {p.slug: p.batch_limits for p in builtin_catalog().providers}
    assert limits["openai"] == BatchLimits(
        max_requests=50_000, max_bytes=200_000_000, max_embedding_inputs=50_000
    )
    assert limits["anthropic"] == BatchLimits(max_requests=100_000, max_bytes=256_000_000)
    assert limits["google"] == BatchLimits(max_requests=None, max_bytes=20_000_000)
    assert limits["bedrock"] == BatchLimits(max_requests=50_000, max_bytes=1_000_000_000)
    assert limits["together"] == BatchLimits(max_requests=50_000, max_bytes=100_000_000)
    # Providers called per item have no job to bound.
    assert limits["groq"] == BatchLimits()


def test_a_batch_limit_must_be_a_positive_integer(tmp_path: Path) -> None:
    folder = _data_copy(tmp_path)
    _replace_once(
        folder / "providers.toml",
        "batch_limits = { max_requests = 50_000, max_bytes = 200_000_000, max_embedding_inputs = 50_000 }",
        'batch_limits = { max_requests = 0, max_bytes = "200 MB" }',
    )
    with pytest.raises(DataError) as raised:
        load_catalog(folder)
    assert "providers.toml" in str(raised.value)
    assert "batch_limits.max_requests" in str(raised.value)


def test_models_take_sampling_parameters_unless_their_data_says_not(tmp_path: Path) -> None:
    # Given the built-in data, every model takes them (none of them refuses temperature)
    assert all(model.sampling_parameters for model in builtin_catalog().models)
    # When a model's row says it does not (a reasoning model)
    folder = _data_copy(tmp_path)
    _replace_once(
        folder / "models.toml",
        '[models."gpt-4.1-mini"]\n',
        '[models."gpt-4.1-mini"]\nsampling_parameters = false\n',
    )
    models = {model.id: model for model in load_catalog(folder).models}
    # Then that model alone is marked
    assert not models["gpt-4.1-mini"].sampling_parameters
    assert models["gpt-4o-mini"].sampling_parameters


def test_an_endpoint_s_time_outs_come_from_the_environment_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a local environment giving OpenAI its own stream time-outs
    folder = _data_copy(tmp_path)
    _replace_once(
        folder / "environments" / "local.toml",
        'base_url = "{emulators}/openai/v1"\n',
        'base_url = "{emulators}/openai/v1"\ntimeouts = { first_byte = 20, idle = 45 }\n',
    )
    monkeypatch.setattr(environments_module, "data_folder", lambda: folder)
    # When the deployment is loaded
    deployment = load_deployment(builtin_catalog(), "local", PLACEHOLDERS)
    # Then that endpoint has them (the rest at their defaults), and the others the defaults
    openai = deployment.endpoint("openai")
    assert openai is not None
    assert openai.timeouts == Timeouts(first_byte=20.0, idle=45.0)
    anthropic = deployment.endpoint("anthropic")
    assert anthropic is not None and anthropic.timeouts == Timeouts()


def test_a_zero_time_out_fails_naming_the_environment_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _data_copy(tmp_path)
    _replace_once(
        folder / "environments" / "local.toml",
        'base_url = "{emulators}/openai/v1"\n',
        'base_url = "{emulators}/openai/v1"\ntimeouts = { idle = 0 }\n',
    )
    monkeypatch.setattr(environments_module, "data_folder", lambda: folder)
    with pytest.raises(DataError) as raised:
        load_deployment(builtin_catalog(), "local", PLACEHOLDERS)
    assert "local.toml" in str(raised.value) and "timeouts.idle" in str(raised.value)
