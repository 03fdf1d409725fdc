"""The registry: real adapters from the environment's endpoints (keys read per use, an adapter
rebuilt when its key rotates), ProviderNotConfigured for a provider not enabled here or
without a key, and the in-process simulator only when a local test suite asks for it."""

from __future__ import annotations

import pytest

from batchroute.catalog import builtin_catalog
from batchroute.catalog.environments import Placeholders, load_deployment
from batchroute.config import Settings
from batchroute.domain.catalog.catalog import Provider
from batchroute.providers.base import BatchApiProvider, ProviderRequest, SyncProvider
from batchroute.providers.credentials import ProviderNotConfigured
from batchroute.providers.endpoints import ProviderEndpoint
from batchroute.providers.openai.client import OpenAIBatch, OpenAIChat
from batchroute.providers.registry import ProviderRegistry
from batchroute.providers.simulated import (
    SimulatedBatchApiProvider,
    SimulatedSyncProvider,
    forget_simulated_jobs,
)

VENDOR = Provider(
    slug="vendor",
    display_name="Vendor",
    kind="vendor_batch",
    execution_mode="batch_api",
    regions=("us",),
    privacy_tiers=("standard",),
    data_retention_days=30,
)
HOST = Provider(
    slug="host",
    display_name="Host",
    kind="public_host",
    execution_mode="sync",
    regions=("us",),
    privacy_tiers=("standard",),
    data_retention_days=0,
)
ENDPOINTS = {
    "vendor": ProviderEndpoint("vendor", "openai", "http://127.0.0.1:9/openai/v1", batch_api=True),
    "host": ProviderEndpoint(
        "host", "openai_compatible", "http://127.0.0.1:9/hosts/host/v1", credentials="none"
    ),
}


class Keys:
    def __init__(self) -> None:
        self.value = "key-1"
        self.asked: list[str] = []

    def api_key(self, slug: str) -> str:
        self.asked.append(slug)
        return self.value


def registry(settings: Settings | None = None, keys: Keys | None = None) -> ProviderRegistry:
    return ProviderRegistry(
        settings or Settings(environment="local"), [VENDOR, HOST], endpoints=ENDPOINTS, keys=keys or Keys()
    )


def test_every_environment_builds_the_real_adapters_from_its_endpoints() -> None:
    for settings in (Settings(environment="local"), Settings(environment="test")):
        found = registry(settings)
        assert not found.simulated
        vendor, host = found.sync("vendor"), found.sync("host")
        assert isinstance(vendor, OpenAIChat) and isinstance(vendor, SyncProvider)
        assert vendor.token_field == "max_completion_tokens" and host.token_field == "max_tokens"  # type: ignore[attr-defined]
        assert isinstance(found.batch_api("vendor"), OpenAIBatch)
        assert isinstance(found.batch_api("vendor"), BatchApiProvider)
        assert found.sync("host") is found.sync("host")  # one adapter per provider


def test_keys_are_read_per_use_and_a_rotated_key_rebuilds_the_adapter() -> None:
    keys = Keys()
    found = registry(keys=keys)
    first = found.sync("vendor")
    assert found.sync("vendor") is first
    keys.value = "key-2"
    rotated = found.sync("vendor")
    assert rotated is not first
    assert rotated.http._client.headers["authorization"] == "Bearer key-2"  # type: ignore[attr-defined]
    assert keys.asked == ["vendor", "vendor", "vendor"]
    found.sync("host")  # credentials = none: no key is read
    assert keys.asked == ["vendor", "vendor", "vendor"]


def test_a_provider_without_an_endpoint_here_is_not_configured() -> None:
    found = ProviderRegistry(Settings(environment="test"), [VENDOR, HOST], endpoints={}, keys=Keys())
    with pytest.raises(ProviderNotConfigured, match="not enabled in the test environment"):
        found.sync("host")
    with pytest.raises(ProviderNotConfigured, match="synchronously"):
        registry().batch_api("host")
    with pytest.raises(ProviderNotConfigured, match="unknown provider 'nope'"):
        registry().sync("nope")


def test_the_simulator_answers_only_when_a_local_test_suite_asks() -> None:
    simulated = registry(Settings(environment="local", simulated_providers=True))
    assert simulated.simulated
    assert isinstance(simulated.sync("host"), SimulatedSyncProvider)
    assert isinstance(simulated.batch_api("vendor"), SimulatedBatchApiProvider)
    with pytest.raises(ValueError, match="local tests only"):
        Settings(environment="test", simulated_providers=True)


def test_every_builtin_provider_has_an_adapter_in_every_environment() -> None:
    values = {
        "emulators": "http://127.0.0.1:9",
        "region": "us-east-1",
        "bucket:artifacts": "b",
        "bedrock_batch_role_arn": "r",
    }
    for environment in ("local", "test", "production"):
        deployment = load_deployment(builtin_catalog(), environment, Placeholders(values))
        for slug, endpoint in deployment.endpoints.items():
            assert endpoint.adapter in ("openai", "openai_compatible", "anthropic", "gemini", "bedrock"), slug
            provider = deployment.catalog.provider(slug)
            assert provider is not None and provider.enabled
            assert endpoint.batch_api == (provider.execution_mode == "batch_api")


def test_the_simulated_registry_answers_every_builtin_provider() -> None:
    catalog = builtin_catalog()
    found = ProviderRegistry(
        Settings(environment="local", simulated_providers=True, simulated_latency_ms=0), catalog.providers
    )
    request = ProviderRequest(
        custom_id="seq-0",
        customer_item_id="a",
        operation="responses",
        model="m",
        provider_model_id="m",
        input={"messages": [{"role": "user", "content": "hi"}]},
        max_output_tokens=64,
    )
    for provider in found.providers:
        assert found.sync(provider.slug).complete(request).status == "completed"
        if provider.execution_mode == "batch_api":
            assert found.batch_api(provider.slug).submit([request]).startswith("simbatch_")
    forget_simulated_jobs()


def test_batch_poll_interval_follows_the_emulated_job_time_locally() -> None:
    local = ProviderRegistry(Settings(simulated_batch_poll_seconds=1), [VENDOR])
    assert local.batch_poll_interval_seconds == 0.5
    instant = ProviderRegistry(Settings(simulated_batch_poll_seconds=0), [VENDOR])
    assert instant.batch_poll_interval_seconds == 0.1
    deployed = ProviderRegistry(
        Settings(environment="test", provider_batch_poll_interval_seconds=45), [VENDOR]
    )
    assert deployed.batch_poll_interval_seconds == 45
