"""Provider slug -> adapter.

Local mode (`environment == "local"`, the same switch GET /v1/runtime reports as
`provider_simulation`) answers every catalog provider with the simulator: a SyncProvider
for every provider (the direct chat path calls vendors synchronously too) and a
BatchApiProvider for those whose lanes run as vendor batch jobs. Outside local mode a
provider needs a real adapter registered in PRODUCTION_SYNC_ADAPTERS /
PRODUCTION_BATCH_ADAPTERS; there are none yet, so asking for one raises
ProviderNotConfigured: no fake answers ever leave a deployed stack.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Final

from batchroute.catalog import builtin_catalog
from batchroute.clock import Clock
from batchroute.config import Settings
from batchroute.domain.catalog import Catalog, ExecutionMode, Provider
from batchroute.errors import PermanentError
from batchroute.providers.base import BatchApiProvider, SyncProvider
from batchroute.providers.simulated import (
    SimulatedBatchApiProvider,
    SimulatedSyncProvider,
    SimulationConfig,
)

SyncAdapterFactory = Callable[[Provider, Settings], SyncProvider]
BatchAdapterFactory = Callable[[Provider, Settings], BatchApiProvider]

# Real adapters, by provider slug. Empty until the first one is written.
PRODUCTION_SYNC_ADAPTERS: Final[dict[str, SyncAdapterFactory]] = {}
PRODUCTION_BATCH_ADAPTERS: Final[dict[str, BatchAdapterFactory]] = {}


class ProviderNotConfigured(PermanentError):
    """No adapter can serve this provider here (unknown slug, or no real adapter yet)."""

    code = "provider_not_configured"


class ProviderRegistry:
    def __init__(
        self,
        settings: Settings,
        providers: Iterable[Provider],
        *,
        clock: Clock | None = None,
        sleeper: Callable[[float], None] | None = None,
    ) -> None:
        self.settings = settings
        self.simulated = settings.environment == "local"
        self._providers = {p.slug: p for p in providers}
        self._config = SimulationConfig.from_settings(settings)
        self._clock = clock
        self._sleeper = sleeper or time.sleep
        self._lock = threading.Lock()
        self._sync: dict[str, SyncProvider] = {}
        self._batch: dict[str, BatchApiProvider] = {}

    @property
    def batch_poll_interval_seconds(self) -> float:
        """How long to wait between polls of a running batch job: the setting, or locally at
        most half a simulated job's run time (but not under 0.1 s)."""
        interval = self.settings.provider_batch_poll_interval_seconds
        if self.simulated:
            interval = min(interval, max(0.1, self._config.batch_seconds / 2))
        return interval

    @property
    def providers(self) -> tuple[Provider, ...]:
        return tuple(self._providers.values())

    def provider(self, slug: str) -> Provider:
        found = self._providers.get(slug)
        if found is None:
            raise ProviderNotConfigured(f"unknown provider {slug!r}")
        return found

    def execution_mode(self, slug: str) -> ExecutionMode:
        return self.provider(slug).execution_mode

    def sync(self, slug: str) -> SyncProvider:
        """The per-item adapter of any provider (batch lanes of sync providers, direct chat)."""
        provider = self.provider(slug)
        with self._lock:
            adapter = self._sync.get(slug)
            if adapter is None:
                adapter = self._make_sync(provider)
                self._sync[slug] = adapter
            return adapter

    def batch_api(self, slug: str) -> BatchApiProvider:
        """The vendor batch adapter of a provider whose lanes run as batch jobs."""
        provider = self.provider(slug)
        if provider.execution_mode != "batch_api":
            raise ProviderNotConfigured(f"provider {slug!r} runs its lanes synchronously, not as batch jobs")
        with self._lock:
            adapter = self._batch.get(slug)
            if adapter is None:
                adapter = self._make_batch(provider)
                self._batch[slug] = adapter
            return adapter

    def _make_sync(self, provider: Provider) -> SyncProvider:
        if self.simulated:
            return SimulatedSyncProvider(
                provider.slug, self._config, sleeper=self._sleeper, clock=self._clock
            )
        factory = PRODUCTION_SYNC_ADAPTERS.get(provider.slug)
        if factory is None:
            raise ProviderNotConfigured(_no_adapter(provider, "synchronous", self.settings))
        return factory(provider, self.settings)

    def _make_batch(self, provider: Provider) -> BatchApiProvider:
        if self.simulated:
            return SimulatedBatchApiProvider(provider.slug, self._config, clock=self._clock)
        factory = PRODUCTION_BATCH_ADAPTERS.get(provider.slug)
        if factory is None:
            raise ProviderNotConfigured(_no_adapter(provider, "batch API", self.settings))
        return factory(provider, self.settings)


def provider_registry(
    settings: Settings,
    catalog: Catalog | None = None,
    *,
    clock: Clock | None = None,
    sleeper: Callable[[float], None] | None = None,
) -> ProviderRegistry:
    """The registry over a catalog's providers (the built-in catalog by default)."""
    providers = (catalog or builtin_catalog()).providers
    return ProviderRegistry(settings, providers, clock=clock, sleeper=sleeper)


def _no_adapter(provider: Provider, kind: str, settings: Settings) -> str:
    return (
        f"provider {provider.slug!r} has no {kind} adapter in the {settings.environment} environment: "
        "only local mode simulates providers, and no real adapter is registered yet "
        "(batchroute/providers/registry.py); disable the provider or add its adapter"
    )
