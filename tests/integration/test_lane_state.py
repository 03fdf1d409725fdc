"""Lane live state on DynamoDB (moto): heartbeats, daily reset, capacity, and the sweeper
refreshing heartbeats (a provider marked down goes stale)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from batchroute.adapters.dynamo.lanes import LaneStateStore, lane_key
from batchroute.catalog import builtin_catalog
from batchroute.clock import FixedClock, isoformat
from batchroute.config import Settings
from batchroute.services.catalog.catalog import CatalogService
from batchroute.services.catalog.lane_health import SimulatedProviderHealth
from batchroute.wiring import Wiring, wiring_for
from batchroute_tools.local.lambda_runtime import context_for, load_handler
from batchroute_tools.local.provision import LocalStack

LLAMA_8B_GROQ = "groq/meta-llama/Llama-3.1-8B-Instruct"
T0 = "2026-11-21T12:00:00.000Z"


@pytest.fixture
def store(local_aws: LocalStack) -> LaneStateStore:
    return LaneStateStore(local_aws.tables["controls"])


def test_heartbeat_round_trips_with_slashes_in_the_model_id(store: LaneStateStore) -> None:
    # Given two lanes report in
    assert store.heartbeat(LLAMA_8B_GROQ, 120, T0)
    assert store.heartbeat("openai/gpt-4o-mini", 5, T0)
    # When the live state is read / Then both come back by lane id, in one query
    states = store.live_states(consistent=True)
    assert set(states) == {LLAMA_8B_GROQ, "openai/gpt-4o-mini"}
    assert states[LLAMA_8B_GROQ].remaining_capacity_items == 120
    assert states[LLAMA_8B_GROQ].last_heartbeat_at == T0
    assert lane_key(LLAMA_8B_GROQ)["sk"]["S"] == "LANE#groq#meta-llama/Llama-3.1-8B-Instruct"


def test_a_heartbeat_never_moves_backward(store: LaneStateStore) -> None:
    assert store.heartbeat(LLAMA_8B_GROQ, 10, "2026-11-21T12:05:00.000Z")
    # A late writer with an older heartbeat is refused
    assert not store.heartbeat(LLAMA_8B_GROQ, 99, T0)
    live = store.live_states(consistent=True)[LLAMA_8B_GROQ]
    assert (live.remaining_capacity_items, live.last_heartbeat_at) == (10, "2026-11-21T12:05:00.000Z")


def test_daily_reset_happens_once_per_utc_day(store: LaneStateStore) -> None:
    # Given the first heartbeat of the day: capacity reset to the daily figure
    assert store.heartbeat_with_daily_reset(LLAMA_8B_GROQ, at=T0, day="2026-11-21", daily_capacity_items=100)
    assert store.consume_capacity(LLAMA_8B_GROQ, 40)
    # When later heartbeats of the same day arrive / Then consumption is kept
    assert not store.heartbeat_with_daily_reset(
        LLAMA_8B_GROQ, at="2026-11-21T12:01:00.000Z", day="2026-11-21", daily_capacity_items=100
    )
    live = store.live_states(consistent=True)[LLAMA_8B_GROQ]
    assert (live.remaining_capacity_items, live.last_heartbeat_at) == (60, "2026-11-21T12:01:00.000Z")
    # And the next day starts full again
    assert store.heartbeat_with_daily_reset(
        LLAMA_8B_GROQ, at="2026-11-22T00:00:30.000Z", day="2026-11-22", daily_capacity_items=100
    )
    assert store.live_states(consistent=True)[LLAMA_8B_GROQ].remaining_capacity_items == 100


def test_consume_capacity_is_all_or_nothing_and_never_below_zero(store: LaneStateStore) -> None:
    store.heartbeat(LLAMA_8B_GROQ, 10, T0)
    assert store.consume_capacity(LLAMA_8B_GROQ, 10)
    assert not store.consume_capacity(LLAMA_8B_GROQ, 1)
    assert store.live_states(consistent=True)[LLAMA_8B_GROQ].remaining_capacity_items == 0
    assert not store.consume_capacity("fireworks/meta-llama/Llama-3.1-8B-Instruct", 1)  # no live record
    with pytest.raises(ValueError, match="positive"):
        store.consume_capacity(LLAMA_8B_GROQ, 0)


def test_exhausted_capacity_is_zero_until_the_next_daily_reset(store: LaneStateStore) -> None:
    # Given a lane with 10 items left today
    store.heartbeat_with_daily_reset(LLAMA_8B_GROQ, at=T0, day="2026-11-21", daily_capacity_items=100)
    assert store.consume_capacity(LLAMA_8B_GROQ, 90)
    # When a batch runs more items than that on it, and its capacity is exhausted
    assert not store.consume_capacity(LLAMA_8B_GROQ, 25)
    assert store.exhaust_capacity(LLAMA_8B_GROQ, at="2026-11-21T12:01:00.000Z")
    # Then nothing is left today, the heartbeat is kept, and the next day starts full
    live = store.live_states(consistent=True)[LLAMA_8B_GROQ]
    assert (live.remaining_capacity_items, live.last_heartbeat_at) == (0, T0)
    assert store.heartbeat_with_daily_reset(
        LLAMA_8B_GROQ, at="2026-11-22T00:00:30.000Z", day="2026-11-22", daily_capacity_items=100
    )
    assert store.live_states(consistent=True)[LLAMA_8B_GROQ].remaining_capacity_items == 100
    # And a lane with no live record is left without one
    assert not store.exhaust_capacity("fireworks/meta-llama/Llama-3.1-8B-Instruct", at=T0)
    assert "fireworks/meta-llama/Llama-3.1-8B-Instruct" not in store.live_states(consistent=True)


# -- the sweeper ---------------------------------------------------------------------------
@dataclass
class Sweeper:
    wiring: Wiring  # to swap the provider health the handler's wiring built
    run: Callable[[], object]  # one scheduled invocation


@pytest.fixture
def sweeper(local_aws: LocalStack) -> Sweeper:
    handler = load_handler("sweeper")
    context = context_for(
        "sweeper", prefix=local_aws.prefix, region=local_aws.region, account=local_aws.account
    )
    return Sweeper(wiring_for(), lambda: handler({"detail-type": "Scheduled Event", "detail": {}}, context))


def _catalog(store: LaneStateStore, now: datetime) -> CatalogService:
    return CatalogService(builtin_catalog(), store, Settings(), FixedClock(now))


def test_sweeper_refreshes_every_lane_heartbeat(store: LaneStateStore, sweeper: Sweeper) -> None:
    assert isinstance(sweeper.wiring.provider_health, SimulatedProviderHealth)  # local mode
    # Given no live state: every lane is stale
    before = _catalog(store, datetime.now(UTC)).model("gpt-4o-mini")["model"]
    assert before["routing_eligibility"]["eligible"] is False
    # When the scheduled sweeper runs
    sweeper.run()
    # Then every lane has a fresh heartbeat and its daily capacity, and models are eligible
    states = store.live_states(consistent=True)
    assert set(states) == {lane.lane_id for lane in builtin_catalog().lanes}
    assert states["openai/gpt-4o-mini"].remaining_capacity_items == 500_000
    model = _catalog(store, datetime.now(UTC)).model("gpt-4o-mini")["model"]
    assert model["routing_eligibility"] == {"eligible": True, "lanes_available": 1, "reasons": []}


def test_a_provider_marked_down_goes_stale(
    store: LaneStateStore, sweeper: Sweeper, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given every lane heartbeated ten minutes ago
    ten_minutes_ago = isoformat(datetime.now(UTC) - timedelta(minutes=10))
    for lane in builtin_catalog().lanes:
        store.heartbeat(lane.lane_id, lane.daily_capacity_items, ten_minutes_ago)
    # When the sweeper runs with Groq down (SIMULATED_PROVIDERS_DOWN='["groq"]')
    monkeypatch.setattr(sweeper.wiring, "provider_health", SimulatedProviderHealth(["groq"]))
    sweeper.run()
    # Then Groq's lanes kept their old heartbeat and are stale; the others are fresh
    model = _catalog(store, datetime.now(UTC)).model("meta-llama/Llama-3.3-70B-Instruct")["model"]
    status = {lane["provider"]: lane["status"] for lane in model["providers"]}
    assert status["groq"] == "stale_heartbeat"
    assert {s for p, s in status.items() if p != "groq"} == {"available"}
    assert store.live_states(consistent=True)[LLAMA_8B_GROQ].last_heartbeat_at == ten_minutes_ago
