"""Lane health: each sweep asks every enabled provider whether it is up and refreshes the
heartbeats of the lanes of those that answered; a provider whose account cannot serve
(`mark_account_down`) has its lanes marked unavailable and the operator told.

A provider that is down, or that cannot be checked, gets no heartbeat: its lanes turn
`stale_heartbeat` once the TTL passes, which is the honest answer. Deployed, each provider's
adapter answers (`AdapterProviderHealth`: its model list, no tokens spent; a provider without
its key is unchecked). Locally `SimulatedProviderHealth` reports every enabled provider up
except those named in SIMULATED_PROVIDERS_DOWN, so the local stack routes at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Protocol

from aws_lambda_powertools.metrics import MetricUnit

from batchroute.clock import Clock, isoformat
from batchroute.domain.catalog.catalog import Catalog, Lane, Provider
from batchroute.errors import PermanentError, TransientError
from batchroute.observability import logger, metrics
from batchroute.services.catalog.ports import DeploymentSettings


@dataclass(frozen=True)
class ProviderCheck:
    provider: str
    healthy: bool
    # Remaining capacity the provider reported per lane id. Lanes it does not report are
    # counted by the service instead: reset to their daily capacity at UTC midnight and
    # decremented as batches take items.
    remaining_by_lane: Mapping[str, int] = field(default_factory=dict)
    detail: str = ""


class ProviderHealth(Protocol):
    def check(self, provider: Provider, lanes: Sequence[Lane], now: datetime) -> ProviderCheck | None:
        """The provider's health, or None when there is no way to check it."""
        ...


class LaneHeartbeats(Protocol):
    def heartbeat(self, lane_id: str, remaining_capacity_items: int, at: str) -> bool: ...

    def heartbeat_with_daily_reset(
        self, lane_id: str, *, at: str, day: str, daily_capacity_items: int
    ) -> bool: ...


class SimulatedProviderHealth:
    """Local mode: the simulated providers are up unless configured down."""

    def __init__(self, down: Iterable[str] = ()) -> None:
        self.down = frozenset(down)

    def check(self, provider: Provider, lanes: Sequence[Lane], now: datetime) -> ProviderCheck:
        if provider.slug in self.down:
            return ProviderCheck(
                provider.slug, healthy=False, detail="marked down (SIMULATED_PROVIDERS_DOWN)"
            )
        return ProviderCheck(provider.slug, healthy=True, detail="simulated provider up")


@dataclass(eq=False)
class AdapterProviderHealth:
    """Deployed stacks: each provider's own adapter answers the check (its model list: no
    tokens spent). A provider that is not configured here (no key yet) is unchecked, one that
    fails the call is down; either way its lanes go stale and routing leaves them alone."""

    registry: ProviderAdapters

    def check(self, provider: Provider, lanes: Sequence[Lane], now: datetime) -> ProviderCheck | None:
        try:
            adapter = self.registry.sync(provider.slug)
        except PermanentError:  # not configured in this environment
            return None
        try:
            listed = set(adapter.check())
        except (PermanentError, TransientError) as exc:
            return ProviderCheck(provider.slug, healthy=False, detail=str(exc)[:300])
        missing = sorted(lane.provider_model_id for lane in lanes if lane.provider_model_id not in listed)
        detail = f"{len(listed)} models listed" + (f"; not listed: {', '.join(missing)}" if missing else "")
        return ProviderCheck(provider.slug, healthy=True, detail=detail)


class ProviderAdapters(Protocol):
    def sync(self, slug: str) -> Any: ...


def provider_health_for(settings: DeploymentSettings, registry: ProviderAdapters) -> ProviderHealth:
    """Locally the emulated providers are up unless configured down; deployed, each adapter
    answers for its provider."""
    if settings.environment == "local":
        return SimulatedProviderHealth(settings.simulated_providers_down)
    return AdapterProviderHealth(registry)


