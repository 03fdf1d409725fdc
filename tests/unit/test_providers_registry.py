from __future__ import annotations

import pytest

from batchroute.config import Settings
from batchroute.domain.catalog import Provider
from batchroute.providers.base import BatchApiProvider, ProviderRequest, SyncProvider
from batchroute.providers.registry import ProviderNotConfigured, ProviderRegistry, provider_registry
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


def local_registry() -> ProviderRegistry:
    return ProviderRegistry(Settings(environment="local"), [VENDOR, HOST], sleeper=lambda _s: None)


def test_local_mode_simulates_every_provider_synchronously() -> None:
    registry = local_registry()
    assert registry.simulated
    for slug in ("vendor", "host"):
        adapter = registry.sync(slug)
        assert isinstance(adapter, SimulatedSyncProvider) and isinstance(adapter, SyncProvider)
        assert adapter.slug == slug
    assert registry.sync("host") is registry.sync("host")  # one adapter per provider


def test_local_mode_simulates_batch_apis_for_batch_lanes_only() -> None:
    registry = local_registry()
    adapter = registry.batch_api("vendor")
    assert isinstance(adapter, SimulatedBatchApiProvider) and isinstance(adapter, BatchApiProvider)
    assert registry.execution_mode("vendor") == "batch_api"
    assert registry.execution_mode("host") == "sync"
    with pytest.raises(ProviderNotConfigured, match="synchronously"):
        registry.batch_api("host")


def test_unknown_providers_are_refused() -> None:
    with pytest.raises(ProviderNotConfigured, match="unknown provider 'nope'"):
        local_registry().sync("nope")


@pytest.mark.parametrize(
    "settings",
    [
        Settings(environment="test"),
        Settings(environment="production", app_secret="p" * 40, public_base_url="https://api.example.com"),
    ],
)
def test_deployed_stacks_have_no_fake_providers(settings: Settings) -> None:
    # Given a deployed environment, with no real adapter registered yet
    registry = ProviderRegistry(settings, [VENDOR, HOST])
    assert not registry.simulated
    # Then asking for an adapter says so plainly instead of simulating
    with pytest.raises(ProviderNotConfigured, match="no synchronous adapter") as caught:
        registry.sync("host")
    assert settings.environment in str(caught.value)
    with pytest.raises(ProviderNotConfigured, match="no batch API adapter"):
        registry.batch_api("vendor")


def test_every_builtin_provider_answers_locally() -> None:
    # Whatever the built-in catalog holds, each of its providers has a local adapter
    registry = provider_registry(Settings(environment="local", simulated_latency_ms=0))
    request = ProviderRequest(
        custom_id="seq-0",
        customer_item_id="a",
        operation="responses",
        model="m",
        provider_model_id="m",
        input={"messages": [{"role": "user", "content": "hi"}]},
        max_output_tokens=64,
    )
    providers = registry.providers
    assert providers
    for provider in providers:
        assert registry.sync(provider.slug).complete(request).status == "completed"
        if provider.execution_mode == "batch_api":
            assert registry.batch_api(provider.slug).submit([request]).startswith("simbatch_")
    forget_simulated_jobs()


def test_batch_poll_interval_follows_the_simulated_job_time_locally() -> None:
    local = ProviderRegistry(Settings(simulated_batch_poll_seconds=1), [VENDOR])
    assert local.batch_poll_interval_seconds == 0.5
    instant = ProviderRegistry(Settings(simulated_batch_poll_seconds=0), [VENDOR])
    assert instant.batch_poll_interval_seconds == 0.1
    deployed = ProviderRegistry(
        Settings(environment="test", provider_batch_poll_interval_seconds=45), [VENDOR]
    )
    assert deployed.batch_poll_interval_seconds == 45
