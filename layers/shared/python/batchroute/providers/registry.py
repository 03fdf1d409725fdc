"""Provider slug -> adapter.

Every environment answers a provider through its real adapter, built from the provider's
`ProviderEndpoint` (the environment's data file, catalog/environments.py): the vendor
package named by `endpoint.adapter` makes a SyncProvider for every provider (the direct chat
path calls vendors synchronously too) and a BatchApiProvider for those whose lanes run as
vendor batch jobs. Locally the endpoints point at the vendor emulators, so the very same
adapters talk HTTP to them. A provider without an endpoint here (not enabled in this
environment), or whose key is not set, raises ProviderNotConfigured: no answer is ever made
up outside the emulators.

`settings.simulated_providers` (local only) swaps in the in-process simulator instead, for
the in-process test suites; the adapters have suites of their own against the emulators.

Vendor packages are imported on first use, so a function imports only the SDK-free code of
the vendors it calls. API keys are read per use from Secrets Manager (cached with a max age,
providers/credentials.py); an adapter is rebuilt when its key changes.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Protocol, TypeVar

from batchroute.clock import Clock
from batchroute.config import Settings
from batchroute.domain.catalog.catalog import ExecutionMode, Provider
from batchroute.providers.base import BatchApiProvider, SyncProvider
from batchroute.providers.credentials import ProviderNotConfigured
from batchroute.providers.endpoints import AdapterKind, ProviderEndpoint
from batchroute.providers.simulated import (
    SimulatedBatchApiProvider,
    SimulatedSyncProvider,
    SimulationConfig,
)

# The vendor package of each adapter kind: `make_sync(endpoint, api_key)`, `make_batch(...)`.
ADAPTER_PACKAGES: Final[dict[AdapterKind, str]] = {
    "openai": "batchroute.providers.openai",
    "openai_compatible": "batchroute.providers.openai",
    "anthropic": "batchroute.providers.anthropic",
    "gemini": "batchroute.providers.gemini",
    "bedrock": "batchroute.providers.bedrock",
}

T = TypeVar("T")

__all__ = ["ADAPTER_PACKAGES", "ProviderNotConfigured", "ProviderRegistry"]


class KeySource(Protocol):
    def api_key(self, slug: str) -> str: ...


class ProviderRegistry:
    def __init__(
        self,
        settings: Settings,
        providers: Iterable[Provider],
        *,
        endpoints: Mapping[str, ProviderEndpoint] | None = None,
        keys: KeySource | None = None,
        clock: Clock | None = None,
        sleeper: Callable[[float], None] | None = None,
    ) -> None:
        self.settings = settings
        self.simulated = settings.environment == "local" and settings.simulated_providers
        self.local = settings.environment == "local"
        self._providers = {p.slug: p for p in providers}
        self._endpoints = dict(endpoints or {})
        self._keys = keys
        self._config = SimulationConfig.from_settings(settings)
        self._clock = clock
        self._sleeper = sleeper or time.sleep
        self._lock = threading.Lock()
        self._sync: dict[str, tuple[str | None, SyncProvider]] = {}
        self._batch: dict[str, tuple[str | None, BatchApiProvider]] = {}

    @property
    def batch_poll_interval_seconds(self) -> float:
        """How long to wait between polls of a running batch job: the setting, or locally at
        most half an emulated job's run time (but not under 0.1 s)."""
        interval = self.settings.provider_batch_poll_interval_seconds
        if self.local:
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

    def endpoint(self, slug: str) -> ProviderEndpoint:
        found = self._endpoints.get(slug)
        if found is None:
            raise ProviderNotConfigured(
                f"provider {slug!r} is not enabled in the {self.settings.environment} environment "
                f"(catalog/data/environments/{self.settings.environment}.toml)"
            )
        return found

    def execution_mode(self, slug: str) -> ExecutionMode:
        return self.provider(slug).execution_mode

    def sync(self, slug: str) -> SyncProvider:
        """The per-item adapter of any provider (batch lanes of sync providers, direct chat)."""
        provider = self.provider(slug)
        if self.simulated:
            return self._cached(self._sync, slug, None, lambda: self._simulated_sync(provider))
        endpoint = self.endpoint(slug)
        key = self._key(endpoint)
        return self._cached(self._sync, slug, key, lambda: self._package(endpoint).make_sync(endpoint, key))

    def batch_api(self, slug: str) -> BatchApiProvider:
        """The vendor batch adapter of a provider whose lanes run as batch jobs."""
        provider = self.provider(slug)
        if provider.execution_mode != "batch_api":
            raise ProviderNotConfigured(f"provider {slug!r} runs its lanes synchronously, not as batch jobs")
        if self.simulated:
            return self._cached(
                self._batch,
                slug,
                None,
                lambda: SimulatedBatchApiProvider(slug, self._config, clock=self._clock),
            )
        endpoint = self.endpoint(slug)
        key = self._key(endpoint)
        return self._cached(self._batch, slug, key, lambda: self._package(endpoint).make_batch(endpoint, key))

    def _simulated_sync(self, provider: Provider) -> SyncProvider:
        return SimulatedSyncProvider(provider.slug, self._config, sleeper=self._sleeper, clock=self._clock)

    def _key(self, endpoint: ProviderEndpoint) -> str | None:
        if endpoint.credentials != "api_key":
            return None
        if self._keys is None:
            raise ProviderNotConfigured(f"no key source for provider {endpoint.slug!r}")
        return self._keys.api_key(endpoint.slug)

    def _cached(
        self, cache: dict[str, tuple[str | None, T]], slug: str, key: str | None, make: Callable[[], T]
    ) -> T:
        with self._lock:
            found = cache.get(slug)
            if found is None or found[0] != key:  # first use, or the key was rotated
                found = (key, make())
                cache[slug] = found
            return found[1]

    @staticmethod
    def _package(endpoint: ProviderEndpoint) -> Any:
        try:
            return importlib.import_module(ADAPTER_PACKAGES[endpoint.adapter])
        except ImportError as exc:  # a layer built without the vendor's package: the lane fails over
            raise ProviderNotConfigured(
                f"provider {endpoint.slug!r}: no {endpoint.adapter} adapter in this build ({exc.name})"
            ) from exc