@dataclass
class LaneHealthReport:
    refreshed: list[str] = field(default_factory=list)
    capacity_reset: list[str] = field(default_factory=list)
    providers_down: list[str] = field(default_factory=list)
    providers_unchecked: list[str] = field(default_factory=list)


def refresh_lane_heartbeats(
    catalog: Catalog, store: LaneHeartbeats, health: ProviderHealth, clock: Clock
) -> LaneHealthReport:
    report = LaneHealthReport()
    now = clock.now()
    at = isoformat(now)
    day = now.astimezone(UTC).date().isoformat()
    for provider in catalog.providers:
        if not provider.enabled:
            continue
        lanes = [lane for lane in catalog.lanes if lane.provider == provider.slug]
        check = health.check(provider, lanes, now)
        if check is None:
            report.providers_unchecked.append(provider.slug)
            continue
        if not check.healthy:
            report.providers_down.append(provider.slug)
            continue
        for lane in lanes:
            reported = check.remaining_by_lane.get(lane.lane_id)
            if reported is not None:
                store.heartbeat(lane.lane_id, reported, at)
            elif store.heartbeat_with_daily_reset(
                lane.lane_id, at=at, day=day, daily_capacity_items=lane.daily_capacity_items
            ):
                report.capacity_reset.append(lane.lane_id)
            report.refreshed.append(lane.lane_id)
    if report.providers_unchecked:
        logger.warning(
            "no health check for these providers: their lanes get no heartbeat and go stale",
            extra={"providers": report.providers_unchecked},
        )
    if report.providers_down:
        logger.warning(
            "providers down: their lanes get no heartbeat", extra={"providers": report.providers_down}
        )
    return report


# -- a provider account that cannot serve -------------------------------------------------------

# Failover codes that mean the provider's account cannot serve any lane until a human acts
# (OpenAI's `insufficient_quota`: out of credit; waiting does not clear it).
ACCOUNT_DOWN_CODES: Final = frozenset({"insufficient_quota"})
DEFAULT_UNAVAILABLE_SECONDS: Final = 3600.0


class LaneAvailability(Protocol):
    """adapters/dynamo/lanes.py:LaneStateStore"""

    def mark_unavailable(self, lane_id: str, *, code: str, reason: str, until: str, at: str) -> None: ...


class FailureError(Protocol):
    """What `mark_account_down` reads of the failure (an ItemError, a provider error)."""

    @property
    def code(self) -> str: ...

    @property
    def message(self) -> str: ...


def mark_account_down(
    catalog: Catalog,
    availability: LaneAvailability,
    provider: str,
    error: FailureError,
    *,
    now: datetime,
    seconds: float = DEFAULT_UNAVAILABLE_SECONDS,
) -> list[str]:
    """Every lane of `provider` out of routing for `seconds`, and the operator told (an
    error log and the `LanesMarkedUnavailable` metric, which the stack alarms on): the
    vendor account cannot serve until someone acts (adds credit). Returns the lane ids."""
    lane_ids = [lane.lane_id for lane in catalog.lanes if lane.provider == provider]
    until = isoformat(now + timedelta(seconds=seconds))
    reason = f"{error.code}: {error.message}"
    for lane_id in lane_ids:
        try:
            availability.mark_unavailable(
                lane_id, code=error.code, reason=reason, until=until, at=isoformat(now)
            )
        except Exception:  # the failover goes on; the alert below still goes out
            logger.warning("could not mark the lane unavailable", extra={"lane_id": lane_id}, exc_info=True)
    logger.error(
        "provider account cannot serve: its lanes are marked unavailable; operator action needed",
        extra={
            "provider": provider,
            "code": error.code,
            "error": error.message,
            "lanes": lane_ids,
            "until": until,
        },
    )
    metrics.add_metric(name="LanesMarkedUnavailable", unit=MetricUnit.Count, value=len(lane_ids))
    return lane_ids
