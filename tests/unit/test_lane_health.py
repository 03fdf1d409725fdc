"""Lane health refresh: heartbeats for lanes of providers that answered, daily capacity
reset at UTC midnight, nothing written for providers down or unchecked."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from batchroute.catalog import builtin_catalog
from batchroute.clock import FixedClock
from batchroute.config import Settings
from batchroute.domain.catalog.catalog import Lane, Provider
from batchroute.providers.base import ProviderUnavailable
from batchroute.providers.credentials import ProviderNotConfigured
from batchroute.services.catalog.lane_health import (
    AdapterProviderHealth,
    ProviderCheck,
    SimulatedProviderHealth,
    provider_health_for,
    refresh_lane_heartbeats,
)

CATALOG = builtin_catalog()


class FakeHeartbeats:
    """In-memory lane live state with the store's daily-reset semantics."""

    def __init__(self) -> None:
        self.lanes: dict[str, dict[str, object]] = {}

    def heartbeat(self, lane_id: str, remaining_capacity_items: int, at: str) -> bool:
        self.lanes.setdefault(lane_id, {}).update(remaining=remaining_capacity_items, at=at)
        return True

    def heartbeat_with_daily_reset(
        self, lane_id: str, *, at: str, day: str, daily_capacity_items: int
    ) -> bool:
        lane = self.lanes.setdefault(lane_id, {})
        lane["at"] = at
        if lane.get("day") != day:
            lane.update(day=day, remaining=daily_capacity_items)
            return True
        return False


def _lanes_of(slug: str) -> set[str]:
    return {lane.lane_id for lane in CATALOG.lanes if lane.provider == slug}


def test_simulated_providers_all_up_refresh_every_lane_and_reset_capacity_once_a_day() -> None:
    # Given a clock just before UTC midnight and an empty live state
    clock = FixedClock(datetime(2026, 11, 21, 23, 59, tzinfo=UTC))
    store = FakeHeartbeats()
    health = SimulatedProviderHealth()
    # When the sweeper refreshes lanes
    report = refresh_lane_heartbeats(CATALOG, store, health, clock)
    # Then every lane got a heartbeat and its full daily capacity
    assert set(report.refreshed) == {lane.lane_id for lane in CATALOG.lanes}
    assert set(report.capacity_reset) == set(report.refreshed)
    lane = "groq/meta-llama/Llama-3.1-8B-Instruct"
    assert store.lanes[lane]["remaining"] == 500_000
    # And capacity used during the day survives later heartbeats of the same day
    store.lanes[lane]["remaining"] = 12
    clock.advance(seconds=30)
    assert refresh_lane_heartbeats(CATALOG, store, health, clock).capacity_reset == []
    assert store.lanes[lane]["remaining"] == 12
    assert store.lanes[lane]["at"] == "2026-11-21T23:59:30.000Z"
    # And the first heartbeat after UTC midnight resets it
    clock.advance(seconds=30)
    assert lane in refresh_lane_heartbeats(CATALOG, store, health, clock).capacity_reset
    assert store.lanes[lane]["remaining"] == 500_000


def test_a_provider_marked_down_gets_no_heartbeat() -> None:
    store = FakeHeartbeats()
    report = refresh_lane_heartbeats(
        CATALOG, store, SimulatedProviderHealth(["groq"]), FixedClock(datetime(2026, 11, 21, tzinfo=UTC))
    )
    assert report.providers_down == ["groq"]
    assert not _lanes_of("groq") & set(store.lanes)
    assert _lanes_of("fireworks") <= set(store.lanes)


class Adapters:
    """A registry whose adapters answer the health check as told."""

    def __init__(self, *, unconfigured: set[str], failing: set[str]) -> None:
        self.unconfigured, self.failing = unconfigured, failing

    def sync(self, slug: str) -> object:
        if slug in self.unconfigured:
            raise ProviderNotConfigured(f"{slug} has no key")
        registry = self

        class Adapter:
            def check(self) -> list[str]:
                if slug in registry.failing:
                    raise ProviderUnavailable("unreachable", code="provider_unreachable")
                return [lane.provider_model_id for lane in CATALOG.lanes if lane.provider == slug]

        return Adapter()


def test_deployed_each_adapter_answers_for_its_provider() -> None:
    # Given OpenAI without its key and Groq unreachable
    store = FakeHeartbeats()
    health = AdapterProviderHealth(Adapters(unconfigured={"openai"}, failing={"groq"}))
    report = refresh_lane_heartbeats(CATALOG, store, health, FixedClock())
    # Then OpenAI is unchecked, Groq down, and every other provider's lanes get a heartbeat
    assert report.providers_unchecked == ["openai"] and report.providers_down == ["groq"]
    assert not (_lanes_of("openai") | _lanes_of("groq")) & set(store.lanes)
    assert _lanes_of("anthropic") | _lanes_of("fireworks") <= set(store.lanes)


def test_reported_capacity_is_written_as_reported() -> None:
    class Reporting:
        def check(self, provider: Provider, lanes: Sequence[Lane], now: datetime) -> ProviderCheck:
            return ProviderCheck(
                provider.slug, healthy=True, remaining_by_lane={lane.lane_id: 3 for lane in lanes}
            )

    store = FakeHeartbeats()
    refresh_lane_heartbeats(CATALOG, store, Reporting(), FixedClock())
    assert {lane["remaining"] for lane in store.lanes.values()} == {3}
    assert all("day" not in lane for lane in store.lanes.values())


def test_health_is_simulated_locally_and_asked_of_the_adapters_in_aws() -> None:
    adapters = Adapters(unconfigured=set(), failing=set())
    local = provider_health_for(Settings(simulated_providers_down=["groq"]), adapters)
    assert isinstance(local, SimulatedProviderHealth) and local.down == {"groq"}
    assert isinstance(provider_health_for(Settings(environment="test"), adapters), AdapterProviderHealth)
