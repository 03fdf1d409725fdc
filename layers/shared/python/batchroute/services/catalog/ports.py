"""What the catalog context needs from live lane state, declared once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from batchroute.domain.catalog.catalog import LaneLive
from batchroute.providers.base import SyncProvider


class SyncProviders(Protocol):
    """providers/registry.py:ProviderRegistry: the per-item (sync) adapter of a provider."""

    def sync(self, slug: str) -> SyncProvider: ...


class LiveStates(Protocol):
    """services/chat/state.py:LaneStateCache (or the lane store): each lane's live state."""

    def live_states(self, *, consistent: bool = False) -> dict[str, LaneLive]: ...


class DeploymentSettings(Protocol):
    """The deployment's settings the catalog context reads (config.py:Settings satisfies it):
    routing guards, provider simulation and what /v1/runtime reports."""

    @property
    def environment(self) -> str: ...

    @property
    def read_only(self) -> bool: ...

    @property
    def payments_secret_name(self) -> str | None: ...

    @property
    def provider_allowlist(self) -> Sequence[str]: ...

    @property
    def launch_provider_guard(self) -> bool: ...

    @property
    def lane_heartbeat_ttl_seconds(self) -> int: ...

    @property
    def cache_aware_routing(self) -> bool: ...

    @property
    def simulated_providers_down(self) -> Sequence[str]: ...
