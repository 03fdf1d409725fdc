"""A lane marked unavailable in the live state (moto): its heartbeat goes at once, none is
taken until the mark's end, and the first one after it clears the mark."""

from __future__ import annotations

import pytest

from batchroute.adapters.dynamo.lanes import LaneStateStore
from batchroute_tools.local.provision import LocalStack

LANE = "openai/gpt-4o-mini"
T0 = "2026-11-28T12:00:00.000Z"
UNTIL = "2026-11-28T13:00:00.000Z"


@pytest.fixture
def store(local_aws: LocalStack) -> LaneStateStore:
    return LaneStateStore(local_aws.tables["controls"])


def test_a_marked_lane_loses_its_heartbeat_and_takes_none_until_the_mark_ends(store: LaneStateStore) -> None:
    # Given a healthy lane
    assert store.heartbeat_with_daily_reset(LANE, at=T0, day="2026-11-28", daily_capacity_items=100)
    # When its vendor account runs out of credit
    store.mark_unavailable(
        LANE, code="insufficient_quota", reason="insufficient_quota: out of credit", until=UNTIL, at=T0
    )
    # Then it has no heartbeat (routing leaves it at once) and says why; capacity is kept
    live = store.live_states(consistent=True)[LANE]
    assert live.last_heartbeat_at == ""
    assert live.unavailable_reason == "insufficient_quota: out of credit"
    assert live.remaining_capacity_items == 100
    # And the sweeper's heartbeats before the end of the mark are refused
    assert not store.heartbeat(LANE, 50, "2026-11-28T12:30:00.000Z")
    assert not store.heartbeat_with_daily_reset(
        LANE, at="2026-11-28T12:31:00.000Z", day="2026-11-28", daily_capacity_items=100
    )
    assert store.live_states(consistent=True)[LANE].last_heartbeat_at == ""
    # When the mark has ended, the next heartbeat takes and clears it
    assert store.heartbeat(LANE, 80, "2026-11-28T13:00:01.000Z")
    live = store.live_states(consistent=True)[LANE]
    assert (live.last_heartbeat_at, live.unavailable_reason) == ("2026-11-28T13:00:01.000Z", "")


def test_a_lane_with_no_live_record_can_be_marked(store: LaneStateStore) -> None:
    store.mark_unavailable(LANE, code="insufficient_quota", reason="r", until=UNTIL, at=T0)
    live = store.live_states(consistent=True)[LANE]
    assert (live.remaining_capacity_items, live.last_heartbeat_at, live.unavailable_reason) == (0, "", "r")
    assert store.heartbeat_with_daily_reset(
        LANE, at="2026-11-28T13:05:00.000Z", day="2026-11-28", daily_capacity_items=100
    )
    assert store.live_states(consistent=True)[LANE].remaining_capacity_items == 100
